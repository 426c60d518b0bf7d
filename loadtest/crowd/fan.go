package crowd

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/shared/account"
)

// fan is one member of the crowd: a small state machine that the crowd's
// scheduler (schedule.go) runs on a worker when its time comes, not a
// goroutine. Each run is one step: the requests the fan makes back to back
// (a seat map, then the layout; a hold) up to its next wait (a poll
// interval, a pause before tapping again, a fan looking at a page), which
// it returns; between steps a fan is this struct and an entry in the
// scheduler's heap. What only an admitted fan needs (shopping) and what
// only a fan signing in needs (signing) hang off it while it needs them.
type fan struct {
	trace   check.Admission // its line as it saw it; trace.Fan is its number
	arrived bool
	state   state
	done    bool // says so when leaving
	// account is the account token once signed in: it joins the line and
	// owns what the fan holds and buys (pay, confirm, release, bookings).
	account string
	jar     jar // the fan's cookies (the gateway's queue and visitor cookies)
	// The fan's asking for its place: when it last asked and the time
	// before, and the longest it went without asking since its place
	// history's last entry.
	asked, asked0 time.Time
	gap           time.Duration
	seen          int64 // the last place the fan was told
	// lapsedFirst: the first place this fan saw was a requeue (its turn
	// came and went before it polled: a pre-queue fan's drawn place is
	// then never seen), so trace.First stays unknown (0).
	lapsedFirst bool
	tap         tapping
	shop        *shopping
	sign        *signing
}

// shopping is what an admitted fan keeps: its admit token and session, the
// seats it asks for and the hold and booking it gets.
type shopping struct {
	admit   string    // the admit token: it only creates holds
	grant   string    // the hold grant of a guest's hold (a guest's owner credential)
	until   time.Time // the session ends
	count   int       // tickets wanted
	tries   int       // hold asks refused so far
	ask     any       // the hold asked for next
	hold    string    // the hold, once held
	expires time.Time // its end
	heldAt  time.Time // when it was held
	booking int64     // the booking being paid for
	card    *clicks   // a card payer's double click
}

// state is where a fan is: what it does when its time comes.
type state uint8

const (
	arriving state = iota
	// Signing in (signin.go).
	askingCode
	awaitingCode
	// The line.
	joining
	polling
	rejoining // after the room was reset
	// Seats.
	browsing // the seat map (and the layout), then the first ask
	holding
	watching // the map, for seats coming back
	// Payment.
	releasing // letting the seats go, then leaving
	confirming
	paying
	awaiting // looking at the booking until it is settled
)

// finished is the wait that ends a fan's visit; a wait of 0 runs the fan's
// next state at once.
const finished time.Duration = math.MinInt64

// step runs fan n from its state to its next wait (a state that waits 0
// runs at once): the scheduler's step.
func (c *Crowd) step(ctx context.Context, n int, late time.Duration) (time.Time, bool) {
	f := &c.fans[n]
	c.st.late(late, f.shop != nil)
	for {
		switch wait := c.act(ctx, f); {
		case wait == finished:
			c.finish(f)
			return time.Time{}, false
		case wait > 0:
			return time.Now().Add(wait), true
		}
	}
}

// act is one state's work; it returns how long the fan waits before its
// next state, or finished.
func (c *Crowd) act(ctx context.Context, f *fan) time.Duration {
	switch f.state {
	case arriving:
		return c.arrive(f)
	case askingCode:
		return c.askCode(ctx, f)
	case awaitingCode:
		return c.awaitCode(ctx, f)
	case joining, rejoining:
		return c.join(ctx, f)
	case polling:
		return c.poll(ctx, f)
	case browsing:
		return c.browse(ctx, f)
	case holding:
		return c.hold(ctx, f)
	case watching:
		return c.watch(ctx, f)
	case releasing:
		return c.release(ctx, f)
	case confirming:
		return c.confirm(ctx, f)
	case paying:
		return c.pay(ctx, f)
	case awaiting:
		return c.await(ctx, f)
	}
	panic(fmt.Sprintf("crowd: fan %d in state %d", f.trace.Fan, f.state))
}

// stop ends a fan's visit when the sale ends while it waits: a fan that
// was done, or was letting its seats go, holding or confirming (its taps
// now fail at once, and it gives up and closes the page) says goodbye; a
// fan waiting in line, watching the map, dawdling before paying or
// watching its booking just goes.
func (c *Crowd) stop(n int) {
	f := &c.fans[n]
	if !f.arrived {
		return // never came: no trace
	}
	switch f.state {
	case releasing, holding, confirming:
		f.done = true
	case paying:
		f.done = f.done || f.tapping()
	}
	c.finish(f)
}

// finish ends a fan's visit: a fan that is done says so (the room goes to
// the next in line); what it kept for the visit is let go, but its trace.
func (c *Crowd) finish(f *fan) {
	if f.done {
		c.leave(f)
	}
	f.jar, f.shop, f.sign, f.tap = nil, nil, nil, tapping{}
}

// arrive: a guest or a fan signed in ahead joins the line; a fan that
// could not sign in ahead goes home; any other signs in first.
func (c *Crowd) arrive(f *fan) time.Duration {
	f.arrived = true
	switch {
	case c.sms == "" || f.account != "":
		f.state = joining
	case c.ahead != nil:
		return finished
	default:
		f.sign, f.state = &signing{}, askingCode
	}
	return 0
}

// send sends one of the fan's requests on its pool, with its cookies.
func (c *Crowd) send(ctx context.Context, f *fan, route, method, target string, body any, hdr ...string) Reply {
	return sender{hc: c.poolOf(f.trace.Fan), timeout: fanTimeout, st: c.st}.do(ctx, &f.jar, route, method, target, body, hdr)
}

// fanTimeout is how long a fan waits for an answer.
const fanTimeout = 20 * time.Second

// tapping is a fan tapping again while the service fails: until when it
// keeps at it, and its pause before the next tap (zero: not tapping).
type tapping struct {
	until time.Time
	pause time.Duration
}

func (f *fan) tapping() bool { return !f.tap.until.IsZero() }

// How long a fan keeps tapping while the service fails (no answer, or a
// 5xx): the join, and the hold, payment and booking steps (those also end
// with the session or the hold).
const (
	joinPatience = 30 * time.Second
	stepPatience = 60 * time.Second
)

// tap sends a request as a fan taps: again while the service fails (no
// answer, or a 5xx), after Retry-After or a pause that doubles from a
// second up to 8 s, for at most patience (counted from the first tap) or
// until ctx ends. With wait > 0 the fan taps again after it (its state
// unchanged: the state's step runs again); else r is the answer, or the
// last failure.
func (c *Crowd) tap(ctx context.Context, f *fan, patience time.Duration, route, method, target string, body any, hdr ...string) (r Reply, wait time.Duration) {
	if !f.tapping() {
		f.tap = tapping{until: time.Now().Add(patience), pause: time.Second}
	}
	r = c.send(ctx, f, route, method, target, body, hdr...)
	if r.Status != 0 && r.Status < 500 {
		f.tap = tapping{}
		return r, 0
	}
	wait = max(f.tap.pause, r.Retry)
	if ctx.Err() != nil || time.Now().Add(wait).After(f.tap.until) {
		f.tap = tapping{}
		return r, 0
	}
	f.tap.pause = min(2*f.tap.pause, 8*time.Second)
	return r, wait
}

// patience is how long a fan keeps tapping on a step that lasts until t
// (the session's or the hold's end): stepPatience at most.
func patience(t time.Time) time.Duration { return max(0, min(stepPatience, time.Until(t))) }

// auth is the admit token, for creating holds.
func (f *fan) auth() []string { return []string{"Authorization", "Bearer " + f.shop.admit} }

// owner is what owns the fan's hold and booking: the account token when
// signed in, else the hold grant (the admit token, if the gateway issued
// no grant). The session may end while the fan pays: neither depends on it.
func (f *fan) owner() []string {
	switch {
	case f.account != "":
		return []string{"Authorization", "Bearer " + f.account}
	case f.shop.grant != "":
		return []string{"Authorization", "Bearer " + f.shop.grant}
	}
	return f.auth()
}

// joinAs is the account token for joining the line (none for a guest: the
// gateway's visitor cookie says who).
func (f *fan) joinAs() []string {
	if f.account == "" {
		return nil
	}
	return []string{"Authorization", "Bearer " + f.account}
}

// join asks for a place in line (first, or again after the room was
// reset), tapping again while the gateway fails for up to joinPatience:
// joining is idempotent (an identity has one place), so a join whose
// answer was lost costs nothing. Then the fan polls at the interval the
// gateway asks for. A first join refused ends the fan's visit.
func (c *Crowd) join(ctx context.Context, f *fan) time.Duration {
	if !f.tapping() {
		f.ask()
	}
	r, wait := c.tap(ctx, f, joinPatience, "join", "POST", c.urls.queue, nil, f.joinAs()...)
	if wait > 0 {
		return wait
	}
	if f.state == rejoining {
		if r.Status == 200 {
			f.seen = int64(number(r.Body["position"]))
			f.place(check.PlaceJoined, f.seen)
		}
		f.state = polling
		return pollWait(r)
	}
	f.trace.Prequeue = r.Status == 200 && r.Body["state"] == "prequeue"
	f.trace.First = int64(number(r.Body["position"]))
	if r.Status != 200 {
		c.st.Fail(fmt.Sprintf("join %d", r.Status))
		return finished
	}
	f.place(check.PlaceJoined, f.trace.First)
	f.seen = f.trace.First
	c.st.Joined.Add(1)
	f.state = polling
	return pollWait(r)
}

// poll asks for the fan's place until it is admitted, or the line ends for
// it: sold out, closed, its one session over, or the sale's end. Every
// change of its place goes into its place history (trace.Places); a reset
// room (409) is joined again.
func (c *Crowd) poll(ctx context.Context, f *fan) time.Duration {
	f.ask()
	r := sender{hc: c.pipes[f.trace.Fan%len(c.pipes)], timeout: fanTimeout, st: c.st}.do(ctx, &f.jar, "status", "GET", c.urls.status, nil, nil)
	switch r.Status {
	case 409: // the room was reset: join again
		c.st.Rejoin.Add(1)
		f.place(check.PlaceReset, 0)
		f.state = rejoining
		return 0
	case 410:
		f.place(check.PlaceEnded, 0)
		return finished
	}
	if p := int64(number(r.Body["position"])); r.Status == 200 && p > 0 {
		if p != f.seen {
			kind := check.PlaceSeen
			if msg, _ := r.Body["message"].(string); strings.Contains(msg, "unclaimed") {
				kind = check.PlaceRequeued // "your turn came and went unclaimed: you are back in line"
				f.lapsedFirst = f.lapsedFirst || f.trace.First == 0
			}
			f.place(kind, p)
			f.seen = p
		}
		f.trace.Position = p
		if f.trace.First == 0 && !f.lapsedFirst {
			f.trace.First = p
		}
	}
	if r.Status != 200 {
		return pollWait(r)
	}
	switch r.Body["state"] {
	case "admitted":
		f.admitted(r)
		f.place(check.PlaceAdmitted, f.trace.Position)
		c.st.Admitted.Add(1)
		f.state = browsing
		return 0
	case "sold_out", "closed":
		return finished
	}
	return pollWait(r)
}

// ask notes that the fan asks for its place now.
func (f *fan) ask() {
	now := time.Now()
	if !f.asked.IsZero() {
		f.gap = max(f.gap, now.Sub(f.asked))
	}
	f.asked0, f.asked = f.asked, now
}

// place adds an entry to the fan's place history. A move forward right
// after another (the line advancing, poll after poll) replaces it rather
// than adding one, its gap the longer of the two: the history keeps what
// the checker reads (where the fan stood before each move back, requeue,
// reset or end, and how long it had gone without asking) in a few entries
// a fan, not one a poll.
func (f *fan) place(kind string, position int64) {
	p := check.Place{At: time.Now(), Kind: kind, Position: position, Gap: f.gap}
	if kind == check.PlaceRequeued && !f.asked0.IsZero() {
		// The gateway judged the lapse when this poll reached it, at most
		// now (its answer is here), and the poll before reached it no
		// earlier than it was sent: the longest the gateway could have
		// gone without one of the fan's polls.
		p.Unseen = p.At.Sub(f.asked0)
	}
	f.gap = 0
	if n := len(f.trace.Places); n > 0 && kind == check.PlaceSeen {
		if last := &f.trace.Places[n-1]; last.Kind == check.PlaceSeen && position < last.Position {
			p.Gap = max(p.Gap, last.Gap)
			*last = p
			return
		}
	}
	f.trace.Places = append(f.trace.Places, p)
}

// pollWait is how long the fan waits before the next poll: what the gateway
// asked for, or after a refusal at least 2 s (longer if Retry-After says so).
func pollWait(r Reply) time.Duration {
	if r.Status != 200 {
		return max(2*time.Second, r.Retry)
	}
	return max(0, time.Duration(number(r.Body["poll_after_ms"]))*time.Millisecond)
}

// admitted takes the admit token and the session's end from the status
// that admits the fan, and what it will ask for.
func (f *fan) admitted(r Reply) {
	f.shop = &shopping{count: ticketCounts[rand.IntN(len(ticketCounts))]}
	f.shop.admit, _ = r.Body["admit_token"].(string)
	f.shop.until, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(r.Body["admit_expires_at"]))
	f.trace.Position = int64(number(r.Body["position"]))
	f.trace.AdmittedAt = time.Now()
}

// leave tells the waiting room the fan is done (the queue cookie says who).
// It may run after the sale's context ended, so it has its own.
func (c *Crowd) leave(f *fan) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := c.send(ctx, f, "leave", "DELETE", c.urls.queue, nil)
	if r.Status == 200 && r.Body["outcome"] == "ended" {
		c.st.Left.Add(1)
		c.st.SessionNanos.Add(int64(time.Since(f.trace.AdmittedAt)))
		if f.shop != nil && !f.shop.heldAt.IsZero() {
			c.st.LeftHeld.Add(1)
			c.st.SessionHeldNanos.Add(int64(time.Since(f.trace.AdmittedAt)))
		}
	}
}

// bestAvailable is the hold request for count seats in a random band.
func (c *Crowd) bestAvailable(count int) map[string]any {
	return map[string]any{"best_available": map[string]any{"band": c.bands[rand.IntN(len(c.bands))], "count": count}}
}

// browse reads the map and says what the fan asks to hold first: best
// available (the rest), seats picked from the map (sharePicked; the map
// may be a second stale, and the fan asks for the layout first, as a
// browser does), or too many tickets (shareOverLimit).
func (c *Crowd) browse(ctx context.Context, f *fan) time.Duration {
	s := f.shop
	m := c.send(ctx, f, "seatmap", "GET", c.urls.seatmap, nil)
	s.ask = c.bestAvailable(s.count)
	switch p := rand.Float64(); {
	case p < shareOverLimit:
		s.ask = c.bestAvailable(overLimit)
	case p < shareOverLimit+sharePicked && m.Status == 200:
		free := decodeBitmap(m.Body["available"])
		c.send(ctx, f, "layout", "GET", c.urls.layout, nil)
		if seats := PickFront(c.layout.get(c.urls.layout), free, s.count); seats != nil {
			s.ask = map[string]any{"seats": seats}
		}
	}
	f.state = holding
	return 0
}

// hold asks for the seats, tapping again while the service fails: after a
// lost race best available (or 4 seats after the limit). After three
// misses every seat is held or sold: half give up; the rest keep the page
// open and watch the map for seats coming back (lapsed holds, failed
// payments) while the session lasts. With a hold the fan closes the app
// (shareClose), changes their mind (shareRelease), pays by card
// (shareCard) or by UPI.
func (c *Crowd) hold(ctx context.Context, f *fan) time.Duration {
	s := f.shop
	h, wait := c.tap(ctx, f, patience(s.until), "hold", "POST", c.urls.holds, s.ask, f.auth()...)
	if wait > 0 {
		return wait
	}
	switch h.Status {
	case 201:
		s.expires, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(h.Body["expires_at"]))
		s.grant, _ = h.Body["hold_token"].(string)
		s.hold, _ = h.Body["hold_id"].(string)
		s.ask, s.heldAt = nil, time.Now()
		c.st.Held.Add(1)
		c.st.ShopNanos.Add(int64(time.Since(f.trace.AdmittedAt)))
		return c.held(f)
	case 409:
		c.st.Taken.Add(1)
		s.ask = c.bestAvailable(s.count)
	case 422:
		c.st.Limit.Add(1)
		s.ask = c.bestAvailable(limitRetry)
	default:
		f.done = true
		return finished
	}
	switch s.tries++; {
	case s.tries == 3 && rand.IntN(2) == 0:
		f.done = true
		return finished
	case s.tries >= 3:
		f.state = watching
		return watchWait()
	}
	return 0
}

// watchWait is the fan's look at the map every few seconds.
func watchWait() time.Duration { return time.Duration(2000+rand.IntN(3000)) * time.Millisecond }

// watch looks at the seat map until some seats are free, and asks for up
// to count of them (together in a row if it can, else wherever they are);
// the fan goes when its session ends (or the sale does) first, and leaves
// when nothing is left even on hold.
func (c *Crowd) watch(ctx context.Context, f *fan) time.Duration {
	s := f.shop
	if time.Until(s.until) < 5*time.Second {
		return finished
	}
	m := c.send(ctx, f, "seatmap", "GET", c.urls.seatmap, nil)
	if m.Status == 200 && number(m.Body["available_count"]) == 0 {
		st := c.send(ctx, f, "event stats", "GET", c.urls.stats, nil)
		if st.Status == 200 && number(st.Body["available"]) == 0 && number(st.Body["held"]) == 0 {
			f.done = true // the page says sold out: the fan leaves
			return finished
		}
		return watchWait()
	}
	if m.Status != 200 {
		return watchWait()
	}
	if seats := PickFree(c.layout.get(c.urls.layout), decodeBitmap(m.Body["available"]), s.count); seats != nil {
		s.ask = map[string]any{"seats": seats}
		f.state = holding
		return 0
	}
	return watchWait()
}

// held is what a fan with a hold does next.
func (c *Crowd) held(f *fan) time.Duration {
	switch p := rand.Float64(); {
	case p < shareClose: // closes the app: the hold lapses (the sweeper returns it)
		c.st.Abandoned.Add(1)
		return finished
	case p < shareClose+shareRelease: // changes their mind: releases
		c.st.Abandoned.Add(1)
		f.state = releasing
		return 0
	case p < shareClose+shareRelease+shareCard:
		f.state = confirming
		return 0
	}
	// UPI: shareSlowUPI of payers wait until 20 s before the hold ends
	// first (the payer's dawdling, not a wait for anything).
	f.state = paying
	if rand.Float64() < shareSlowUPI {
		return max(0, time.Until(f.shop.expires)-20*time.Second)
	}
	return 0
}

// release lets the held seats go (tapping again while the service fails),
// and the fan is done.
func (c *Crowd) release(ctx context.Context, f *fan) time.Duration {
	if _, wait := c.tap(ctx, f, stepPatience, "release", "DELETE", c.url("/v1/holds/%s", f.shop.hold), nil, f.owner()...); wait > 0 {
		return wait
	}
	f.done = true
	return finished
}

// clicks is a card payer's double click on Confirm: the clicks still
// tapping, and what the answered ones said.
type clicks struct {
	left      int            // clicks not answered yet
	confirmed map[string]any // a booking one was told is confirmed
	pending   int64          // a booking one was told is pending
}

// confirm pays by card and double-clicks Confirm: two confirms with one
// idempotency key, at once, each tapped again while the service fails (the
// two share their pauses). Told the booking is confirmed, the fan notes
// it; told it is pending, it watches the booking; declined, it lets the
// seats go rather than leave them held.
func (c *Crowd) confirm(ctx context.Context, f *fan) time.Duration {
	s := f.shop
	if s.card == nil {
		s.card = &clicks{left: 2}
	}
	k := s.card
	hdr := append(f.owner(), "Idempotency-Key", fmt.Sprintf("confirm-%d-%s", f.trace.Fan, s.hold))
	target, body := c.url("/v1/holds/%s/confirm", s.hold), map[string]any{"payment_token": "tok_visa"}
	if !f.tapping() {
		f.tap = tapping{until: time.Now().Add(patience(s.expires.Add(time.Minute))), pause: time.Second}
	}
	// The clicks go at once: all but one on goroutines of their own (at
	// most one a worker, for as long as the request). Each sends the
	// fan's cookies; a confirm's answer sets none.
	replies := make([]Reply, k.left)
	var wg sync.WaitGroup
	for i := 1; i < len(replies); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = c.sendAside(ctx, f, "confirm", "POST", target, body, hdr...)
		}()
	}
	replies[0] = c.sendAside(ctx, f, "confirm", "POST", target, body, hdr...)
	wg.Wait()
	wait := f.tap.pause
	for _, r := range replies {
		if r.Status == 0 || r.Status >= 500 {
			wait = max(wait, r.Retry)
			continue
		}
		k.left--
		if r.Status != 200 && r.Status != 202 {
			continue
		}
		b := bookingOf(r.Body)
		if b["status"] == "CONFIRMED" {
			k.confirmed = b
		} else if n := int64(number(b["booking_id"])); n > 0 {
			k.pending = n
		}
	}
	if k.left > 0 && ctx.Err() == nil && !time.Now().Add(wait).After(f.tap.until) {
		f.tap.pause = min(2*f.tap.pause, 8*time.Second)
		return wait
	}
	f.tap = tapping{}
	f.done = true
	c.st.Paid.Add(1)
	if k.pending == 0 {
		c.settled(f)
	}
	switch {
	case k.confirmed != nil:
		c.st.Confirmed.Add(1)
		c.tell(f, k.confirmed)
		return finished
	case k.pending > 0:
		s.booking, f.state = k.pending, awaiting
		return time.Second
	}
	c.st.FailedPay.Add(1)
	f.state = releasing
	return 0
}

// sendAside is send for a request that runs beside another of the fan's:
// with a copy of its cookies, so that neither writes the fan's jar.
func (c *Crowd) sendAside(ctx context.Context, f *fan, route, method, target string, body any, hdr ...string) Reply {
	j := slices.Clone(f.jar)
	return sender{hc: c.poolOf(f.trace.Fan), timeout: fanTimeout, st: c.st}.do(ctx, &j, route, method, target, body, hdr)
}

// bookingOf is the booking in a pay or confirm answer: the answer itself
// (a settled booking) or its "booking".
func bookingOf(body map[string]any) map[string]any {
	if b, ok := body["booking"].(map[string]any); ok {
		return b
	}
	return body
}

// tell records a booking the fan was told is confirmed, in the crowd's own
// list (the checker compares it with the database).
func (c *Crowd) tell(f *fan, b map[string]any) {
	t := check.Confirmation{Fan: f.trace.Fan, Booking: int64(number(b["booking_id"])), AmountPaise: int64(number(b["amount_paise"])), At: time.Now()}
	if f.trace.Account != "" {
		t.Account = account.IdentityPrefix + f.trace.Account
	}
	seats, _ := b["seats"].([]any)
	for _, s := range seats {
		t.Seats = append(t.Seats, fmt.Sprint(s))
	}
	c.confirmed(t)
}

// settled counts a payment's outcome told to the fan, and its time since
// the hold (for the forecast).
func (c *Crowd) settled(f *fan) {
	c.st.Settled.Add(1)
	c.st.SettleNanos.Add(int64(time.Since(f.shop.heldAt)))
}

// pay pays by UPI (tapping again while the service fails), then the fan
// watches the booking for the outcome.
func (c *Crowd) pay(ctx context.Context, f *fan) time.Duration {
	s := f.shop
	p, wait := c.tap(ctx, f, patience(s.expires.Add(time.Minute)), "pay", "POST", c.url("/v1/holds/%s/payment", s.hold),
		map[string]any{"phone": Phone(f.trace.Fan)}, append(f.owner(), "Idempotency-Key", fmt.Sprintf("pay-%d-%s", f.trace.Fan, s.hold))...)
	if wait > 0 {
		return wait
	}
	if p.Status != 201 {
		if p.Status == 410 {
			c.st.Abandoned.Add(1)
		}
		f.done = true
		return finished
	}
	c.st.Paid.Add(1)
	// A retry that arrives after the payment settled (the webhook or the
	// reconciler won the race) is answered with the settled booking itself.
	s.booking, f.state = int64(number(bookingOf(p.Body)["booking_id"])), awaiting
	return time.Second
}

// await looks at the booking once a second until its payment is settled
// (the simulated payer approves after a few seconds), the session ends
// (the outcome still reaches the fan by SMS) or the sale does.
func (c *Crowd) await(ctx context.Context, f *fan) time.Duration {
	g := c.send(ctx, f, "booking", "GET", c.url("/v1/bookings/%d", f.shop.booking), nil, f.owner()...)
	switch g.Body["status"] {
	case "CONFIRMED", "FAILED", "REFUND_DUE", "REFUNDED":
		c.settled(f)
	}
	switch g.Body["status"] {
	case "CONFIRMED":
		c.st.Confirmed.Add(1)
		c.tell(f, g.Body)
		f.done = true
		return finished
	case "FAILED":
		// The fan gives up and lets the seats go (the page offers it).
		c.st.FailedPay.Add(1)
		f.state = releasing
		return 0
	case "REFUND_DUE", "REFUNDED":
		c.st.Refunded.Add(1)
		f.done = true
		return finished
	}
	if g.Status == 401 {
		return finished
	}
	return time.Second // a fan looking at the page, as a browser polls
}
