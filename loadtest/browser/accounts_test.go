package browser

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// click clicks the element with the id once it is there and visible.
func click(t *testing.T, c context.Context, id string) {
	t.Helper()
	until(t, c, id+" to click", fmt.Sprintf(`(() => { const e = document.getElementById(%q); return !!e && e.offsetParent !== null && !e.disabled })()`, id), 15*time.Second)
	if err := chromedp.Do(c, chromedp.Click(chromedp.ID(id))); err != nil {
		t.Fatalf("click %s: %v", id, err)
	}
}

func text(t *testing.T, c context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(c, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return s
}

// checkout goes from the booking page's Pay step through the provider's
// checkout page, pressing approve or decline, back to the booking page.
func checkout(t *testing.T, c context.Context, approve bool) {
	t.Helper()
	until(t, c, "the payment step", `!document.getElementById("paying").hidden && document.getElementById("checkout").href.includes("/checkout/")`, 15*time.Second)
	click(t, c, "checkout")
	until(t, c, "the provider's checkout", `!!document.getElementById("approve")`, 10*time.Second)
	if approve {
		click(t, c, "approve")
	} else {
		click(t, c, "decline")
	}
}

const largeQR = `[...document.querySelectorAll(".ticket img")].every(i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().width >= 240)`

// The signed-in fan's purchase, start to finish: an event that requires an
// account asks for it (sign in by the SMS code), a declined payment is paid
// again on the same hold (a new Idempotency-Key per attempt), the tickets
// are then in My tickets in a new browser context (signed in again) and
// behind the SMS link opened in a fresh context, without signing in.
// Every page is looked at, desktop and phone, with axe-core.
func TestSignedInFan(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	s.dial(t, ev, `{"account_required":true}`)
	const phone = "+919812345678"
	b := browser(t)
	fan := tab(t, b)

	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the waiting room asking to sign in", `document.body.dataset.state === "signin"`, 20*time.Second)
	look(t, fan, "waiting-signin")
	s.signIn(t, fan, phone)
	until(t, fan, "admission once signed in", `document.body.dataset.state === "admitted"`, 30*time.Second)
	if title := text(t, fan, `document.title`); !strings.HasPrefix(title, "Your turn") {
		t.Errorf("title at the fan's turn %q; want it to say so", title)
	}
	look(t, fan, "waiting-admitted")
	click(t, fan, "go-book")
	until(t, fan, "the seat map", `!!document.getElementById("seat-AUD-E-5") && !document.getElementById("seat-AUD-E-5").disabled`, 15*time.Second)
	if when := text(t, fan, `document.getElementById("event-when").textContent`); !strings.Contains(when, ":") {
		t.Errorf("the booking page's show time reads %q; want a date and a time", when)
	}
	look(t, fan, "book-choose")
	click(t, fan, "seat-AUD-E-5")
	click(t, fan, "seat-AUD-E-6")
	if total := text(t, fan, `document.getElementById("picked-total").textContent`); !strings.Contains(total, "₹") {
		t.Errorf("before Hold the page reads %q; want the total", total)
	}
	click(t, fan, "hold-picked")
	until(t, fan, "the hold", `!document.getElementById("held").hidden && /\d:\d\d/.test(document.getElementById("hold-left").textContent)`, 10*time.Second)
	if total := text(t, fan, `document.getElementById("held-total").textContent`); !strings.Contains(total, "₹") {
		t.Errorf("the held screen reads %q; want the total", total)
	}
	if got := text(t, fan, `document.getElementById("phone").value`); got != phone {
		t.Errorf("the tickets' phone is %q; want the account's %q", got, phone)
	}
	if err := chromedp.Do(fan, chromedp.SendKeys(chromedp.ID("email"), "fan@example.in")); err != nil {
		t.Fatal(err)
	}
	look(t, fan, "book-held")

	// Declined, then paid again on the same hold.
	click(t, fan, "pay")
	checkout(t, fan, false)
	until(t, fan, "the hold again after the decline", `!document.getElementById("held").hidden && /did not go through/.test(document.getElementById("message").textContent)`, 20*time.Second)
	look(t, fan, "book-declined")
	click(t, fan, "pay")
	checkout(t, fan, true)
	until(t, fan, "two large QR tickets", `document.body.dataset.tickets === "2" && `+largeQR, 20*time.Second)
	look(t, fan, "book-tickets")
	var failed, confirmed int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'FAILED'), count(*) FILTER (WHERE status = 'CONFIRMED') FROM bookings WHERE event_id = $1`, ev).Scan(&failed, &confirmed); err != nil || failed != 1 || confirmed != 1 {
		t.Fatalf("bookings: %d FAILED, %d CONFIRMED (%v); want one of each, on one hold", failed, confirmed, err)
	}

	// My tickets on another device: a new browser context, signed in again.
	other := tab(t, b)
	if err := chromedp.Do(other, chromedp.Navigate(s.gateway+"/me")); err != nil {
		t.Fatal(err)
	}
	until(t, other, "the sign-in form on My tickets", `!!document.getElementById("signin-phone")`, 10*time.Second)
	look(t, other, "me-signin")
	s.signIn(t, other, phone)
	until(t, other, "the booking in My tickets", `document.body.dataset.ready === "1" && document.body.dataset.tickets === "2" && `+largeQR, 20*time.Second)
	page := text(t, other, `document.getElementById("bookings").textContent`)
	for _, want := range []string{"Monsoon Nights", "AUD-E-5", "₹"} {
		if !strings.Contains(page, want) {
			t.Errorf("My tickets lacks %q: %q", want, page)
		}
	}
	if err := chromedp.Do(other, chromedp.SendKeys(chromedp.ID("email"), "fan@example.in"), chromedp.Click(chromedp.ID("email-save"))); err != nil {
		t.Fatal(err)
	}
	until(t, other, "the email saved", `document.body.dataset.email === "fan@example.in"`, 10*time.Second)
	look(t, other, "me-tickets")

	// Signed in, /signin goes on to ?next= at once: only ever on this site.
	for _, next := range []string{"/%09/evil.com", "/.//evil.com", "/a/..//evil.com", "//evil.com", "https://evil.com/"} {
		if err := chromedp.Do(other, chromedp.Navigate(s.gateway+"/signin?next="+url.QueryEscape(next))); err != nil {
			t.Fatal(err)
		}
		until(t, other, "the redirect after sign-in", `location.pathname !== "/signin"`, 10*time.Second)
		if got := text(t, other, `location.origin`); got != s.gateway {
			t.Errorf("/signin?next=%s went to %s; want a page of %s", next, got, s.gateway)
		}
	}

	// The SMS link, in a fresh context: no sign-in, the token gone from the address bar.
	link := s.awaitSMS(t, phone, 0, linkText)
	if !strings.HasPrefix(link, s.gateway+"/tickets/") {
		t.Errorf("the SMS link %q is not the gateway's ticket page", link)
	}
	fresh := tab(t, b)
	if err := chromedp.Do(fresh, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	until(t, fresh, "the tickets behind the SMS link", `document.body.dataset.ready === "1" && document.body.dataset.tickets === "2" && `+largeQR, 20*time.Second)
	if h := text(t, fresh, `location.hash`); h != "" {
		t.Errorf("the link's token stays in the address bar: %q", h)
	}
	look(t, fresh, "tickets-link")

	signin := tab(t, b)
	if err := chromedp.Do(signin, chromedp.Navigate(s.gateway+"/signin")); err != nil {
		t.Fatal(err)
	}
	until(t, signin, "the sign-in page", `!!document.getElementById("signin-phone")`, 10*time.Second)
	look(t, signin, "signin")
}

// A guest pays for a first hold and is declined, gives those seats back
// and holds others; the first press of Pay on the second hold is refused
// at once (402), the next press is a new attempt; it pays after the
// waiting-room session ended: the hold's own grant authorizes it. One
// FAILED and one CONFIRMED booking, on two holds.
func TestGuestReleaseAndLatePay(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	s.dial(t, ev, `{"account_required":false,"session_seconds":60}`)
	b := browser(t)
	fan := tab(t, b)
	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "admission", `document.body.dataset.state === "admitted"`, 30*time.Second)
	click(t, fan, "go-book")
	click(t, fan, "seat-AUD-E-5")
	click(t, fan, "hold-picked")
	until(t, fan, "the first hold", `!document.getElementById("held").hidden`, 10*time.Second)
	click(t, fan, "pay")
	checkout(t, fan, false)
	until(t, fan, "the first hold again after the decline", `!document.getElementById("held").hidden && /did not go through/.test(document.getElementById("message").textContent)`, 20*time.Second)
	click(t, fan, "release")
	until(t, fan, "the map after giving the seat back", `document.body.dataset.screen === "choose" && !document.getElementById("seat-AUD-E-5").disabled`, 15*time.Second)
	click(t, fan, "seat-AUD-F-5")
	click(t, fan, "hold-picked")
	until(t, fan, "the second hold", `!document.getElementById("held").hidden && /AUD-F-5/.test(document.getElementById("held-seats").textContent)`, 10*time.Second)

	// An immediate refusal: the provider declines at creation and the
	// core answers 402 payment_declined, keeping that answer for the
	// Idempotency-Key. (paysim declines UPI payments only later, by
	// webhook, so the page's fetch answers it here, replaying it for the
	// refused key as the core would.) The next press must use a new key.
	if _, err := chromedp.Run(fan, chromedp.Evaluate[bool](`(() => {
		const real = window.fetch;
		window.payKeys = [];
		window.fetch = (url, opts) => {
			if (/\/payment$/.test(String(url)) && opts && opts.method === "POST") {
				const key = opts.headers["Idempotency-Key"];
				window.payKeys.push(key);
				if (key === window.payKeys[0]) return Promise.resolve(new Response(JSON.stringify({ error: "payment_declined", message: "the payment was refused: upi_declined" }), { status: 402, headers: { "Content-Type": "application/json" } }));
			}
			return real(url, opts);
		};
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	click(t, fan, "pay")
	until(t, fan, "the hold again after the refusal", `window.payKeys.length === 1 && !document.getElementById("held").hidden && /did not go through/.test(document.getElementById("message").textContent) && !document.getElementById("pay").disabled`, 10*time.Second)
	look(t, fan, "book-refused")

	until(t, fan, "the session's end, said plainly", `document.body.dataset.sessionOver === "1" && /still pay/.test(document.getElementById("session-text").textContent) && /still pay/.test(document.getElementById("session-announce").textContent)`, 90*time.Second)
	look(t, fan, "book-session-over")
	click(t, fan, "pay")
	if keys := text(t, fan, `window.payKeys.join(" ")`); len(strings.Fields(keys)) != 2 || strings.Fields(keys)[0] == strings.Fields(keys)[1] {
		t.Fatalf("Idempotency-Keys after a 402 %q; want a new key for the next attempt", keys)
	}
	checkout(t, fan, true)
	until(t, fan, "the tickets, paid after the session", `document.body.dataset.tickets === "1" && `+largeQR, 20*time.Second)
	var booked []string
	rows, err := s.db.Query(ctx, `SELECT seat_id FROM seats WHERE event_id = $1 AND status = 'BOOKED' ORDER BY seat_id`, ev)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		booked = append(booked, id)
	}
	if strings.Join(booked, ",") != "AUD-F-5" {
		t.Fatalf("BOOKED seats %v; want only AUD-F-5", booked)
	}
	var failed, confirmed, holds int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'FAILED'), count(*) FILTER (WHERE status = 'CONFIRMED'), count(DISTINCT hold_id) FROM bookings WHERE event_id = $1`, ev).Scan(&failed, &confirmed, &holds); err != nil || failed != 1 || confirmed != 1 || holds != 2 {
		t.Fatalf("bookings: %d FAILED, %d CONFIRMED on %d holds (%v); want one of each, on two holds", failed, confirmed, holds, err)
	}
	// The waiting room, afterwards: the turn is over, and the way to the tickets is there.
	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the room saying the turn is over, with links", `document.body.dataset.state === "ended" && !document.getElementById("ended-booking").hidden`, 15*time.Second)
	look(t, fan, "waiting-ended")
}

// The seat map on a phone: seats are at least 40 CSS px, a block wider
// than the screen says so, and the keyboard has one Tab stop in the block
// with arrow keys between seats.
func TestSeatMapPhone(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	b := browser(t)
	fan := tab(t, b)
	viewport(t, fan, phone)
	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "admission", `document.body.dataset.state === "admitted"`, 30*time.Second)
	click(t, fan, "go-book")
	until(t, fan, "the seat map", `document.querySelectorAll(".seat").length > 10`, 15*time.Second)
	checks := []struct{ what, js string }{
		{"every seat at least 40 px", `[...document.querySelectorAll(".seat")].every(b => { const r = b.getBoundingClientRect(); return r.width >= 40 && r.height >= 40 })`},
		{"the map scrolls inside its box, the page does not", `document.documentElement.scrollWidth <= document.documentElement.clientWidth`},
		{"a visible cue when the block is wider than the screen", `(() => { const b = document.getElementById("seatmap-box"); return b.scrollWidth <= b.clientWidth || document.getElementById("scroll-cue").offsetHeight > 0 })()`},
		{"one Tab stop in the block", `document.querySelectorAll('#seatmap [tabindex="0"]').length === 1 && document.querySelectorAll('#seatmap .seat:not([tabindex="-1"])').length === 1`},
		{"a screen marker and prices", `/SCREEN/.test(document.getElementById("screen").textContent) && /₹/.test(document.getElementById("seatmap").textContent)`},
	}
	for _, c := range checks {
		until(t, fan, c.what, c.js, 3*time.Second)
	}
	shot(t, fan, "seatmap-phone")
	axe(t, fan, "the seat map (phone)")
	// Arrow keys: right moves along the row, down to the next row.
	first := text(t, fan, `(() => { const b = document.querySelector('#seatmap [tabindex="0"]'); b.focus(); return b.id })()`)
	if err := chromedp.Do(fan, chromedp.KeyEvent("\u0303")); err != nil { // ArrowRight
		t.Fatal(err)
	}
	right := text(t, fan, `document.activeElement.id`)
	if err := chromedp.Do(fan, chromedp.KeyEvent("\u0301")); err != nil { // ArrowDown
		t.Fatal(err)
	}
	down := text(t, fan, `document.activeElement.id`)
	if right == first || !strings.HasPrefix(right, "seat-") || down == right || !strings.HasPrefix(down, "seat-") {
		t.Fatalf("focus %s, then %s after ArrowRight, %s after ArrowDown; want a seat each time, moving", first, right, down)
	}
	if n := text(t, fan, `String(document.querySelectorAll('#seatmap [tabindex="0"]').length)`); n != "1" {
		t.Fatalf("%s Tab stops in the block after moving; want 1", n)
	}
	if err := chromedp.Do(fan, chromedp.KeyEvent(" ")); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the focused seat picked by Space", `document.activeElement.getAttribute("aria-pressed") === "true" && /₹/.test(document.getElementById("picked-total").textContent)`, 3*time.Second)
	shot(t, fan, "seatmap-phone-picked")
}
