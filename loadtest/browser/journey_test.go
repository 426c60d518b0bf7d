package browser

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Scenario 1: a fan joins the pre-queue and sees the countdown, is admitted
// at onsale, picks two seats, holds them, pays through the provider's
// checkout and sees two QR tickets. Scenario 3 rides along: a refresh while
// waiting keeps the place.
func TestFanJourney(t *testing.T) {
	s := newStack(t)
	// The pre-queue lasts 40 s: time for a browser to start and see it twice
	// on a busy machine. Admission is awaited until 30 s past the onsale.
	const prequeue = 60 * time.Second
	ev := s.event(t, prequeue)
	onsale := time.Now().Add(prequeue)
	b := browser(t)
	fan := tab(t, b)
	page := fmt.Sprintf("%s/events/%d", s.gateway, ev)

	if err := chromedp.Do(fan, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the pre-queue countdown", `document.body.dataset.state === "prequeue" && /\d:\d\d/.test(document.getElementById("countdown").textContent)`, 15*time.Second)
	// A refresh in the pre-queue keeps the fan's identity (the visitor cookie).
	if err := chromedp.Do(fan, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the pre-queue again after a refresh", `document.body.dataset.state === "prequeue"`, 10*time.Second)
	look(t, fan, "waiting-prequeue")

	until(t, fan, "admission at onsale", `document.body.dataset.state === "admitted"`, time.Until(onsale)+30*time.Second)
	shot(t, fan, "2-admitted")
	if err := chromedp.Do(fan, chromedp.Click(chromedp.ID("go-book"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the seat map", `document.querySelectorAll(".seat:not(:disabled)").length > 2`, 15*time.Second)
	shot(t, fan, "3-seatmap")
	if err := chromedp.Do(fan,
		chromedp.Click(chromedp.CSS(`#seat-AUD-E-5`)),
		chromedp.Click(chromedp.CSS(`#seat-AUD-E-6`)),
		chromedp.Click(chromedp.ID("hold-picked")),
	); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the hold with its countdown", `!document.getElementById("held").hidden && /\d:\d\d/.test(document.getElementById("hold-left").textContent)`, 10*time.Second)
	shot(t, fan, "4-held")
	if err := chromedp.Do(fan, chromedp.Click(chromedp.ID("pay"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the payment step", `!document.getElementById("paying").hidden && document.getElementById("checkout").href.includes("/checkout/")`, 10*time.Second)
	look(t, fan, "book-paying")
	if err := chromedp.Do(fan, chromedp.Click(chromedp.ID("checkout"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the provider's checkout", `!!document.getElementById("approve")`, 10*time.Second)
	shot(t, fan, "6-checkout")
	if err := chromedp.Do(fan, chromedp.Click(chromedp.ID("approve"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "two QR tickets", `document.body.dataset.tickets === "2" && document.querySelectorAll(".ticket img").length === 2`, 20*time.Second)
	shot(t, fan, "7-tickets")
	// With the tickets shown, the page hands the fan's room to the next in line.
	until(t, fan, "the page leaving the room", `document.body.dataset.left === "1"`, 10*time.Second)
	var sold int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM seats WHERE event_id = $1 AND status = 'BOOKED' AND seat_id IN ('AUD-E-5', 'AUD-E-6')`, ev).Scan(&sold); err != nil || sold != 2 {
		t.Fatalf("%d of the fan's 2 seats BOOKED (%v)", sold, err)
	}
}
