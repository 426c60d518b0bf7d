package browser

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Scenario 2: two fans in two browser contexts race for the same seat: one
// gets it, the other sees a clear message and a fresh map.
func TestTwoFansOneSeat(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	b := browser(t)
	fans := []context.Context{tab(t, b), tab(t, b)}
	for i, f := range fans {
		if err := chromedp.Do(f, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
			t.Fatal(err)
		}
		until(t, f, fmt.Sprintf("fan %d admitted", i), `document.body.dataset.state === "admitted"`, 30*time.Second)
		if err := chromedp.Do(f, chromedp.Click(chromedp.ID("go-book"))); err != nil {
			t.Fatal(err)
		}
		until(t, f, "the seat map", `!!document.getElementById("seat-AUD-H-7") && !document.getElementById("seat-AUD-H-7").disabled`, 15*time.Second)
		if err := chromedp.Do(f, chromedp.Click(chromedp.ID("seat-AUD-H-7"))); err != nil {
			t.Fatal(err)
		}
	}
	// Both picked H-7 from a map that showed it free; both press Hold.
	done := make(chan error, 2)
	for _, f := range fans {
		go func() { done <- chromedp.Do(f, chromedp.Click(chromedp.ID("hold-picked"))) }()
	}
	for range fans {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	held, refused := -1, -1
	for i, f := range fans {
		until(t, f, "an answer to the hold", `!document.getElementById("held").hidden || document.getElementById("message").textContent.length > 0`, 10*time.Second)
		ok, _ := chromedp.Run(f, chromedp.Evaluate[bool](`!document.getElementById("held").hidden`))
		if ok {
			held = i
		} else {
			refused = i
		}
	}
	if held < 0 || refused < 0 {
		t.Fatalf("held by fan %d, refused to fan %d: want exactly one of each", held, refused)
	}
	loser := fans[refused]
	msg, _ := chromedp.Run(loser, chromedp.Evaluate[string](`document.getElementById("message").textContent`))
	if !strings.Contains(msg, "AUD-H-7") || !strings.Contains(msg, "just taken") {
		t.Fatalf("the loser reads %q; want a clear message naming the seat", msg)
	}
	until(t, loser, "a fresh map with H-7 taken", `document.getElementById("seat-AUD-H-7").disabled`, 10*time.Second)
	shot(t, fans[held], "winner")
	shot(t, loser, "loser")
}

// Scenario 4: an operator pauses admission in the console; the fan's page
// says paused; resuming admits the fan.
func TestOperatorPause(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	b := browser(t)
	op, fan := tab(t, b), tab(t, b)
	if err := chromedp.Do(op,
		chromedp.Navigate(fmt.Sprintf("%s/admin/?event=%d", s.console, ev)),
	); err != nil {
		t.Fatal(err)
	}
	s.operatorSignIn(t, op)
	until(t, op, "the console's stats", `document.body.dataset.ready === "1"`, 15*time.Second)
	until(t, op, "the show acted on, named", fmt.Sprintf(`/^Acting on: .+, Mumbai · .+ · published · #%d$/.test(document.getElementById("acting-on").textContent)`, ev), 5*time.Second)
	until(t, op, "what bounds the line", `/Bound by/.test(document.getElementById("bound").textContent)`, 5*time.Second)
	look(t, op, "console") // the dials form, phone and desktop
	until(t, op, "the pause button", `/Pause/.test(document.getElementById("pause").textContent)`, 10*time.Second)
	// Pausing asks first, naming the show; cancelling changes nothing.
	if err := chromedp.Do(op, chromedp.Click(chromedp.ID("pause"))); err != nil {
		t.Fatal(err)
	}
	until(t, op, "a confirmation naming the show", fmt.Sprintf(`document.getElementById("confirm").open && / · #%d\?/.test(document.getElementById("confirm-text").textContent)`, ev), 5*time.Second)
	shot(t, op, "console-confirm-pause")
	if err := chromedp.Do(op, chromedp.Click(chromedp.ID("confirm-no"))); err != nil {
		t.Fatal(err)
	}
	until(t, op, "still admitting after cancelling", `!document.getElementById("confirm").open && /Pause/.test(document.getElementById("pause").textContent)`, 5*time.Second)
	if err := chromedp.Do(op, chromedp.Click(chromedp.ID("pause"))); err != nil {
		t.Fatal(err)
	}
	// Pause again at once: the cancelled question's close event, still
	// queued, must not answer this one (it did: "Admission not paused").
	until(t, op, "the confirmation again", `document.getElementById("confirm").open`, 5*time.Second)
	if err := chromedp.Do(op, chromedp.Click(chromedp.ID("confirm-yes"))); err != nil {
		t.Fatal(err)
	}
	until(t, op, "admission paused", `/Resume/.test(document.getElementById("pause").textContent)`, 10*time.Second)
	shot(t, op, "console-paused")

	if err := chromedp.Do(fan, chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the fan's page saying paused", `document.body.dataset.state === "paused" && /paused/i.test(document.getElementById("state").textContent)`, 20*time.Second)
	look(t, fan, "waiting-paused")
	if err := chromedp.Do(op, chromedp.Click(chromedp.ID("pause"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "admission after resuming", `document.body.dataset.state === "admitted"`, 30*time.Second)
	shot(t, fan, "fan-admitted")
	shot(t, op, "console-resumed")
}

// operatorSignIn signs the stack's operator in on the console's page.
func (s *browserStack) operatorSignIn(t *testing.T, op context.Context) {
	t.Helper()
	if err := chromedp.Do(op,
		chromedp.WaitVisible(chromedp.ID("operator-name")),
		chromedp.SendKeys(chromedp.ID("operator-name"), s.opName),
		chromedp.SendKeys(chromedp.ID("operator-password"), s.opPassword),
		chromedp.Click(chromedp.ID("signin")),
	); err != nil {
		t.Fatal(err)
	}
	until(t, op, "signed in", `!document.getElementById("signed-in").hidden && /ops/.test(document.getElementById("signed-in-as").textContent)`, 10*time.Second)
}

// Scenario 5: a phone-sized viewport renders the waiting room, the booking
// page and the console without horizontal scroll.
func TestPhoneViewport(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	b := browser(t)
	fan := tab(t, b)
	noScroll := `document.documentElement.scrollWidth <= document.documentElement.clientWidth`
	if err := chromedp.Do(fan, chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2)),
		chromedp.Navigate(fmt.Sprintf("%s/events/%d", s.gateway, ev))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "admitted", `document.body.dataset.state === "admitted"`, 30*time.Second)
	until(t, fan, "no horizontal scroll in the waiting room", noScroll, 2*time.Second)
	shot(t, fan, "phone-waiting")
	if err := chromedp.Do(fan, chromedp.Click(chromedp.ID("go-book"))); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the seat map", `document.querySelectorAll(".seat").length > 10`, 15*time.Second)
	until(t, fan, "no horizontal scroll on the booking page", noScroll, 2*time.Second)
	shot(t, fan, "phone-book")
	if err := chromedp.Do(fan, chromedp.Navigate(s.console+"/admin/")); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "no horizontal scroll in the console", noScroll, 5*time.Second)
	shot(t, fan, "phone-admin")
}

// Scenario 3: a fan refreshes while waiting, and opens a second tab: the
// same place in line every time.
func TestRefreshKeepsPlace(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, -time.Minute)
	// Nobody is let in, so the fans stay in line; another fan (no
	// browser) is ahead of this one.
	s.dial(t, ev, `{"new_users_per_minute":0}`)
	if r, err := http.Post(fmt.Sprintf("%s/v1/events/%d/queue", s.gateway, ev), "", nil); err == nil {
		r.Body.Close()
	}
	b := browser(t)
	fan := tab(t, b)
	page := fmt.Sprintf("%s/events/%d", s.gateway, ev)
	if err := chromedp.Do(fan, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "a place in line", `document.body.dataset.state === "waiting" && /\d/.test(document.getElementById("ahead").textContent)`, 20*time.Second)
	place, _ := chromedp.Run(fan, chromedp.Evaluate[string](`document.getElementById("ahead").textContent`))
	look(t, fan, "waiting-line")
	for i := range 2 {
		if err := chromedp.Do(fan, chromedp.Reload()); err != nil {
			t.Fatal(err)
		}
		until(t, fan, "the place after a refresh", `document.body.dataset.state === "waiting" && /\d/.test(document.getElementById("ahead").textContent)`, 20*time.Second)
		if got, _ := chromedp.Run(fan, chromedp.Evaluate[string](`document.getElementById("ahead").textContent`)); got != place {
			t.Fatalf("refresh %d: place %s; want %s", i+1, got, place)
		}
	}
	// A second tab of the same browser shares the cookie: the same place.
	second, cancel := chromedp.NewContext(fan)
	defer cancel()
	if err := chromedp.Do(second, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until(t, second, "the place in a second tab", `document.body.dataset.state === "waiting" && /\d/.test(document.getElementById("ahead").textContent)`, 20*time.Second)
	if got, _ := chromedp.Run(second, chromedp.Evaluate[string](`document.getElementById("ahead").textContent`)); got != place {
		t.Fatalf("second tab: place %s; want %s", got, place)
	}
	shot(t, second, "second-tab")
}
