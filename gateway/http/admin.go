package http

import (
	"context"
	"crypto/subtle"
	"errors"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
)

// maxPatchBody bounds a dials PATCH.
const maxPatchBody = 16 << 10

// adminEvent authorizes an operator (the admin token, compared in constant
// time; none configured: nobody) and makes the route's event known.
func (s *Server) adminEvent(c context.Context, ctx *fasthttp.RequestCtx, p params) (int64, room.View, error) {
	auth := string(ctx.Request.Header.Peek("Authorization"))
	if s.cfg.AdminToken == "" || subtle.ConstantTimeCompare([]byte(auth), []byte("Bearer "+s.cfg.AdminToken)) != 1 {
		return 0, room.View{}, gateway.Errorf(gateway.EUnauthorized, "an admin token is required")
	}
	ev, err := p.event()
	if err != nil {
		return 0, room.View{}, err
	}
	v, err := s.room.Ensure(c, ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return 0, room.View{}, gateway.Errorf(gateway.ENotFound, "no such event")
	case err != nil:
		return 0, room.View{}, gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	return ev, v, nil
}

// adminGet answers an event's dials and stats.
func (s *Server) adminGet(ctx *fasthttp.RequestCtx, p params) error {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ev, v, err := s.adminEvent(c, ctx, p)
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
	ev, v, err := s.adminEvent(c, ctx, p)
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
	patch.Apply(&cur)
	if err := cur.Validate(); err != nil {
		return gateway.Errorf(gateway.EInvalid, "%v", err)
	}
	if _, err := s.store.PatchDials(c, ev, cur, patch.Changed()); err != nil {
		return gateway.Errorf(gateway.EUnavailable, "redis is not answering")
	}
	s.log.Info("dials changed", "event", ev, "by", s.clientIP(ctx))
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
	if _, _, err := s.adminEvent(c, ctx, p); err != nil {
		return err
	}
	return gateway.Errorf(gateway.EMethod, "GET or PATCH")
}

// adminReply is an event's dials and the numbers an operator steers by:
// the waiting room's stats, among them the rate the line is let in at
// (effective_per_minute: the dial times the core-health factor) beside the
// dial, and the health: why the two differ.
func (s *Server) adminReply(ev int64, v room.View) map[string]any {
	tk := v.Tick
	queued := max(0, tk.Queue-tk.Serving)
	rate := float64(tk.ClaimsPerMinute)
	drain := int64(-1)
	if rate > 0 {
		drain = int64(math.Ceil(float64(queued) / rate * 60))
	}
	return map[string]any{"event_id": ev, "dials": v.Dials, "stats": map[string]any{
		"queued": queued, "serving": tk.Serving, "queue_length": tk.Queue, "admitted_per_minute": tk.ClaimsPerMinute,
		"active": tk.Active, "offered_unclaimed": tk.Offers, "drain_seconds": drain, "as_of": v.Fetched,
		"effective_per_minute": math.Round(v.Rate()*10) / 10, "factor": tk.Factor},
		"health": s.cfg.Health.Status()}
}
