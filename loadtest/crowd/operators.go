package crowd

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsale/onsale/loadtest/check"
)

// Operators are the sale's operators: they set the dials and watch their
// screens (the gateway's admin stats and the event's seat counts) once a
// second. They have their own connections: a crowd queued on the fans' pool
// must not delay the samples the checker relies on.
type Operators struct {
	gateway string
	event   int64
	st      *Stats
	cl      *Client
	auth    []string
}

// NewOperators are the operators of event at gateway, the base URL of a
// gateway's operators' listener (ONSALE_ADMIN_ADDR: the admin API is
// served there only; it serves the public reads too), with an operator's
// session token; their requests count in st.
func NewOperators(gateway, operatorToken string, event int64, st *Stats) *Operators {
	return &Operators{gateway: gateway, event: event, st: st, cl: NewClient(NewPool(gateway, 8), 10*time.Second, st, false),
		auth: []string{"Authorization", "Bearer " + operatorToken}}
}

func (o *Operators) admin() string { return fmt.Sprintf("%s/admin/v1/events/%d", o.gateway, o.event) }

// Dials are the waiting room's dials the operators set before the sale.
type Dials struct {
	Onsale    time.Time     // onsale_at (the pre-queue opens at once)
	PerMinute int           // new_users_per_minute
	MaxActive int           // total_active_users
	Session   time.Duration // session_seconds
	Claim     time.Duration // claim_seconds
	// AccountRequired sets account_required (joining needs a signed-in
	// account with a verified phone) when not nil; nil leaves the event's
	// default (on for seated events of 5,000 seats or more).
	AccountRequired *bool
}

// SetDials opens the pre-queue now and sets the dials; an error when the
// gateway refuses them.
func (o *Operators) SetDials(ctx context.Context, d Dials) error {
	o.cl.Do(ctx, "admin", "GET", o.admin(), nil, o.auth...) // the room learns the event
	dials := map[string]any{
		"prequeue_at": time.Now().Add(-time.Second), "onsale_at": d.Onsale, "new_users_per_minute": d.PerMinute,
		"total_active_users": d.MaxActive, "session_seconds": d.Session.Seconds(), "claim_seconds": d.Claim.Seconds()}
	if d.AccountRequired != nil {
		dials["account_required"] = *d.AccountRequired
	}
	r := o.cl.Do(ctx, "admin", "PATCH", o.admin(), dials, o.auth...)
	if r.Status != 200 {
		return fmt.Errorf("setting the dials: %d %v", r.Status, r.Body)
	}
	// The gateway that took the PATCH has the dials now; every other
	// gateway (several behind a load balancer) reads them at its next tick
	// (ONSALE_TICK, at most a second). Until then one of them would still
	// let a guest join an event that now requires an account.
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return nil
}

// Postpone moves the event's pre-queue and onsale to at (the line opens a
// minute before), so that nothing opens while the crowd gets ready (signs
// in ahead); SetDials then sets the sale's times. An error when the gateway
// refuses (the pre-queue was already drawn).
func (o *Operators) Postpone(ctx context.Context, at time.Time) error {
	o.cl.Do(ctx, "admin", "GET", o.admin(), nil, o.auth...) // the room learns the event
	r := o.cl.Do(ctx, "admin", "PATCH", o.admin(), map[string]any{"prequeue_at": at.Add(-time.Minute), "onsale_at": at}, o.auth...)
	if r.Status != 200 {
		return fmt.Errorf("postponing the sale: %d %v", r.Status, r.Body)
	}
	return nil
}

// AccountRequired reads the event's account_required dial as the gateway
// has it (false when it cannot).
func (o *Operators) AccountRequired(ctx context.Context) bool {
	r := o.cl.Do(ctx, "admin", "GET", o.admin(), nil, o.auth...)
	d, _ := r.Body["dials"].(map[string]any)
	on, _ := d["account_required"].(bool)
	return on
}

// Event is what the sale needs to know of the event.
type Event struct {
	Capacity    int `json:"capacity"`
	HoldSeconds int `json:"hold_seconds"`
	Bands       []struct {
		Code string `json:"code"`
	} `json:"price_bands"`
}

// Hold is how long a hold lasts.
func (e Event) Hold() time.Duration { return time.Duration(e.HoldSeconds) * time.Second }

// BandCodes are the event's price bands.
func (e Event) BandCodes() []string {
	out := make([]string, len(e.Bands))
	for i, b := range e.Bands {
		out[i] = b.Code
	}
	return out
}

// Event reads the event as the public API shows it (zero if it cannot).
func (o *Operators) Event(ctx context.Context) Event {
	var ev Event
	b, _ := json.Marshal(o.cl.Do(ctx, "event", "GET", fmt.Sprintf("%s/v1/events/%d", o.gateway, o.event), nil).Body)
	json.Unmarshal(b, &ev)
	return ev
}

// Point is one second of the sale as the operators' screens showed it, T
// seconds after onsale.
type Point struct {
	T                                                                            float64
	Queued, Admitted, Dial, Active, Cap, Held, Sold, Available, Holds, Confirmed int64
	Serving                                                                      int64
	Effective                                                                    float64 // the rate the gateway lets fans in at (-1: not reported)
}

// Screens is what the operators saw during the sale: the series for the
// report, the samples for the checker, and when every seat was first taken
// and when the sale sold out (durations after onsale; 0 if never).
type Screens struct {
	mu                sync.Mutex
	series            []Point
	samples           []check.Sample
	allTaken, soldOut atomic.Int64
}

// Series is the report's readings so far.
func (s *Screens) Series() []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Point(nil), s.series...)
}

// Samples are the checker's readings so far.
func (s *Screens) Samples() []check.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]check.Sample(nil), s.samples...)
}

// AllTaken is when every seat was first held or sold, after onsale (0 if never).
func (s *Screens) AllTaken() time.Duration { return time.Duration(s.allTaken.Load()) }

// SoldOut is when every seat was sold, after onsale (0 if never).
func (s *Screens) SoldOut() time.Duration { return time.Duration(s.soldOut.Load()) }

// Reading is one second's reading, for progress: Tick counts the seconds
// since watching began (readings that failed included); SoldOutNow is set
// on the reading that found the sale sold out (the operators told the line).
type Reading struct {
	Tick       int
	Point      Point
	SoldOutNow bool
}

// Watch reads the screens once a second until ctx ends, recording into s
// and calling each with every good reading. The first reading with every
// seat sold and none held (none that could come back) ends the sale: the
// operators tell the line it is sold out, and the crowd goes home.
func (o *Operators) Watch(ctx context.Context, onsale time.Time, s *Screens, each func(Reading)) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, sample, ok := o.read(ctx, onsale)
		if !ok {
			continue
		}
		s.mu.Lock()
		s.series = append(s.series, p)
		s.samples = append(s.samples, sample)
		s.mu.Unlock()
		since := int64(time.Since(onsale))
		if p.Available == 0 {
			s.allTaken.CompareAndSwap(0, since)
		}
		r := Reading{Tick: i, Point: p}
		if p.Available == 0 && p.Held == 0 && s.soldOut.CompareAndSwap(0, since) {
			o.cl.Do(ctx, "admin", "PATCH", o.admin(), map[string]any{"sold_out": true}, o.auth...)
			r.SoldOutNow = true
		}
		each(r)
	}
}

// read is one reading of the screens: the admin stats and dials, and the
// event's seat counts; ok is false when either did not answer.
func (o *Operators) read(ctx context.Context, onsale time.Time) (Point, check.Sample, bool) {
	asOf := time.Now() // the reading is at least this recent
	a := o.cl.Do(ctx, "admin", "GET", o.admin(), nil, o.auth...)
	cs := o.cl.Do(ctx, "stats", "GET", fmt.Sprintf("%s/v1/events/%d/stats", o.gateway, o.event), nil)
	if a.Status != 200 || cs.Status != 200 {
		return Point{}, check.Sample{}, false
	}
	s := a.Body["stats"].(map[string]any)
	d := a.Body["dials"].(map[string]any)
	// The gateway says when it read these (its view of the room, a tick at
	// most ~100 ms old); failing that, the reading is at least as recent
	// as the request.
	if t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["as_of"])); err == nil {
		asOf = t
	}
	num := func(m map[string]any, k string) int64 { return int64(number(m[k])) }
	p := Point{T: time.Since(onsale).Seconds(), Queued: num(s, "queued"), Admitted: num(s, "admitted_per_minute"),
		Dial: num(d, "new_users_per_minute"), Active: num(s, "active"), Cap: num(d, "total_active_users"), Serving: num(s, "serving"),
		Held: num(cs.Body, "held"), Sold: num(cs.Body, "sold"), Available: num(cs.Body, "available"),
		Holds: o.st.Held.Load(), Confirmed: o.st.Confirmed.Load()}
	sample := check.Sample{At: asOf, Active: num(s, "active"), Offers: num(s, "offered_unclaimed"),
		AdmittedPerMinute: num(s, "admitted_per_minute"), Queued: num(s, "queued"),
		Dial: num(d, "new_users_per_minute"), Cap: num(d, "total_active_users"), Serving: num(s, "serving")}
	// The effective rate (the dial times the core's health factor) and why
	// it is below the dial, where the gateway reports them.
	p.Effective, sample.Effective = -1, -1
	if e, ok := s["effective_per_minute"].(float64); ok {
		p.Effective, sample.Effective = e, e
	}
	if h, ok := a.Body["health"].(map[string]any); ok {
		sample.Health = fmt.Sprint(h["state"])
		if r, _ := h["reason"].(string); r != "" {
			sample.Health += ": " + r
		}
	}
	return p, sample, true
}
