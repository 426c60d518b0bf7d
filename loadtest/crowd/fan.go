package crowd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/shared/account"
)

// fan is one member of the crowd.
type fan struct {
	crowd *Crowd
	n     int // the fan's number (its idempotency keys and phone)
	cl    *Client
	// account is the account token once signed in: it joins the line and
	// owns what the fan holds and buys (pay, confirm, release, bookings).
	account string
	admit   string    // the admit token, once admitted: it only creates holds
	grant   string    // the hold grant of a guest's hold (a guest's owner credential)
	until   time.Time // the session ends
	trace   check.Admission
	done    bool // says so when leaving
	// The fan's asking for its place: when it last asked, and the longest
	// it went without asking since its place history's last entry.
	asked time.Time
	gap   time.Duration
	seen  int64 // the last place the fan was told
}

// shop is the fan's whole visit: the line, then seats, then payment. A fan
// who is done (tickets bought, payment failed, mind changed, no seats to be
// had) says so, and the room goes to the next in line; a fan who closes the
// app mid-hold says nothing and keeps the room until the session runs out.
func (f *fan) shop(ctx context.Context) {
	switch {
	case f.crowd.sms == "" || f.account != "": // a guest, or signed in ahead
	case f.crowd.ahead != nil: // could not sign in ahead: goes home
		return
	case !f.signIn(ctx):
		return
	}
	if !f.queue(ctx) {
		return
	}
	f.crowd.st.Admitted.Add(1)
	defer func() {
		if f.done {
			f.leave()
		}
	}()
	count := ticketCounts[rand.IntN(len(ticketCounts))]
	id, expires, ok := f.hold(ctx, count)
	if !ok {
		return
	}
	f.crowd.st.Held.Add(1)
	switch p := rand.Float64(); {
	case p < shareClose: // closes the app: the hold lapses (the sweeper returns it)
		f.crowd.st.Abandoned.Add(1)
	case p < shareClose+shareRelease: // changes their mind: releases
		f.release(ctx, id)
		f.crowd.st.Abandoned.Add(1)
		f.done = true
	case p < shareClose+shareRelease+shareCard:
		f.payCard(ctx, id, expires)
	default:
		f.payUPI(ctx, id, expires)
	}
}

// auth is the admit token, for creating holds.
func (f *fan) auth() []string { return []string{"Authorization", "Bearer " + f.admit} }

// owner is what owns the fan's hold and booking: the account token when
// signed in, else the hold grant (the admit token, if the gateway issued
// no grant). The session may end while the fan pays: neither depends on it.
func (f *fan) owner() []string {
	switch {
	case f.account != "":
		return []string{"Authorization", "Bearer " + f.account}
	case f.grant != "":
		return []string{"Authorization", "Bearer " + f.grant}
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

func (f *fan) band() string { return f.crowd.bands[rand.IntN(len(f.crowd.bands))] }

// queue joins the line and polls at the interval the gateway asks for until
// the fan is admitted (true), or the line ends for it: sold out, closed,
// its one session over, a join refused, or the sale's end (false). Every
// change of its place goes into its place history (trace.Places).
func (f *fan) queue(ctx context.Context) bool {
	st, ev := f.crowd.st, f.crowd.event
	r := f.join(ctx)
	f.trace.Prequeue = r.Status == 200 && r.Body["state"] == "prequeue"
	f.trace.First = int64(number(r.Body["position"]))
	if r.Status != 200 {
		st.Fail(fmt.Sprintf("join %d", r.Status))
		return false
	}
	f.place(check.PlaceJoined, f.trace.First)
	f.seen = f.trace.First
	st.Joined.Add(1)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pollWait(r)):
		}
		f.ask()
		r = f.cl.Do(ctx, "status", "GET", f.crowd.url("/v1/events/%d/queue/status", ev), nil)
		switch {
		case r.Status == 409: // the room was reset: join again
			st.Rejoin.Add(1)
			f.place(check.PlaceReset, 0)
			r = f.join(ctx)
			if r.Status == 200 {
				f.seen = int64(number(r.Body["position"]))
				f.place(check.PlaceJoined, f.seen)
			}
			continue
		case r.Status == 410:
			f.place(check.PlaceEnded, 0)
			return false
		}
		if p := int64(number(r.Body["position"])); r.Status == 200 && p > 0 {
			if p != f.seen {
				kind := check.PlaceSeen
				if msg, _ := r.Body["message"].(string); strings.Contains(msg, "unclaimed") {
					kind = check.PlaceRequeued // "your turn came and went unclaimed: you are back in line"
				}
				f.place(kind, p)
				f.seen = p
			}
			f.trace.Position = p
			if f.trace.First == 0 {
				f.trace.First = p
			}
		}
		if r.Status != 200 {
			continue
		}
		switch r.Body["state"] {
		case "admitted":
			f.admitted(r)
			f.place(check.PlaceAdmitted, f.trace.Position)
			return true
		case "sold_out", "closed":
			return false
		}
	}
}

// join asks for a place in line, tapping again while the gateway fails
// (no answer, 5xx) for up to joinPatience: joining is idempotent (an
// identity has one place), so a join whose answer was lost costs nothing.
func (f *fan) join(ctx context.Context) Reply {
	f.ask()
	return f.retry(ctx, joinPatience, "join", "POST", f.crowd.url("/v1/events/%d/queue", f.crowd.event), nil, f.joinAs()...)
}

// ask notes that the fan asks for its place now.
func (f *fan) ask() {
	now := time.Now()
	if !f.asked.IsZero() {
		f.gap = max(f.gap, now.Sub(f.asked))
	}
	f.asked = now
}

// place adds an entry to the fan's place history.
func (f *fan) place(kind string, position int64) {
	f.trace.Places = append(f.trace.Places, check.Place{At: time.Now(), Kind: kind, Position: position, Gap: f.gap})
	f.gap = 0
}

// How long a fan keeps tapping while the service fails (no answer, or a
// 5xx): the join, and the hold, payment and booking steps (those also end
// with the session or the hold).
const (
	joinPatience = 30 * time.Second
	stepPatience = 60 * time.Second
)

// retry sends a request, and again while the service fails (no answer, or
// a 5xx), as a fan taps again: after Retry-After, or a pause that doubles
// from a second up to 8 s, for at most patience (or until ctx ends). The
// last answer is returned.
func (f *fan) retry(ctx context.Context, patience time.Duration, route, method, target string, body any, hdr ...string) Reply {
	until := time.Now().Add(patience)
	pause := time.Second
	for {
		r := f.cl.Do(ctx, route, method, target, body, hdr...)
		if r.Status != 0 && r.Status < 500 {
			return r
		}
		wait := max(pause, r.Retry)
		if ctx.Err() != nil || time.Now().Add(wait).After(until) {
			return r
		}
		select {
		case <-ctx.Done():
			return r
		case <-time.After(wait): // the fan's pause before tapping again
		}
		pause = min(2*pause, 8*time.Second)
	}
}

// patience is how long a fan keeps tapping on a step that lasts until t
// (the session's or the hold's end): stepPatience at most.
func patience(t time.Time) time.Duration { return max(0, min(stepPatience, time.Until(t))) }

// pollWait is how long the fan waits before the next poll: what the gateway
// asked for, or after a refusal at least 2 s (longer if Retry-After says so).
func pollWait(r Reply) time.Duration {
	if r.Status != 200 {
		return max(2*time.Second, r.Retry)
	}
	return time.Duration(number(r.Body["poll_after_ms"])) * time.Millisecond
}

// admitted takes the admit token and the session's end from the status
// that admits the fan.
func (f *fan) admitted(r Reply) {
	f.admit = r.Body["admit_token"].(string)
	f.until, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(r.Body["admit_expires_at"]))
	f.trace.Position = int64(number(r.Body["position"]))
	f.trace.AdmittedAt = time.Now()
}

// leave tells the waiting room the fan is done (the queue cookie says who).
// It runs after the sale's context may have ended, so it has its own.
func (f *fan) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := f.cl.Do(ctx, "leave", "DELETE", f.crowd.url("/v1/events/%d/queue", f.crowd.event), nil)
	if r.Status == 200 && r.Body["outcome"] == "ended" {
		f.crowd.st.Left.Add(1)
		f.crowd.st.SessionNanos.Add(int64(time.Since(f.trace.AdmittedAt)))
	}
}

// bestAvailable is the hold request for count seats in a random band.
func (f *fan) bestAvailable(count int) map[string]any {
	return map[string]any{"best_available": map[string]any{"band": f.band(), "count": count}}
}

// firstAsk browses the map and says what the fan asks to hold first:
// best available (the rest), seats picked from the map (sharePicked; the
// map may be a second stale), or too many tickets (shareOverLimit).
func (f *fan) firstAsk(ctx context.Context, count int) map[string]any {
	m := f.cl.Do(ctx, "seatmap", "GET", f.crowd.url("/v1/events/%d/seatmap", f.crowd.event), nil)
	switch p := rand.Float64(); {
	case p < shareOverLimit:
		return f.bestAvailable(overLimit)
	case p < shareOverLimit+sharePicked && m.Status == 200:
		if seats := f.pick(ctx, m.Body, count); seats != nil {
			return map[string]any{"seats": seats}
		}
	}
	return f.bestAvailable(count)
}

// pick chooses count adjacent free seats from the map, as a fan tapping
// seats would (asking for the layout first, as a browser does).
func (f *fan) pick(ctx context.Context, m map[string]any, count int) []string {
	free := decodeBitmap(m["available"])
	target := f.crowd.url("/v1/events/%d/layout", f.crowd.event)
	f.cl.Do(ctx, "layout", "GET", target, nil)
	return PickFront(f.crowd.layout.get(target), free, count)
}

// hold holds count seats: the first ask, then best available after a lost
// race (or 4 seats after the limit). After three misses every seat is held
// or sold: half give up; the rest keep the page open and watch the map for
// seats coming back (lapsed holds, failed payments) while the session
// lasts. ok is false when the fan got no hold (done says whether it leaves).
func (f *fan) hold(ctx context.Context, count int) (id string, expires time.Time, ok bool) {
	body := f.firstAsk(ctx, count)
	for try := 0; ; try++ {
		if try == 3 && rand.IntN(2) == 0 {
			f.done = true
			return "", time.Time{}, false
		}
		if try >= 3 {
			seats, soldOut := f.watchMap(ctx, count)
			if soldOut {
				f.done = true // the page says sold out: the fan leaves
			}
			if seats == nil {
				return "", time.Time{}, false // sold out, or the session (or the sale) is over
			}
			body = map[string]any{"seats": seats}
		}
		h := f.retry(ctx, patience(f.until), "hold", "POST", f.crowd.url("/v1/events/%d/holds", f.crowd.event), body, f.auth()...)
		switch h.Status {
		case 201:
			expires, _ := time.Parse(time.RFC3339Nano, h.Body["expires_at"].(string))
			f.grant, _ = h.Body["hold_token"].(string)
			return h.Body["hold_id"].(string), expires, true
		case 409:
			f.crowd.st.Taken.Add(1)
			body = f.bestAvailable(count)
		case 422:
			f.crowd.st.Limit.Add(1)
			body = f.bestAvailable(limitRetry)
		default:
			f.done = true
			return "", time.Time{}, false
		}
	}
}

// watchMap looks at the seat map every few seconds until some seats are
// free, and picks up to count of them (together in a row if it can, else
// wherever they are); nil when the session or the sale ends first, and
// soldOut when nothing is left even on hold.
func (f *fan) watchMap(ctx context.Context, count int) (seats []string, soldOut bool) {
	for {
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(time.Duration(2000+rand.IntN(3000)) * time.Millisecond):
		}
		if time.Until(f.until) < 5*time.Second {
			return nil, false
		}
		m := f.cl.Do(ctx, "seatmap", "GET", f.crowd.url("/v1/events/%d/seatmap", f.crowd.event), nil)
		if m.Status == 200 && number(m.Body["available_count"]) == 0 {
			s := f.cl.Do(ctx, "event stats", "GET", f.crowd.url("/v1/events/%d/stats", f.crowd.event), nil)
			if s.Status == 200 && number(s.Body["available"]) == 0 && number(s.Body["held"]) == 0 {
				return nil, true
			}
			continue
		}
		if m.Status != 200 {
			continue
		}
		target := f.crowd.url("/v1/events/%d/layout", f.crowd.event)
		if seats := PickFree(f.crowd.layout.get(target), decodeBitmap(m.Body["available"]), count); seats != nil {
			return seats, false
		}
	}
}

// release lets the held seats go.
func (f *fan) release(ctx context.Context, id string) {
	f.retry(ctx, stepPatience, "release", "DELETE", f.crowd.url("/v1/holds/%s", id), nil, f.owner()...)
}

// payCard pays by card and double-clicks Confirm: two confirms with one
// idempotency key, at once (each tapped again while the service fails).
// Told the booking is confirmed, the fan notes it; told it is pending, it
// watches the booking; declined, it lets the seats go rather than leave
// them held.
func (f *fan) payCard(ctx context.Context, id string, expires time.Time) {
	st := f.crowd.st
	hdr := append(f.owner(), "Idempotency-Key", fmt.Sprintf("confirm-%d-%s", f.n, id))
	var wg sync.WaitGroup
	var confirmed atomic.Pointer[map[string]any]
	var pending atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.retry(ctx, patience(expires.Add(time.Minute)), "confirm", "POST", f.crowd.url("/v1/holds/%s/confirm", id),
				map[string]any{"payment_token": "tok_visa"}, hdr...)
			if c.Status != 200 && c.Status != 202 {
				return
			}
			b := bookingOf(c.Body)
			if b["status"] == "CONFIRMED" {
				confirmed.Store(&b)
			} else if n := int64(number(b["booking_id"])); n > 0 {
				pending.Store(n)
			}
		}()
	}
	wg.Wait()
	f.done = true
	st.Paid.Add(1)
	switch b := confirmed.Load(); {
	case b != nil:
		st.Confirmed.Add(1)
		f.told(*b)
	case pending.Load() > 0:
		f.awaitBooking(ctx, id, pending.Load())
	default:
		st.FailedPay.Add(1)
		f.release(ctx, id)
	}
}

// bookingOf is the booking in a pay or confirm answer: the answer itself
// (a settled booking) or its "booking".
func bookingOf(body map[string]any) map[string]any {
	if b, ok := body["booking"].(map[string]any); ok {
		return b
	}
	return body
}

// told records a booking the fan was told is confirmed, in the crowd's own
// list (the checker compares it with the database).
func (f *fan) told(b map[string]any) {
	c := check.Confirmation{Fan: f.n, Booking: int64(number(b["booking_id"])), AmountPaise: int64(number(b["amount_paise"])), At: time.Now()}
	if f.trace.Account != "" {
		c.Account = account.IdentityPrefix + f.trace.Account
	}
	seats, _ := b["seats"].([]any)
	for _, s := range seats {
		c.Seats = append(c.Seats, fmt.Sprint(s))
	}
	f.crowd.confirmed(c)
}

// payUPI pays by UPI: shareSlowUPI of payers wait until 20 s before the
// hold ends first. Then the fan waits for the outcome.
func (f *fan) payUPI(ctx context.Context, id string, expires time.Time) {
	if rand.Float64() < shareSlowUPI {
		if slow := time.Until(expires) - 20*time.Second; slow > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(slow): // the payer's dawdling, not a wait for anything
			}
		}
	}
	p := f.retry(ctx, patience(expires.Add(time.Minute)), "pay", "POST", f.crowd.url("/v1/holds/%s/payment", id), map[string]any{"phone": Phone(f.n)},
		append(f.owner(), "Idempotency-Key", fmt.Sprintf("pay-%d-%s", f.n, id))...)
	if p.Status != 201 {
		if p.Status == 410 {
			f.crowd.st.Abandoned.Add(1)
		}
		f.done = true
		return
	}
	f.crowd.st.Paid.Add(1)
	// A retry that arrives after the payment settled (the webhook or the
	// reconciler won the race) is answered with the settled booking itself.
	f.awaitBooking(ctx, id, int64(number(bookingOf(p.Body)["booking_id"])))
}

// awaitBooking looks at the booking once a second until its payment is
// settled (the simulated payer approves after a few seconds), the session
// ends (the outcome still reaches the fan by SMS) or the sale does.
func (f *fan) awaitBooking(ctx context.Context, hold string, booking int64) {
	st := f.crowd.st
	for ctx.Err() == nil {
		time.Sleep(time.Second) // a fan looking at the page, as a browser polls
		g := f.cl.Do(ctx, "booking", "GET", f.crowd.url("/v1/bookings/%d", booking), nil, f.owner()...)
		switch g.Body["status"] {
		case "CONFIRMED":
			st.Confirmed.Add(1)
			f.told(g.Body)
			f.done = true
			return
		case "FAILED":
			// The fan gives up and lets the seats go (the page offers it).
			st.FailedPay.Add(1)
			f.release(ctx, hold)
			f.done = true
			return
		case "REFUND_DUE", "REFUNDED":
			st.Refunded.Add(1)
			f.done = true
			return
		}
		if g.Status == 401 {
			return
		}
	}
}
