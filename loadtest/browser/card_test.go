package browser

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// A fan pays by card on the booking page: both ways to pay are offered
// (the stack's simulator takes both), "Pay by card" sends the fan to the
// provider's own card page (no provider script in onsale's page), whose
// approval comes back by webhook: the authorization is captured after the
// seats are booked and the tickets appear. A declined card first leaves
// the seats held for another try.
func TestCardOnProviderPage(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	b := browser(t)
	fan := tab(t, b)
	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "admitted", `document.body.dataset.state === "admitted"`, 30*time.Second)
	click(t, fan, "go-book")
	until(t, fan, "the seat map", `!!document.getElementById("seat-AUD-F-3") && !document.getElementById("seat-AUD-F-3").disabled`, 15*time.Second)
	click(t, fan, "seat-AUD-F-3")
	click(t, fan, "hold-picked")
	until(t, fan, "the hold, both ways to pay offered", `!document.getElementById("held").hidden && !document.getElementById("pay").hidden && !document.getElementById("pay-card").hidden && /by card/.test(document.getElementById("pay-card").textContent)`, 10*time.Second)
	look(t, fan, "card-held")

	click(t, fan, "pay-card")
	until(t, fan, "the payment step, card wording", `!document.getElementById("paying").hidden && /card page/.test(document.getElementById("paying-how").textContent)`, 10*time.Second)
	look(t, fan, "card-paying")
	click(t, fan, "checkout")
	until(t, fan, "the provider's card page", `!!document.getElementById("decline") && /Card payment/.test(document.querySelector("h1").textContent)`, 10*time.Second)
	look(t, fan, "card-provider-page")
	click(t, fan, "decline")
	until(t, fan, "back, the seats still held", `!document.getElementById("held").hidden && /did not go through/.test(document.getElementById("message").textContent)`, 20*time.Second)
	shot(t, fan, "card-declined")

	click(t, fan, "pay-card")
	checkout(t, fan, true)
	until(t, fan, "the ticket", `document.body.dataset.tickets === "1" && document.querySelectorAll(".ticket img").length === 1`, 30*time.Second)
	look(t, fan, "card-tickets")
	var captured bool
	if err := s.db.QueryRow(ctx, `SELECT captured_at IS NOT NULL FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED'`, ev).Scan(&captured); err != nil || !captured {
		t.Fatalf("the card booking: captured %v (%v); want CONFIRMED and captured", captured, err)
	}
}

// The booking page with a real provider's adapter (the core's core/stripe
// or core/razorpay, against the simulator's dialect of that provider):
// only the way to pay the provider takes is offered, the fan is sent to
// the page the provider names (a Stripe Checkout Session's, a Razorpay
// link's), and the provider's webhook, in its own shape and signature,
// brings the tickets.
func TestPayThroughProviders(t *testing.T) {
	for _, c := range []struct {
		provider, button, hidden, heading string
	}{
		{"stripe", "pay-card", "pay", "Card payment"},
		{"razorpay", "pay", "pay-card", "UPI payment request"},
	} {
		t.Run(c.provider, func(t *testing.T) {
			s := newStackOf(t, c.provider)
			ev := s.event(t, -time.Minute)
			fan := tab(t, browser(t))
			if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
				t.Fatal(err)
			}
			until(t, fan, "admitted", `document.body.dataset.state === "admitted"`, 30*time.Second)
			click(t, fan, "go-book")
			until(t, fan, "the seat map", `!!document.getElementById("seat-AUD-G-4") && !document.getElementById("seat-AUD-G-4").disabled`, 15*time.Second)
			click(t, fan, "seat-AUD-G-4")
			click(t, fan, "hold-picked")
			until(t, fan, "the hold, one way to pay", fmt.Sprintf(`!document.getElementById("held").hidden && !document.getElementById(%q).hidden && document.getElementById(%q).hidden`, c.button, c.hidden), 15*time.Second)
			look(t, fan, c.provider+"-held")
			click(t, fan, c.button)
			until(t, fan, "the payment step with the provider's page", `!document.getElementById("paying").hidden && /\/checkout\/(cs|pi|plink)_/.test(document.getElementById("checkout").href)`, 15*time.Second)
			click(t, fan, "checkout")
			until(t, fan, "the provider's page", fmt.Sprintf(`!!document.getElementById("approve") && document.querySelector("h1").textContent.includes(%q)`, c.heading), 10*time.Second)
			shot(t, fan, c.provider+"-provider-page")
			click(t, fan, "approve")
			until(t, fan, "the ticket", `document.body.dataset.tickets === "1" && document.querySelectorAll(".ticket img").length === 1`, 30*time.Second)
			look(t, fan, c.provider+"-tickets")
			// The provider's parameters on the way back (Razorpay's ids and
			// signature) left the address bar and the history.
			arrived, now := text(t, fan, `performance.getEntriesByType("navigation")[0].name`), text(t, fan, `location.href`)
			if want := c.provider == "razorpay"; strings.Contains(arrived, "razorpay_signature=") != want || strings.Contains(now, "?") {
				t.Fatalf("came back to %s, now at %s; want the provider's parameters on arrival (%v) and none now", arrived, now, want)
			}
			var payment string
			if err := s.db.QueryRow(ctx, `SELECT payment_id FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED' AND captured_at IS NOT NULL`, ev).Scan(&payment); err != nil {
				t.Fatalf("no confirmed, captured booking: %v", err)
			}
			t.Logf("%s: the booking paid by %s", c.provider, payment)
		})
	}
}
