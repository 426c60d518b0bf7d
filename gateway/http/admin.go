package http

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/shared/account"
)

// maxPatchBody bounds a dials PATCH.
const maxPatchBody = 16 << 10

// MinAdminToken is the shortest service token (ONSALE_ADMIN_TOKEN, the
// gateways' own credential for reading dials from the core) the gateway
// accepts, in bytes: 32 random bytes' worth, so that guessing it is
// hopeless.
const MinAdminToken = 32

// Refused operator tokens are limited per client address: a burst of
// adminFailBurst, then one more every adminFailEvery. An address over the
// limit is answered 429 rate_limited, whatever token it sends, until its
// bucket refills: the right token does not open a locked address, so a
// guesser learns nothing from its guesses while locked.
const (
	adminFailBurst = 10
	adminFailEvery = 6 * time.Second
	// adminFailKeys bounds the addresses remembered; past it, failures of
	// new addresses share one bucket (a crowd of addresses cannot flush an
	// address's record to try again).
	adminFailKeys = 100_000
)

// authFailures keeps a token bucket of failed admin authentications per
// client address. Only addresses with recent failures have an entry: a
// bucket that has refilled is dropped (it is the same as none).
type authFailures struct {
	mu       sync.Mutex
	m        map[string]*rate.Limiter
	overflow *rate.Limiter
	swept    time.Time
}

func newAuthFailures() *authFailures {
	return &authFailures{m: make(map[string]*rate.Limiter), overflow: newFailBucket()}
}

func newFailBucket() *rate.Limiter {
	return rate.NewLimiter(rate.Every(adminFailEvery), adminFailBurst)
}

// bucket is addr's bucket (f.mu held), nil when it has none and !create.
func (f *authFailures) bucket(addr string, now time.Time, create bool) *rate.Limiter {
	if now.Sub(f.swept) > time.Minute {
		for k, b := range f.m {
			if b.TokensAt(now) >= adminFailBurst {
				delete(f.m, k)
			}
		}
		f.swept = now
	}
	if b, ok := f.m[addr]; ok {
		return b
	}
	if len(f.m) >= adminFailKeys {
		return f.overflow
	}
	if !create {
		return nil
	}
	b := newFailBucket()
	f.m[addr] = b
	return b
}

// locked says how long addr must wait before its next try (0: it may try).
func (f *authFailures) locked(addr string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bucket(addr, now, false)
	if b == nil {
		return 0
	}
	if t := b.TokensAt(now); t < 1 {
		return time.Duration((1 - t) * float64(adminFailEvery))
	}
	return 0
}

// fail records a failed authentication of addr.
func (f *authFailures) fail(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bucket(addr, now, true).AllowN(now, 1)
}

// size is the number of addresses with an entry (the bounds metric).
func (f *authFailures) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// adminAuth authenticates an operator: a session token the core signed
// at sign-in (account.OperatorClaims), from an address not locked by its
// failures (authFailures). Every operator may read; a change is also
// judged by the core, which checks the operator's current role and state
// in its database and audits it (SaveDials). A refusal is logged with the
// address (never the token sent).
func (s *Server) adminAuth(ctx *fasthttp.RequestCtx) (gateway.Operator, error) {
	addr, now := s.clientIP(ctx), time.Now()
	if wait := s.adminFails.locked(addr, now); wait > 0 {
		return gateway.Operator{}, &gateway.Error{Code: gateway.ERateLimited, Message: "too many refused operator tokens from this address: wait", RetryAfter: wait}
	}
	tok, ok := bytes.CutPrefix(ctx.Request.Header.Peek("Authorization"), []byte("Bearer "))
	var c account.OperatorClaims
	err := errors.New("no operator token")
	if ok && s.cfg.Operators != nil {
		err = s.cfg.Operators.Parse(string(tok), &c)
	}
	switch {
	case errors.Is(err, account.ErrExpired):
		return gateway.Operator{}, gateway.Errorf(gateway.EUnauthorized, "your operator session has expired: sign in again")
	case err != nil:
		s.adminFails.fail(addr, now)
		s.log.Warn("operator token refused", "addr", addr, "path", string(ctx.Path()), "sent", len(tok) > 0)
		return gateway.Operator{}, gateway.Errorf(gateway.EUnauthorized, "an operator token is required: sign in")
	}
	return gateway.Operator{Name: c.Subject, Role: c.Role, Token: string(tok), RequestID: requestIDOf(ctx)}, nil
}

// adminEvent authorizes an operator (adminAuth) and makes the route's
// event known, whatever its sale window (room.Operate).
func (s *Server) adminEvent(c context.Context, ctx *fasthttp.RequestCtx, p params) (int64, room.View, gateway.Operator, error) {
	op, err := s.adminAuth(ctx)
	if err != nil {
		return 0, room.View{}, op, err
	}
	ev, err := p.event()
	if err != nil {
		return 0, room.View{}, op, err
	}
	v, err := s.room.Operate(c, ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return 0, room.View{}, op, gateway.Errorf(gateway.ENotFound, "no such event")
	case err != nil:
		return 0, room.View{}, op, gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	return ev, v, op, nil
}

// adminGet answers an event's dials and stats.
func (s *Server) adminGet(ctx *fasthttp.RequestCtx, p params) error {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev, v, _, err := s.adminEvent(c, ctx, p)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, s.adminReply(ev, v))
	return nil
}

// adminPatch changes the dials a JSON object names (gateway.DialList): only
// those, so two operators changing different dials at once do not undo each
// other. The dials that shape the pre-queue draw are refused once it is
// drawn (onsale_passed); the result must pass Dials.Validate.
func (s *Server) adminPatch(ctx *fasthttp.RequestCtx, p params) error {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev, v, op, err := s.adminEvent(c, ctx, p)
	if err != nil {
		return err
	}
	if len(ctx.PostBody()) > maxPatchBody {
		return gateway.Errorf(gateway.ETooLarge, "the body is over 16 KiB")
	}
	patch, err := gateway.ParseDialPatch(ctx.PostBody())
	if err != nil {
		return gateway.Errorf(gateway.EInvalid, "malformed JSON body: %v", err)
	}
	cur, err := s.store.Dials(c, ev)
	if err != nil {
		return gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	if patch.TouchesFrozen() {
		if frozen, err := s.store.Frozen(c, ev); err != nil || frozen {
			return gateway.Errorf(gateway.EOnsalePassed, "the pre-queue is fixed: onsale_at, prequeue_at and queueing can no longer change")
		}
	}
	before := cur
	patch.Apply(&cur)
	if err := cur.Validate(); err != nil {
		return gateway.Errorf(gateway.EInvalid, "%v", err)
	}
	if rec := s.room.Record(); rec != nil && len(patch) > 0 {
		// The core's database first: Redis is a copy, and a change Redis
		// has but the record has not would be undone by Redis losing it.
		if err := rec.SaveDials(c, ev, patch, op); err != nil {
			if c := gateway.ErrorCode(err); c == gateway.EUnauthorized || c == gateway.EForbidden {
				return err
			}
			s.log.Error("dials not saved in the core; nothing changed", "event", ev, "operator", op.Name, "request_id", op.RequestID, "err", err)
			return gateway.Errorf(gateway.EUnavailable, "the core did not store the dials: nothing changed")
		}
	}
	if _, err := s.store.PatchDials(c, ev, cur, patch.Changed()); err != nil {
		return gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	s.audit(ctx, op, ev, gateway.Diff(before, cur, patch.Changed()))
	if err := s.room.Refresh(c, ev); err == nil {
		v, _ = s.room.View(ev)
	}
	writeJSON(ctx, fasthttp.StatusOK, s.adminReply(ev, v))
	return nil
}

// adminOther refuses the operators' API's other methods (to operators).
func (s *Server) adminOther(ctx *fasthttp.RequestCtx, p params) error {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, _, _, err := s.adminEvent(c, ctx, p); err != nil {
		return err
	}
	return gateway.Errorf(gateway.EMethod, "GET or PATCH")
}

// adminReply is an event's dials and the numbers an operator steers by:
// the waiting room's stats, among them the rate the line is let in at
// (effective_per_minute: the dial times the core-health factor) beside the
// dial, what bounds the line now (lineBound) and the drain time that
// follows from it, and the health: why the rate and the dial differ.
func (s *Server) adminReply(ev int64, v room.View) map[string]any {
	tk := v.Tick
	queued := max(0, tk.Queue-tk.Serving)
	bound, perMinute := lineBound(v, time.Now())
	drain := int64(-1)
	if perMinute > 0 {
		drain = int64(math.Ceil(float64(queued) / perMinute * 60))
	}
	return map[string]any{"event_id": ev, "dials": v.Dials, "stats": map[string]any{
		"queued": queued, "serving": tk.Serving, "queue_length": tk.Queue, "admitted_per_minute": tk.ClaimsPerMinute,
		"active": tk.Active, "offered_unclaimed": tk.Offers, "drain_seconds": drain, "as_of": v.Fetched,
		"effective_per_minute": math.Round(v.Rate()*10) / 10, "factor": tk.Factor,
		"bound": bound, "bound_per_minute": math.Round(perMinute*10) / 10},
		"health": s.cfg.Health.Status()}
}

// What bounds the line (adminReply's "bound").
const (
	BoundPaused    = "paused"     // nobody is let in: the line does not drain
	BoundActiveCap = "active_cap" // the room is full: fans go in as sessions end
	BoundRate      = "rate"       // the rate dial (times the health factor)
)

// lineBound says what lets the line in now and how many a minute: nothing
// while paused; while the room is full (live sessions and open offers at
// the active-users cap), the sessions' turnover: measured (View.OfferRate)
// once the room has been full for a whole RateWindow, before that a
// session's share of the minute (active × 60 / session length), and never
// more than the rate; otherwise the effective rate.
func lineBound(v room.View, now time.Time) (string, float64) {
	d, tk := v.Dials, v.Tick
	rate := v.Rate()
	switch {
	case d.Paused:
		return BoundPaused, 0
	case d.TotalActiveUsers > 0 && tk.Active+tk.Offers >= int64(d.TotalActiveUsers):
		turnover := float64(tk.Active) * 60 / float64(max(1, d.SessionSeconds))
		if !v.FullSince.IsZero() && now.Sub(v.FullSince) >= room.RateWindow {
			turnover = v.OfferRate
		}
		return BoundActiveCap, min(turnover, rate)
	}
	return BoundRate, rate
}

// audit logs one dials change: who (the operator, and the address it came
// from), which event, and each dial named with its value before and after.
// The core's audit log has the same change under the same request id.
func (s *Server) audit(ctx *fasthttp.RequestCtx, op gateway.Operator, ev int64, changes []gateway.DialChange) {
	s.log.Info("dials changed", "audit", "dials", "actor", op.Name, "role", op.Role, "request_id", op.RequestID,
		"addr", s.clientIP(ctx), "event", ev, "changes", changes)
}
