package http

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
)

// queueReply is what join and status answer a fan. Ahead is the number a
// fan is shown: fans in line before it who have not been let in yet.
// Position is the place's number since the line opened, so it counts the
// fans already let in too: it orders places (tools and the demo's checker
// read it), it is not a count to show. EtaSeconds estimates when the
// fan's place is offered (-1: unknown, nobody is being let in), and
// BoundBy says what sets the pace: "rate" (the new_users_per_minute dial),
// "core_health" (the rate, held below the dial while the booking service
// is unwell: gateway/health), "active_users" (the room is full, or will be
// before the fan's turn: the line moves as fast as sessions end), or
// "paused".
type queueReply struct {
	State          string     `json:"state"`
	QueueToken     string     `json:"queue_token,omitempty"`
	Position       int64      `json:"position,omitempty"`
	Ahead          int64      `json:"ahead"`
	EtaSeconds     int64      `json:"eta_seconds"`
	BoundBy        string     `json:"bound_by,omitempty"`
	PollAfterMs    int64      `json:"poll_after_ms"`
	OnsaleAt       *time.Time `json:"onsale_at,omitempty"`
	AdmitToken     string     `json:"admit_token,omitempty"`
	AdmitExpiresAt *time.Time `json:"admit_expires_at,omitempty"`
	Message        string     `json:"message,omitempty"`
}

// sessionEnded is the answer to a fan whose one turn in the sale is over
// (its session ran out or it left, or it gave up its place): it cannot
// queue again, but what it holds or bought does not depend on the session.
func sessionEnded() error {
	return gateway.Errorf(gateway.ESessionEnded, "your turn in this sale is over: each fan gets one. "+
		"Seats you hold or bought are still yours: pay for them on the booking page, and find your tickets under My tickets")
}

// unavailableFor is the fail-closed answer when the store cannot be reached.
func unavailableFor(what string) error {
	return gateway.Errorf(gateway.EUnavailable, "the waiting room cannot %s right now; try again", what)
}

// joinRefusals labels, in the joins metric, the refusals made before the
// store answers (its answers are labelled by state).
var joinRefusals = map[string]string{gateway.ERateLimited: "rate_limited", gateway.EIdentity: "identity",
	gateway.EPhoneUnverified: "identity", gateway.ECrossSite: "cross_site", gateway.EUnavailable: "unavailable",
	gateway.ENotOpen: "not_open", gateway.EClosed: "closed"}

// join gives the fan a place (or the one it has) and a queue token.
func (s *Server) join(ctx *fasthttp.RequestCtx, p params) error {
	err := s.joinFan(ctx, p)
	if label, ok := joinRefusals[gateway.ErrorCode(err)]; ok && err != nil {
		s.metrics.joins.WithLabelValues(label).Inc()
	}
	return err
}

func (s *Server) joinFan(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	if err := refuseCrossSite(ctx); err != nil {
		return err
	}
	if err := limit(s.limits.join, s.clientKey(ctx)); err != nil {
		return err
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := s.room.Ensure(c, ev)
	var outside *gateway.Error // not_open or closed: outside the sale window, nothing written
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return gateway.Errorf(gateway.ENotFound, "no such event")
	case errors.As(err, &outside):
		return err
	case err != nil:
		return unavailableFor("take new arrivals")
	}
	identity, err := s.identity(ctx, v.Dials.AccountRequired)
	if err != nil {
		return err
	}
	held := s.heldToken(ctx, ev, v.Dials.Epoch)
	if q := held; q != nil && q.Subject == identity {
		// A fan joining again with its token (a reload): put its place back
		// first if a failover lost it, so the join finds it instead of
		// handing out a new one at the back.
		if _, err := s.restore(c, ev, q); errors.Is(err, gateway.ErrUnavailable) {
			return unavailableFor("take new arrivals")
		}
	}
	r, err := s.store.Join(c, ev, identity)
	if errors.Is(err, gateway.ErrNoEvent) {
		// Redis lost the room (restarted empty): set it up again, once.
		s.room.Forget(ev)
		if v, err = s.room.Ensure(c, ev); err == nil {
			r, err = s.store.Join(c, ev, identity)
		}
	}
	if errors.As(err, &outside) {
		return err
	}
	if err != nil {
		return unavailableFor("take new arrivals")
	}
	s.metrics.joins.WithLabelValues(r.State).Inc()
	switch r.State {
	case gateway.StateNotOpen:
		return gateway.Errorf(gateway.ENotOpen, "the queue opens at %s", r.At.UTC().Format(time.RFC3339)).With("opens_at", r.At)
	case gateway.StateClosed:
		return gateway.Errorf(gateway.EClosed, "the sale is closed")
	case gateway.StateEnded:
		return sessionEnded()
	}
	tok, err := s.cfg.Queue.Sign(ev, identity, r.Position, 0, v.Dials.Epoch)
	if err != nil {
		return gateway.Errorf(gateway.EInternal, "could not sign the queue token")
	}
	if held == nil || held.Subject == identity || finished(held, time.Now()) {
		// Otherwise the cookie keeps a live place of another identity (a
		// guest's, while an account joins): a join never replaces it. The
		// token is in the answer; the page gives the other place back
		// (leave) before the cookie takes this one.
		s.setQueueCookie(ctx, ev, tok, 24*time.Hour)
	}
	reply := describe(&v, &token.Queue{Event: ev, Position: r.Position}, time.Now())
	reply.QueueToken = tok
	ctx.Response.Header.Set("Cache-Control", "private, no-store")
	writeJSON(ctx, fasthttp.StatusOK, reply)
	return nil
}

// describe answers "where am I?" from the token and the cached view alone.
func describe(v *room.View, q *token.Queue, now time.Time) queueReply {
	d, tk := v.Dials, v.Tick
	r := queueReply{State: gateway.StateWaiting, Position: q.Position}
	switch {
	case !d.ClosesAt.IsZero() && !now.Before(d.ClosesAt):
		r.State, r.PollAfterMs = gateway.StateClosed, 60000
		return r
	case d.SoldOut:
		r.State, r.PollAfterMs = gateway.StateSoldOut, 60000
		return r
	case q.Position == 0:
		r.State = gateway.StatePrequeue
		on := d.OnsaleAt
		r.OnsaleAt = &on
		r.PollAfterMs = prequeuePoll(on.Sub(now).Milliseconds(), returnSpread(d, tk.Queue))
		return r
	}
	r.Ahead = max(0, q.Position-tk.Serving-1)
	r.EtaSeconds, r.BoundBy = eta(v, r.Ahead)
	near := nearPoll(d)
	if r.EtaSeconds >= 0 {
		r.PollAfterMs = clamp(r.EtaSeconds*1000/10, 1000, near)
	} else {
		r.PollAfterMs = near
	}
	if d.Paused {
		// A pause is for a moment: come back soon, to be first in when it ends.
		r.State = gateway.StatePaused
		r.PollAfterMs = min(r.PollAfterMs, 5000)
		r.PollAfterMs = jitter(r.PollAfterMs)
		return r
	}
	r.PollAfterMs = jitter(r.PollAfterMs)
	if far := farPoll(d, r.Ahead); far > r.PollAfterMs {
		r.PollAfterMs = far
	}
	return r
}

// The poll interval is the crowd's load: 600,000 fans told to come back
// every 10 s are 60,000 polls a second. A fan is told to come back often
// enough never to miss its turn (an offer lapses ClaimSeconds after it is
// made, and the fan goes to the back: claim.lua), and no more often than
// that. Near the front (its soonest offer within two nearPolls), a tenth
// of its wait, from every second to every third of the claim window
// (nearPoll): the fans of the next two nearPolls' admissions at the dial
// (2,000 at the full-size demo's dials) see their offers promptly. Far back, the line's top speed sets it: the
// rate dial is the fastest the line can move (the core's health and the
// active-users cap only slow it), so a fan with ahead fans before it
// cannot be offered sooner than soonest = ahead / dial, nor have the offer
// lapse before soonest + claim. farPoll lets it sleep half of soonest and
// a third of the claim window on top: still back in time if operators
// double the dial meanwhile (offered at soonest/2 at the earliest), for
// fans further than 4 claim windows' worth of places even if they triple
// it; and at most farPollMax, so the page's place and estimate move
// (between polls the page counts the estimate down itself).
const farPollMax = 120_000

// nearPoll is the longest a fan near the front waits between polls: a
// third of the claim window (three chances to see the offer), 1 s to 30 s.
func nearPoll(d gateway.Dials) int64 { return clamp(int64(d.ClaimSeconds)*1000/3, 1000, 30000) }

// farPoll is the interval a fan with ahead fans before it may be given
// (spread over 60-100% of it, never past it), or 0 when admission is paused
// or has no rate (then nearPoll: the line may start at any moment), and 0
// for a fan whose soonest offer is within two nearPolls: near the front the
// tenth of its wait serves it (describe), at least every second. (Without
// that bound the far rule, never below 60% of nearPoll, held every fan at
// the front, a lone cinema fan "0 ahead" included, to 18-30 s between
// polls: its offer sat unseen that long.)
func farPoll(d gateway.Dials, ahead int64) int64 {
	if d.Paused || d.NewUsersPerMinute <= 0 {
		return 0
	}
	soonest := ahead * 60_000 / int64(d.NewUsersPerMinute)
	if soonest < 2*nearPoll(d) {
		return 0
	}
	safe := min(soonest/2+nearPoll(d), farPollMax)
	return safe*3/5 + rand.Int64N(safe*2/5+1) // 60-100%: spread, never past safe
}

// prequeuePoll is when a fan in the pre-queue (until ms before onsale)
// comes back: halfway to onsale while it is far off (at most every 30 s),
// and from onsale on, spread over the next spread ms (returnSpread).
// Nobody gains by polling first (the draw at onsale decides the places),
// so the pre-queue's crowd need not all come back in the second onsale
// strikes. A fan who comes back before the draw is made (its gateway's
// clock ahead of Redis's) is spread over the same time again.
func prequeuePoll(until, spread int64) int64 {
	if until > 2*spread {
		return jitter(clamp(until/2, 1000, 30000))
	}
	return max(until, 0) + 250 + rand.Int64N(spread)
}

// returnSpread is how long after onsale the pre-queue's fans come back
// over: each learns its drawn place with a call to Redis (position.lua),
// so prequeued fans (the tick's queue length: the pre-queue's size before
// onsale, the line's after) come back at prequeueReturns a second, within
// 1 s for a cinema's pre-queue and over at most nearPoll for a stadium's:
// the first places offered lapse a whole claim window after onsale, and
// nearPoll is a third of it. A spread of nearPoll for every pre-queue
// left a lone fan's page at 0:00 for up to 30 s.
func returnSpread(d gateway.Dials, prequeued int64) int64 {
	return clamp(prequeued*1000/prequeueReturns, 1000, nearPoll(d))
}

// prequeueReturns is the pre-queue's return rate after onsale, in fans a
// second across the gateways, each a position lookup on the event's Redis
// master: under half the joins a second its script does (about 26,000:
// deploy/README.md, sizing), leaving the rest to the fans who join as the
// sale opens. (The full sale's pre-queue, capped at nearPoll, comes back
// at 20,000 a second: make demo FANS=600000 passed with it; at 60,000
// fans the 17,000 of the pre-queue back within a second made the status
// p99 1.1 s in one run of three on a busy machine.)
const prequeueReturns = 10_000

// Bounds of a fan's wait (queueReply.BoundBy).
const (
	boundRate        = "rate"
	boundCoreHealth  = "core_health"
	boundActiveUsers = "active_users"
	boundPaused      = "paused"
)

// eta estimates the seconds until the place of a fan with ahead fans before
// it is offered, and what bounds the wait. The line moves at the rate (the
// dial, or less while the core's health holds it down: View.Rate) while
// the room has space (the cap, total_active_users, less the live
// sessions and open offers); once it is full, a place is offered only when
// a session ends. Sessions end at least as fast as cap / session_seconds
// (each ends by then; fans who finish early end theirs sooner): once the
// room has been full for a whole measuring window (View.FullSince), the
// rate measured over it (View.OfferRate) counts only sessions ending and
// is used when it is faster, never faster than the dial. (Right after the
// room fills, the measure still holds the burst that filled it, at the
// dial's pace: trusting it would promise the dial.) So the ahead+1
// offers this fan waits for are: first those the free room takes, at the
// dial; the rest at the slower of the dial and the sessions' turnover.
// -1 when nobody is being let in (paused, a rate of zero, a cap of zero).
func eta(v *room.View, ahead int64) (int64, string) {
	d, tk := v.Dials, v.Tick
	rate, boundByRate := v.Rate(), boundRate // per minute
	if v.Lowered() {
		boundByRate = boundCoreHealth
	}
	switch {
	case d.Paused:
		return -1, boundPaused
	case rate <= 0:
		return -1, boundByRate
	case d.TotalActiveUsers <= 0:
		return -1, boundActiveUsers
	}
	n := float64(ahead + 1) // the fans ahead, then this fan
	free := float64(max(0, int64(d.TotalActiveUsers)-tk.Active-tk.Offers))
	if n <= free {
		return int64(math.Ceil(n / rate * 60)), boundByRate
	}
	turnover := float64(d.TotalActiveUsers) * 60 / float64(max(d.SessionSeconds, 1))
	measured := free == 0 && !v.FullSince.IsZero() && v.Fetched.Sub(v.FullSince) >= room.RateWindow
	if measured && v.OfferRate > turnover {
		turnover = v.OfferRate
	}
	bound := boundActiveUsers
	if turnover >= rate {
		turnover, bound = rate, boundByRate
	}
	return int64(math.Ceil((free/rate + (n-free)/turnover) * 60)), bound
}

// jitter spreads polls by +-25% so a crowd told the same interval (at
// onsale, say) does not come back in one wave.
func jitter(ms int64) int64 {
	return ms*3/4 + rand.Int64N(ms/2+1)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// fanToken verifies the fan's queue token (bearer, else the cookie: a
// bearer that is not a queue token, such as a page's account token, falls
// back to the cookie) and applies the per-token limit; a bad token is
// limited per address, apart from joins (limit.go: anon) and refused with invalid_queue_token.
//
// The token it returns is the request's own bytes (no copy on a poll),
// good until the handler returns. Now is the request's time (requestTime).
func (s *Server) fanToken(ctx *fasthttp.RequestCtx, ev int64, now time.Time) (*token.Queue, []byte, error) {
	raw := bearerBytes(ctx)
	q, err := s.cfg.Queue.VerifyBytes(raw, ev, now)
	if err != nil {
		if cookie := s.queueCookieBytes(ctx, ev); len(cookie) > 0 && !bytes.Equal(cookie, raw) {
			raw = cookie
			q, err = s.cfg.Queue.VerifyBytes(raw, ev, now)
		}
	}
	if err != nil {
		if err := limit(s.limits.anon, s.clientKey(ctx)); err != nil {
			return nil, nil, err
		}
		return nil, nil, gateway.Errorf(gateway.EQueueToken, "join the queue first: the queue token is missing, invalid or expired")
	}
	if err := s.limitToken(q, now); err != nil {
		return nil, nil, err
	}
	return q, raw, nil
}

// status answers a fan's poll. In the steady state it touches no store:
// the place is in the token, the serving counter in the room's view. Only
// two moments go to the store: a pre-queue fan learning its drawn place
// after onsale, and a fan whose place has been offered claiming it.
func (s *Server) status(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	now := requestTime(ctx) // the clock fasthttp read for this request: a poll reads no other but its latency's
	q, raw, err := s.fanToken(ctx, ev, now)
	if err != nil {
		return err
	}
	v, ok := s.room.Current(ev) // read only: shared with every poll of the event
	if !ok || v.Fetched.IsZero() {
		// A room this gateway does not tick: its sale window is over (the
		// ticker retired it: closed, from the catalog, nothing written), or
		// the gateway has just started (Ensure reads the room in).
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ensured, err := s.room.Ensure(c, ev)
		if gateway.ErrorCode(err) == gateway.EClosed {
			s.clearQueueCookie(ctx, ev)
			return err
		}
		if err != nil || ensured.Fetched.IsZero() {
			return gateway.Errorf(gateway.EUnavailable, "the waiting room is starting; try again")
		}
		v = &ensured
	}
	touched := "no"
	noStore(ctx)
	if q.Epoch != v.Dials.Epoch {
		// Redis lost the room this place belonged to: its places are gone.
		s.clearQueueCookie(ctx, ev)
		return gateway.Errorf(gateway.ERejoin, "the waiting room was reset: join the queue again")
	}
	// Admitted already: the session is in the token.
	if q.Admitted > now.UnixMilli() {
		return s.admitted(ctx, ev, q, time.UnixMilli(q.Admitted), string(raw), touched)
	}
	if q.Admitted > 0 {
		// The token says this fan had its session, now over: one per
		// identity, whatever the store says. (A failover may have lost the
		// claim's 'done'; the restore writes it again, so a claim could not
		// open a second session.)
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.restore(c, ev, q)
		s.clearQueueCookie(ctx, ev)
		return sessionEnded()
	}
	// (The steady-state poll below touches no Redis and needs no deadline:
	// contexts are made only on the two paths that do.)
	newTok := ""
	// A pre-queue fan learns its drawn place once, after onsale.
	learned := false
	if q.Position == 0 && !now.Before(v.Dials.OnsaleAt) {
		touched = "yes"
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pos, err := s.store.Position(c, ev, q.Subject)
		if errors.Is(err, gateway.ErrNoEvent) {
			// The store does not know this fan: a failover lost its
			// pre-queue join. The token proves it (restore.lua).
			pos, err = s.restore(c, ev, q)
		}
		if errors.Is(err, gateway.ErrEnded) {
			// The fan left the pre-queue (or had its session): what the
			// claim path answers such a fan.
			s.clearQueueCookie(ctx, ev)
			return sessionEnded()
		}
		if e := (*gateway.Error)(nil); errors.As(err, &e) {
			s.clearQueueCookie(ctx, ev)
			return err
		}
		if err == nil && pos > 0 {
			q.Position = pos
			learned = true
			newTok, _ = s.cfg.Queue.Sign(ev, q.Subject, pos, 0, v.Dials.Epoch)
		}
	}
	r := describe(v, q, now)
	if q.Position > v.Tick.Queue && q.Position > 0 && r.State == gateway.StateWaiting && !learned && tickedSince(v, q) {
		// The line is shorter than this fan's place: a failover lost the
		// join (and seq with it), and the bucket never offers a place
		// beyond the line, so waiting for the claim would wait forever.
		// The token puts the place back now (restore.lua), and the line
		// with it. Only when the view was read after the token was made:
		// a view a tick older than the fan's join (or than the draw that
		// just gave a pre-queue fan its place, learned) is lag, not loss,
		// and at the onsale peak that lag would cost two round trips a
		// poll.
		touched = "yes"
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pos, err := s.restore(c, ev, q)
		var e *gateway.Error
		switch {
		case errors.As(err, &e):
			s.clearQueueCookie(ctx, ev)
			return err
		case err == nil && pos != q.Position && pos > 0:
			q.Position = pos // the control's rejoin at the back
			newTok, _ = s.cfg.Queue.Sign(ev, q.Subject, pos, 0, v.Dials.Epoch)
			r = describe(v, q, now)
		}
	}
	if r.State == gateway.StateWaiting && q.Position > 0 && q.Position <= v.Tick.Serving {
		// This fan's place has been offered: claim it (one round trip per fan).
		touched = "yes"
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, n, err := s.store.Claim(c, ev, q.Subject, q.Position)
		if err == nil && (st == gateway.ClaimUnknown || st == gateway.ClaimMoved && n < q.Position) {
			// The store lost this fan's join (unknown) or its move to the
			// back (a smaller place than the signed one): the token puts it
			// back (restore.lua), and the claim is made again.
			st, n, err = s.reclaim(c, ev, q)
		}
		var e *gateway.Error
		switch {
		case errors.As(err, &e):
			// The fan's turn is over, or the room it queued in is gone.
			s.clearQueueCookie(ctx, ev)
			return err
		case err != nil:
			// Redis is down: never admit from a guess; the fan keeps waiting.
			r.PollAfterMs = 2000
		case st == gateway.ClaimAdmitted:
			q.Admitted = n
			tok, _ := s.cfg.Queue.Sign(ev, q.Subject, q.Position, q.Admitted, v.Dials.Epoch)
			return s.admitted(ctx, ev, q, time.UnixMilli(n), tok, touched)
		case st == gateway.ClaimMoved || st == gateway.ClaimRequeued:
			// A stale token (another tab moved on), or the turn lapsed
			// unclaimed and the fan went to the back: the current place.
			q.Position = n
			newTok, _ = s.cfg.Queue.Sign(ev, q.Subject, n, 0, v.Dials.Epoch)
			r = describe(v, q, now)
			if st == gateway.ClaimRequeued {
				r.Message = "your turn came and went unclaimed: you are back in line"
			}
		case st == gateway.ClaimEnded:
			s.clearQueueCookie(ctx, ev)
			return sessionEnded()
		case st == gateway.ClaimPaused:
			r.State = gateway.StatePaused
		}
	}
	if newTok != "" {
		s.setQueueCookie(ctx, ev, newTok, 24*time.Hour)
		r.QueueToken = newTok
	}
	s.metrics.poll(r.State, touched)
	writeReply(ctx, fasthttp.StatusOK, &r)
	return nil
}

// tickedSince reports whether v's tick read the store after q was signed.
// A token's issue time is in whole seconds (JWT's NumericDate), so the
// tick (on the Redis clock, Tick.Now) must be a second past it.
func tickedSince(v *room.View, q *token.Queue) bool {
	if q.IssuedAt == nil {
		return true // not one of ours to reason about: the store decides
	}
	return v.Tick.Now.After(q.IssuedAt.Add(time.Second))
}

// heldToken is the place the joining browser holds, from its queue cookie:
// a token that verifies, of this room (epoch). When it is the joining
// identity's, it is the proof of place for a restore (a session over
// included: the restore writes that it is over); when it is another
// identity's and its session is not over, the join leaves the cookie
// alone. (A join's bearer is an account token, never a queue token.)
func (s *Server) heldToken(ctx *fasthttp.RequestCtx, ev int64, epoch string) *token.Queue {
	raw := s.queueCookieValue(ctx, ev)
	if raw == "" {
		return nil
	}
	q, err := s.cfg.Queue.Verify(raw, ev)
	if err != nil || q.Epoch != epoch {
		return nil
	}
	return q
}

// restore puts the fan back at the place its signed token holds when the
// store lost it at a Redis failover (gateway/redis/restore.lua: what is
// lost, the rule, and the bound on what it costs). It returns where the
// fan stands now: its place (0: in a draw not yet made), or the error to
// answer: session_ended, rejoin (a token of another room), or
// unavailable.
func (s *Server) restore(c context.Context, ev int64, q *token.Queue) (int64, error) {
	out, n, err := s.store.Restore(c, ev, q.Subject, gateway.Held{Position: q.Position, Admitted: q.Admitted, Epoch: q.Epoch})
	if err != nil {
		return 0, err
	}
	s.metrics.restores.WithLabelValues(string(out)).Inc()
	switch out {
	case gateway.RestoreEnded:
		return 0, sessionEnded()
	case gateway.RestoreRejoin:
		return 0, gateway.Errorf(gateway.ERejoin, "the waiting room was reset: join the queue again")
	case gateway.RestoreOff:
		// The failover test's control: without the rule, a fan the store
		// does not know can only join again, at the back.
		r, err := s.store.Join(c, ev, q.Subject)
		if err != nil {
			return 0, err
		}
		if r.State == gateway.StateEnded {
			return 0, sessionEnded()
		}
		return r.Position, nil
	}
	return n, nil
}

// reclaim restores a fan whose claim found the store without its place,
// then claims again. A place the store still does not know after that
// (its room was removed meanwhile) is answered rejoin: never the old
// defect of a fan left at the front, claiming in vain on every poll.
func (s *Server) reclaim(c context.Context, ev int64, q *token.Queue) (gateway.ClaimOutcome, int64, error) {
	pos, err := s.restore(c, ev, q)
	switch {
	case err != nil:
		return "", 0, err
	case pos == 0:
		// In a draw not yet made (kept 0, or back in the open draw): no
		// place to move the token to, and a token re-signed at 0 would
		// lose the proof of its place. The fan waits.
		return gateway.ClaimWaiting, 0, nil
	case pos != q.Position:
		// Restored elsewhere (the control's rejoin at the back): the
		// token moves to the place the store has.
		return gateway.ClaimMoved, pos, nil
	}
	st, n, err := s.store.Claim(c, ev, q.Subject, q.Position)
	if err == nil && (st == gateway.ClaimUnknown || st == gateway.ClaimMoved && n < q.Position) {
		return "", 0, gateway.Errorf(gateway.ERejoin, "the waiting room lost your place and cannot restore it: join the queue again")
	}
	return st, n, err
}

// admitted answers an admitted fan: the admit token the core accepts.
func (s *Server) admitted(ctx *fasthttp.RequestCtx, ev int64, q *token.Queue, until time.Time, queueTok string, touched string) error {
	admit, err := s.cfg.Admit.Admit(q.Subject, ev, until, s.cfg.MaxTickets)
	if err != nil {
		return gateway.Errorf(gateway.EInternal, "could not sign the admit token")
	}
	s.setQueueCookie(ctx, ev, queueTok, time.Until(until)+time.Minute)
	s.metrics.poll(gateway.StateAdmitted, touched)
	writeJSON(ctx, fasthttp.StatusOK, queueReply{State: gateway.StateAdmitted, QueueToken: queueTok, Position: q.Position,
		AdmitToken: admit, AdmitExpiresAt: &until, PollAfterMs: 30000})
	return nil
}

// leave: a fan who is done (tickets bought, or giving up) ends the session
// now, so the next fan in line comes in at once instead of when the session
// would have run out; a fan still in line gives the place up. The admit
// token already issued stays valid until it expires: leaving gives nothing
// back to the leaver, it only hands the room on.
func (s *Server) leave(ctx *fasthttp.RequestCtx, p params) error {
	ev, err := p.event()
	if err != nil {
		return err
	}
	if err := refuseCrossSite(ctx); err != nil {
		return err
	}
	q, raw, err := s.fanToken(ctx, ev, requestTime(ctx))
	if err != nil {
		return err
	}
	ctx.Response.Header.Set("Cache-Control", "private, no-store")
	outcome := gateway.LeaveNone
	if v, ok := s.room.View(ev); !ok || q.Epoch == v.Dials.Epoch {
		// (A token of a room Redis has lost has nothing left to leave.)
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if outcome, err = s.store.Leave(c, ev, q.Subject); err != nil {
			return unavailableFor("record that")
		}
	}
	s.metrics.leaves.WithLabelValues(string(outcome)).Inc()
	// The cookie goes only with its own place: a page that signed in gives
	// back the guest's place by its bearer token while the cookie already
	// names the account's.
	if cookie := s.queueCookieBytes(ctx, ev); len(cookie) == 0 || bytes.Equal(cookie, raw) {
		s.clearQueueCookie(ctx, ev)
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"outcome": string(outcome)})
	return nil
}
