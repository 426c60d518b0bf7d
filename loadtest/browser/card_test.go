package browser

import (
	"fmt"
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
