package browser

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	goredis "github.com/redis/go-redis/v9"
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

	// A lone fan in the pre-queue is back within about a second of onsale
	// (gateway/http: returnSpread), admitted at the next tick; shown "0
	// ahead" first (its poll beat the draw), it asks again within a second
	// (farPoll: the front is not told to sleep).
	until(t, fan, "admission at onsale", `document.body.dataset.state === "admitted"`, time.Until(onsale)+10*time.Second)
	t.Logf("admitted %.1f s after onsale", time.Since(onsale).Seconds())
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

// A stadium's pre-queue comes back over several seconds after onsale: until
// its poll brings the drawn place, the page says the sale is open and the
// place is being drawn, never a countdown standing at 0:00. The pre-queue
// here is the fan and 150,000 others who joined after it (fifo queueing,
// written straight into Redis), so the fan's place is the first and its
// return is spread over 15 s (10,000 fans a second). The control, the page
// as it was (counting down to 0:00 and standing there until the poll), fails
// it: run by hand, it never said the sale was open.
func TestPrequeueDraw(t *testing.T) {
	s := newStack(t)
	const prequeue = 25 * time.Second
	ev := s.event(t, prequeue)
	onsale := time.Now().Add(prequeue)
	s.dial(t, ev, `{"queueing":"fifo"}`)
	b := browser(t)
	fan := tab(t, b)
	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the pre-queue countdown", `document.body.dataset.state === "prequeue" && /\d:\d\d/.test(document.getElementById("countdown").textContent)`, 15*time.Second)

	opt, err := goredis.ParseURL(s.redis)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	pre := fmt.Sprintf("{evt:%d}:pre", ev)
	t.Cleanup(func() { rdb.Del(context.Background(), pre) })
	later := float64(time.Now().Add(time.Second).UnixMilli())
	for i := 0; i < 150_000; i += 10_000 {
		batch := make([]goredis.Z, 10_000)
		for j := range batch {
			batch[j] = goredis.Z{Score: later + float64(i+j), Member: fmt.Sprintf("synthetic-%d", i+j)}
		}
		if err := rdb.ZAdd(ctx, pre, batch...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The recorder: after onsale, every 100 ms, what the page shows while
	// the fan is still in the pre-queue. Two seconds' grace: the countdown
	// ticks once a second.
	record := fmt.Sprintf(`window.__draw = {late: [], seen: false}; setInterval(() => {
  if (document.body.dataset.state !== "prequeue" || Date.now() < %d) return;
  const shown = document.getElementById("countdown").textContent;
  if (document.body.dataset.drawing === "1" && !document.getElementById("drawing").hidden) window.__draw.seen = true;
  else if (Date.now() > %d) window.__draw.late.push(shown);
}, 100); "ok"`, onsale.UnixMilli(), onsale.Add(2*time.Second).UnixMilli())
	text(t, fan, record)
	until(t, fan, "the sale opening", `document.body.dataset.drawing === "1" || document.body.dataset.state !== "prequeue"`, time.Until(onsale)+5*time.Second)
	if text(t, fan, `document.body.dataset.drawing`) == "1" {
		look(t, fan, "waiting-drawing")
	}
	// The fan's place is the first: drawn within the spread, then admitted.
	until(t, fan, "admission after the draw", `document.body.dataset.state === "admitted"`, time.Until(onsale)+25*time.Second)
	if late := text(t, fan, `window.__draw.late.join(" | ")`); late != "" {
		t.Fatalf("the page showed %q more than 2 s after onsale while the place was being drawn; want it to say the draw is under way", late)
	}
	t.Logf("the drawing message seen: %s", text(t, fan, `String(window.__draw.seen)`))
}
