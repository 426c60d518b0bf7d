// Package health is a gateway's view of the core's health and the share of
// the rate dial it allows: the gateway's proxied calls to the core and its
// own readiness probes, judged per window (rule.go: the rule and its
// reasoning), exchanged through Redis for one factor every gateway shares
// (gateway/redis, health.lua), which the room passes to the admission
// bucket at every tick: effective rate = dial x factor.
package health

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Report is what a gateway tells the shared factor: its verdict on a
// closed window (None: only read), the rule's steps, and the factor it
// last read (Seed: what a lost key is restored to; 1 for a gateway that
// never read one, so a fresh install starts at the dial).
type Report struct {
	Window  int64 // the window judged (Redis time / Rule.Window); 0 with None
	Verdict Verdict
	Rule    Rule
	Seed    float64
}

// Shared is the factor as every gateway shares it, and its recent moves.
type Shared struct {
	Factor       float64
	Reason       string    // of the last decrease
	Now          time.Time // the Redis server's clock
	Window       int64     // the window Now is in
	LastDecrease int64     // window of the last decrease (0: none yet)
	LastIncrease int64     // window of the last increase (0: none yet)
	Decreases    int64     // counted over the key's life (tests, metrics)
	Increases    int64
}

// Exchanger is the shared factor's store (gateway/redis). Exchange counts
// the report's verdict toward its window, settles the windows that can get
// no more verdicts (decrease, increase, or nothing: see health.lua) and
// returns the factor after it. A report of a window other than the one
// just closed is only read.
type Exchanger interface {
	Exchange(ctx context.Context, r Report) (Shared, error)
}

// Status is what the operators' console and the metrics show.
type Status struct {
	Factor float64 `json:"factor"`
	// State: "ok" (the dial), "lowered" (the last move was a decrease),
	// "recovering" (the last move was an increase, below the dial),
	// "unknown" (the shared factor could not be read yet).
	State  string    `json:"state"`
	Reason string    `json:"reason"` // of the last decrease, while below the dial
	AsOf   time.Time `json:"as_of"`  // of the last exchange that worked
	// Step and WindowSeconds are the rule's increase and window: while
	// recovering the factor climbs Step every WindowSeconds at most.
	Step          float64 `json:"step"`
	WindowSeconds float64 `json:"window_seconds"`
	// Last is this gateway's own judgement of its last closed window.
	Last WindowStatus `json:"last_window"`
}

// WindowStatus is one window as this gateway saw it.
type WindowStatus struct {
	Verdict   State   `json:"verdict"`
	Reason    string  `json:"reason,omitempty"`
	Calls     int     `json:"calls"`
	Failures  int     `json:"failures"`
	Holds     int     `json:"holds"`
	HoldP90Ms int64   `json:"hold_p90_ms"`
	Probes    int     `json:"probes"`
	ProbesOK  int     `json:"probes_ok"`
	Seconds   float64 `json:"seconds"` // the window's length
}

// Monitor collects one gateway's evidence and keeps the shared factor. Its
// methods are safe for concurrent use and, on a nil *Monitor, do nothing
// (Factor is then 1: the dial).
type Monitor struct {
	rule   Rule
	shared Exchanger
	log    *slog.Logger

	exMu sync.Mutex // held through Factor: one exchange at a time

	mu     sync.Mutex
	cur    Window // the window in progress (ID 0: not yet aligned)
	sh     Shared // the last exchange's answer
	ok     bool   // sh is real
	status Status
	counts [3]int64  // windows judged: good, bad, none
	warned time.Time // of the last warning that the factor cannot be read

	perWindow bool             // exchange once a window (OncePerWindow)
	clock     func() time.Time // this gateway's clock (a test's moves with its store's)
	next      time.Time        // on clock: when the window of the last exchange ends
}

// New returns a monitor judging by rule (DefaultRule when zero) and
// sharing through ex; a nil log discards.
func New(rule Rule, ex Exchanger, log *slog.Logger) *Monitor {
	if rule == (Rule{}) {
		rule = DefaultRule()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{rule: rule, shared: ex, log: log, clock: time.Now,
		status: Status{Factor: 1, State: "unknown", Step: rule.Increase, WindowSeconds: rule.Window.Seconds()}}
}

// OncePerWindow makes Factor exchange with the shared factor only once the
// window of its last exchange (on the store's clock) is over: once a
// window, and once more with the verdict, instead of at every call (every
// tick: ten times a window at the defaults, per gateway). The calls in
// between answer the factor last read, which is the factor: it moves only
// when a window is settled, at the first exchange in a new window
// (health.lua), so every read later in the window answers the same. Call
// it before the first Factor.
func (m *Monitor) OncePerWindow() *Monitor {
	m.perWindow = true
	return m
}

// Rule is the monitor's rule.
func (m *Monitor) Rule() Rule { return m.rule }

// Observe records one call to the core (k KindNone is ignored). It takes a
// lock for a few additions: proxied calls are hundreds a second, not more.
func (m *Monitor) Observe(k Kind, o Outcome, took time.Duration) {
	if m == nil || k == KindNone {
		return
	}
	m.mu.Lock()
	m.cur.add(k, o, took)
	m.mu.Unlock()
}

// Factor is called once per tick: it reads the shared factor (with
// OncePerWindow, only once the last read's window is over) and, when
// the answer shows that a window closed since the last call, judges it
// and sends the verdict at once, in a second exchange (health.lua counts
// a verdict only while its window is the one just closed), then returns
// the factor, the share of the dial to admit at. When the exchange fails
// (Redis) the last factor read is kept; before any was read, the rule's
// Floor: a gateway that does not know the fleet's factor must not let the
// line in faster than the others may be doing. Calls are serialised, so a
// verdict is sent once.
func (m *Monitor) Factor(ctx context.Context) float64 {
	if m == nil {
		return 1
	}
	m.exMu.Lock()
	defer m.exMu.Unlock()
	m.mu.Lock()
	seed := m.status.Factor
	if m.perWindow && m.ok && m.clock().Before(m.next) {
		f := m.sh.Factor // the window of the last exchange is not over: its factor holds
		m.mu.Unlock()
		return f
	}
	m.mu.Unlock()
	sent := m.clock()
	sh, err := m.shared.Exchange(ctx, Report{Verdict: Verdict{State: None}, Rule: m.rule, Seed: seed})
	if err != nil {
		return m.failed(ctx, err)
	}
	if rep := m.advance(sh); rep != nil {
		rep.Seed = seed
		// Sent once: a failed exchange may still have run (a timeout after
		// Redis applied it), and sending it again could count this
		// gateway's verdict twice. Lost, it costs one gateway's vote on one
		// window.
		again := m.clock()
		if sh2, err := m.shared.Exchange(ctx, *rep); err == nil {
			sh, sent = sh2, again
		} else {
			m.failed(ctx, err)
		}
	}
	return m.apply(ctx, sh, sent)
}

// failed keeps the last factor read when the exchange failed (the floor
// before any was read) and says so, at most once every warnEvery.
func (m *Monitor) failed(ctx context.Context, err error) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.status.Factor
	if !m.ok {
		f = m.rule.Floor
	}
	// Every tick fails while the key is unreachable: one line per
	// warnEvery is enough to say so.
	if now := time.Now(); ctx.Err() == nil && now.Sub(m.warned) >= warnEvery {
		m.warned = now
		m.log.Warn("core health: the shared factor cannot be read; keeping the last", "factor", f, "err", err)
	}
	return f
}

// warnEvery spaces the warnings of an unreachable shared factor.
const warnEvery = 10 * time.Second

// advance moves the monitor to the window sh is in. When a window closed
// since the last exchange it is judged and, unless it had no evidence,
// its report is returned to send.
func (m *Monitor) advance(sh Shared) *Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.cur.ID == 0:
		m.cur.ID = sh.Window // the first window is counted from now
	case sh.Window > m.cur.ID:
		// The window closed (on the Redis clock, the same for every
		// gateway): judge it. The evidence is reported under the window it
		// started in: a gateway that missed windows (stalled) holds
		// evidence of several, and reporting it as the window just closed
		// would pass old news for new; health.lua only reads a report of
		// an older window.
		closed := m.cur
		v := m.rule.Judge(&closed)
		m.counts[countIndex(v.State)]++
		m.status.Last = windowStatus(&closed, v, time.Duration(sh.Window-m.cur.ID)*m.rule.Window)
		m.cur = Window{ID: sh.Window}
		if v.State != None {
			return &Report{Window: closed.ID, Verdict: v, Rule: m.rule}
		}
	}
	return nil
}

// apply takes sh as the shared factor and logs its turns.
func (m *Monitor) apply(ctx context.Context, sh Shared, sent time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sh, m.ok = sh, true
	// The end of sh's window on this gateway's clock, counted from when
	// the exchange was sent (the store read its clock after that): at or
	// a moment before the end, never after it however slow the answer, so
	// the next exchange is never a window late (one a moment early is
	// still in the window, and the one after it on time).
	end := (sh.Window + 1) * m.rule.Window.Milliseconds()
	m.next = sent.Add(time.Duration(end-sh.Now.UnixMilli()) * time.Millisecond)
	was := m.status.State
	m.status.Factor, m.status.AsOf = sh.Factor, sh.Now
	m.status.State, m.status.Reason = state(sh), ""
	if m.status.State != "ok" {
		m.status.Reason = sh.Reason
	}
	if was != m.status.State {
		// Every gateway logs the shared factor's turns (not each move); a
		// cut in admission is an operator's concern (warn).
		lvl := slog.LevelInfo
		if m.status.State == "lowered" {
			lvl = slog.LevelWarn
		}
		m.log.Log(ctx, lvl, "core health: admission "+m.status.State, "factor", sh.Factor, "reason", m.status.Reason,
			"this_gateway_last_window", m.status.Last)
	}
	return sh.Factor
}

func state(sh Shared) string {
	switch {
	case sh.Factor >= 1:
		return "ok"
	case sh.LastIncrease > sh.LastDecrease:
		return "recovering"
	}
	return "lowered"
}

func countIndex(s State) int {
	switch s {
	case Good:
		return 0
	case Bad:
		return 1
	}
	return 2
}

func windowStatus(w *Window, v Verdict, length time.Duration) WindowStatus {
	ws := WindowStatus{Verdict: v.State, Reason: v.Reason, Holds: w.HoldsN, HoldP90Ms: w.HoldP90().Milliseconds(),
		Seconds: length.Seconds(), ProbesOK: w.Probes[OK]}
	for o := range nOutcomes {
		ws.Calls += w.Calls[o]
		ws.Probes += w.Probes[o]
		if o != OK {
			ws.Failures += w.Calls[o]
		}
	}
	return ws
}

// Status is the monitor's current picture (nil: the feedback is off).
func (m *Monitor) Status() Status {
	if m == nil {
		return Status{Factor: 1, State: "off"}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// Windows counts the windows this gateway judged good, bad and with no
// evidence.
func (m *Monitor) Windows() (good, bad, none int64) {
	if m == nil {
		return 0, 0, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[0], m.counts[1], m.counts[2]
}

// Probe asks the core whether it is ready; the gateway's core client
// implements it (GET /readyz) and answers its outcome.
type Probe func(ctx context.Context) Outcome

// RunProbe probes the core every ProbeEvery until ctx ends, each probe
// with a window's deadline (no answer within it is Unreachable: a core
// that takes a second to say it is ready is not), so that every window
// has evidence even when no fan is holding.
func (m *Monitor) RunProbe(ctx context.Context, probe Probe) {
	if m == nil {
		return
	}
	t := time.NewTicker(m.rule.probeEvery())
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, m.rule.Window)
		start := time.Now()
		o := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.Observe(KindProbe, o, time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
