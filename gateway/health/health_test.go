package health

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// window builds a window's evidence: n calls of kind k with outcome o,
// each took long.
type obs struct {
	k    Kind
	o    Outcome
	n    int
	took time.Duration
}

func window(list ...obs) *Window {
	w := &Window{}
	for _, b := range list {
		for range b.n {
			w.add(b.k, b.o, b.took)
		}
	}
	return w
}

// The thresholds, each with the case just under it: a window is bad only
// on the rule's evidence, and says why as an operator reads it.
func TestJudge(t *testing.T) {
	r := DefaultRule()
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		w      *Window
		want   State
		reason string
	}{
		{"no evidence", window(), None, ""},
		{"a probe answered", window(obs{KindProbe, OK, 1, ms}), Good, ""},
		{"the probe refused, nothing else", window(obs{KindProbe, Unreachable, 2, ms}), Bad, "core unreachable"},
		{"the probe says 503, nothing else", window(obs{KindProbe, Unavailable, 1, ms}), Bad, "core 503s 100%"},
		{"one failed call, no success", window(obs{KindBooking, Failed, 1, ms}), Bad, "core 5xx 100%"},
		{"503s 12%", window(obs{KindHold, OK, 22, ms}, obs{KindHold, Unavailable, 3, ms}), Bad, "core 503s 12%"},
		{"503s under 10%", window(obs{KindHold, OK, 30, ms}, obs{KindHold, Unavailable, 3, ms}), Good, ""},
		{"a failure in too few calls to judge a share: no verdict", window(obs{KindHold, OK, 3, ms}, obs{KindHold, Unavailable, 1, ms}), None, ""},
		{"a failure in many calls, under the share", window(obs{KindHold, OK, 19, ms}, obs{KindHold, Unavailable, 1, ms}), Good, ""},
		{"mostly timeouts", window(obs{KindHold, OK, 2, ms}, obs{KindHold, Unreachable, 5, ms}, obs{KindProbe, Unavailable, 1, ms}), Bad, "core not answering 75%"},
		{"hold p90 1.8 s", window(obs{KindHold, OK, 8, 50 * ms}, obs{KindHold, OK, 2, 1800 * ms}), Bad, "core hold p90 1.8 s"},
		{"one slow hold in ten: p90 fast", window(obs{KindHold, OK, 9, 50 * ms}, obs{KindHold, OK, 1, 1800 * ms}), Good, ""},
		{"slow holds, too few to judge: no verdict", window(obs{KindHold, OK, 4, 3 * time.Second}, obs{KindProbe, OK, 2, ms}), None, ""},
		{"slow payments do not count", window(obs{KindBooking, OK, 20, 5 * time.Second}), Good, ""},
		{"slow holds, hold at 850 ms", window(obs{KindHold, OK, 10, 850 * ms}), Good, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := r.Judge(tc.w)
			if v.State != tc.want || v.Reason != tc.reason {
				t.Fatalf("Judge = %+v; want %s %q", v, tc.want, tc.reason)
			}
		})
	}
	lower := r
	lower.HoldP90 = 800 * time.Millisecond
	if v := lower.Judge(window(obs{KindHold, OK, 10, 850 * ms})); v.State != Bad || v.Reason != "core hold p90 850 ms" {
		t.Fatalf("Judge with an 800 ms threshold = %+v; want bad, core hold p90 850 ms", v)
	}
}

func TestKindAndOutcome(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Kind
	}{
		{"POST", "/v1/events/7/holds", KindHold},
		{"POST", "/v1/events/7/holds/", KindHold},
		{"GET", "/v1/events/7/holds", KindNone},
		{"GET", "/v1/events/7", KindNone},
		{"POST", "/v1/holds/abc/payment", KindBooking},
		{"POST", "/v1/holds/abc/confirm", KindBooking},
		{"DELETE", "/v1/holds/abc", KindBooking},
		{"GET", "/v1/bookings/abc", KindBooking},
		{"POST", "/v1/auth/code", KindNone},
		{"GET", "/v1/me", KindNone},
	} {
		if got := KindOf([]byte(tc.method), []byte(tc.path)); got != tc.want {
			t.Errorf("KindOf(%s %s) = %d; want %d", tc.method, tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct {
		status         int
		body           string
		answered, busy bool
		want           Outcome
	}{
		{201, `{}`, true, false, OK},
		{409, `{"error":"seats_taken"}`, true, false, OK},
		{429, `{}`, true, false, OK},
		{503, `{"error":"unavailable"}`, true, false, Unavailable},
		{500, `{}`, true, false, Failed},
		{502, `{"error":"provider_unavailable","message":"x"}`, true, false, OK},
		{502, `<html>bad gateway</html>`, true, false, Failed},
		{504, ``, true, false, Failed},
		{0, ``, false, false, Unreachable},
		{0, ``, false, true, Unavailable},
	} {
		if got := OutcomeOf(tc.status, []byte(tc.body), tc.answered, tc.busy); got != tc.want {
			t.Errorf("OutcomeOf(%d %s answered=%v busy=%v) = %d; want %d", tc.status, tc.body, tc.answered, tc.busy, got, tc.want)
		}
	}
}

// clockShare is an Exchanger whose Redis clock the test moves: it records
// the reports, counts those health.lua counts (a verdict on the window just
// closed) and applies a counted bad one at once (once per window; the
// script's settling a window later is the Redis tests' concern).
type clockShare struct {
	mu      sync.Mutex
	now     time.Time
	reports []Report
	counted int
	factor  float64
	lastDec int64
	reason  string
	fail    bool
	calls   int // exchanges, verdicts or not
}

func (c *clockShare) Exchange(_ context.Context, r Report) (Shared, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.fail {
		return Shared{}, errors.New("redis down")
	}
	w := c.now.UnixMilli() / r.Rule.Window.Milliseconds()
	if r.Verdict.State != None {
		c.reports = append(c.reports, r)
		if r.Window != w-1 {
			return Shared{Factor: c.factor, Now: c.now, Window: w, LastDecrease: c.lastDec, Reason: c.reason}, nil
		}
		c.counted++
		if r.Verdict.State == Bad && r.Window > c.lastDec {
			c.factor, c.lastDec, c.reason = math.Max(r.Rule.Floor, c.factor*r.Rule.Decrease), r.Window, r.Verdict.Reason
		}
	}
	return Shared{Factor: c.factor, Now: c.now, Window: w, LastDecrease: c.lastDec, Reason: c.reason}, nil
}

func (c *clockShare) advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func (c *clockShare) clock() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// With OncePerWindow a monitor called every tick exchanges once a window
// and once more with its verdict, and judges, reports and follows the
// factor as one that exchanges at every tick; the control, at every tick,
// exchanges ten times a window.
func TestMonitorOncePerWindow(t *testing.T) {
	run := func(once bool) (*clockShare, *Monitor) {
		ctx := context.Background()
		sh := &clockShare{now: time.UnixMilli(1_000_000_000_050), factor: 1}
		m := New(Rule{}, sh, nil)
		if once {
			m.OncePerWindow()
		}
		m.clock = sh.clock // the store's clock and this gateway's agree
		m.Factor(ctx)
		for w := range 5 {
			o := OK
			if w == 2 {
				o = Unreachable
			}
			m.Observe(KindProbe, o, time.Millisecond)
			for range 10 {
				sh.advance(100 * time.Millisecond)
				m.Factor(ctx)
			}
		}
		return sh, m
	}
	ctl, ctlM := run(false)
	sh, m := run(true)
	if ctl.calls < 50 {
		t.Fatalf("control: %d exchanges in 50 ticks; want one a tick at least", ctl.calls)
	}
	if sh.calls > 2*6 {
		t.Fatalf("%d exchanges in 5 windows; want at most two a window", sh.calls)
	}
	if len(sh.reports) != len(ctl.reports) || sh.counted != ctl.counted || m.Status().Factor != ctlM.Status().Factor {
		t.Fatalf("once a window: %d reports, %d counted, factor %v; every tick: %d, %d, %v; want the same",
			len(sh.reports), sh.counted, m.Status().Factor, len(ctl.reports), ctl.counted, ctlM.Status().Factor)
	}
	if f := m.Status().Factor; f != 0.5 {
		t.Fatalf("factor after a bad window = %v; want 0.5", f)
	}
}

// A monitor judges each window of the Redis clock once, sends the verdict
// as soon as it sees the window close, says nothing about a window without evidence,
// and keeps its last factor while Redis is unreachable.
func TestMonitorWindows(t *testing.T) {
	ctx := context.Background()
	sh := &clockShare{now: time.UnixMilli(1_000_000_000_000), factor: 1}
	m := New(Rule{}, sh, nil)
	if f := m.Factor(ctx); f != 1 {
		t.Fatalf("first factor = %v; want 1", f)
	}
	tick := func() float64 { sh.advance(100 * time.Millisecond); return m.Factor(ctx) }
	// Window 1: healthy probes.
	m.Observe(KindProbe, OK, time.Millisecond)
	for range 10 {
		tick()
	}
	// Window 2: every probe refused.
	m.Observe(KindProbe, Unreachable, time.Millisecond)
	m.Observe(KindNone, Unreachable, time.Millisecond) // not evidence
	for range 10 {
		tick()
	}
	// Window 3: no evidence at all.
	for range 10 {
		tick()
	}
	if len(sh.reports) != 2 || sh.reports[0].Verdict.State != Good || sh.reports[1].Verdict != (Verdict{Bad, "core unreachable"}) {
		t.Fatalf("reports = %+v; want good, then bad (core unreachable), and nothing for the empty window", sh.reports)
	}
	if sh.reports[1].Window != sh.reports[0].Window+1 {
		t.Fatalf("windows reported %d then %d; want consecutive", sh.reports[0].Window, sh.reports[1].Window)
	}
	st := m.Status()
	if st.Factor != 0.5 || st.State != "lowered" || st.Reason != "core unreachable" {
		t.Fatalf("status = %+v; want factor 0.5, lowered, core unreachable", st)
	}
	if good, bad, none := m.Windows(); good != 1 || bad != 1 || none < 1 {
		t.Fatalf("windows = %d good, %d bad, %d none; want 1, 1, 1 or more", good, bad, none)
	}
	sh.mu.Lock()
	sh.fail = true
	sh.mu.Unlock()
	if f := tick(); f != 0.5 {
		t.Fatalf("factor with Redis down = %v; want the last one read, 0.5", f)
	}
	var nilMonitor *Monitor
	nilMonitor.Observe(KindHold, OK, 0)
	if f := nilMonitor.Factor(ctx); f != 1 || nilMonitor.Status().State != "off" {
		t.Fatalf("a nil monitor's factor = %v, %+v; want 1, off", f, nilMonitor.Status())
	}
}

// Verdicts reach the shared factor while their window is the one just
// closed even when the monitor's calls come more than a window apart (a
// slow tick loop): they once went with the next call, a window too late,
// and all but a few were dropped with the core down. A monitor that stalls
// for windows reports its evidence under the window it started in, not as
// the window just closed.
func TestMonitorSlowCalls(t *testing.T) {
	ctx := context.Background()
	sh := &clockShare{now: time.UnixMilli(1_000_000_000_000), factor: 1}
	m := New(Rule{}, sh, nil)
	m.Factor(ctx)
	const calls = 20
	for range calls {
		m.Observe(KindProbe, Unreachable, time.Millisecond)
		sh.advance(1100 * time.Millisecond)
		m.Factor(ctx)
	}
	// Every eleventh call skips a window (1.1 s apart): that evidence
	// spans two windows and is reported under the older, too late.
	if len(sh.reports) != calls || sh.counted < calls*8/10 {
		t.Fatalf("%d verdicts sent, %d counted, of %d windows with evidence; want all sent, most counted", len(sh.reports), sh.counted, calls)
	}
	if st := m.Status(); st.Factor != 0.1 {
		t.Fatalf("factor after %d bad windows = %v; want the floor", calls, st.Factor)
	}

	start, counted := m.cur.ID, sh.counted
	m.Observe(KindProbe, OK, time.Millisecond)
	sh.advance(3 * time.Second) // stalled for three windows
	m.Factor(ctx)
	last := sh.reports[len(sh.reports)-1]
	if last.Window != start || last.Verdict.State != Good {
		t.Fatalf("after a stall the report is %+v; want good, under window %d (where its evidence started)", last, start)
	}
	if sh.counted != counted {
		t.Fatalf("a stalled gateway's old evidence was counted as the window just closed")
	}
}

// Before the first read of the shared factor works, a gateway admits at
// the floor, not at the dial: it does not know what the fleet is at. The
// warning that the factor cannot be read is logged once, not every tick.
func TestMonitorUnreadFactor(t *testing.T) {
	var logged countHandler
	sh := &clockShare{now: time.UnixMilli(1_000_000_000_000), factor: 0.1, fail: true}
	m := New(Rule{}, sh, slog.New(&logged))
	for range 50 {
		if f := m.Factor(context.Background()); f != DefaultRule().Floor {
			t.Fatalf("factor before any read = %v; want the floor %v", f, DefaultRule().Floor)
		}
	}
	if n := logged.n.Load(); n != 1 {
		t.Fatalf("%d warnings over 50 failed exchanges; want 1", n)
	}
}

// countHandler counts the records logged.
type countHandler struct{ n atomic.Int64 }

func (h *countHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countHandler) WithGroup(string) slog.Handler             { return h }

func TestRuleValidate(t *testing.T) {
	if err := DefaultRule().Validate(); err != nil {
		t.Fatalf("DefaultRule().Validate() = %v", err)
	}
	for name, edit := range map[string]func(*Rule){
		"decrease 1":  func(r *Rule) { r.Decrease = 1 },
		"increase 0":  func(r *Rule) { r.Increase = 0 },
		"floor 1":     func(r *Rule) { r.Floor = 1 },
		"share 0":     func(r *Rule) { r.FailShare = 0 },
		"window 1 ms": func(r *Rule) { r.Window = time.Millisecond },
	} {
		r := DefaultRule()
		edit(&r)
		if r.Validate() == nil {
			t.Errorf("Validate(%s) = nil; want an error", name)
		}
	}
}
