package redis_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/health"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// healthKey is a shared factor no other test uses, deleted at cleanup.
func healthKey(t *testing.T, s *redis.Store) *redis.Health {
	t.Helper()
	key := fmt.Sprintf("onsale:health:test-%d", rand.Int64())
	t.Cleanup(func() { s.Client().Del(ctx, key) })
	return s.Health(key)
}

func report(t *testing.T, h *redis.Health, rule health.Rule, state health.State, window int64, seed float64) health.Shared {
	t.Helper()
	sh, err := h.Exchange(ctx, health.Report{Window: window, Verdict: health.Verdict{State: state, Reason: "test " + string(state)},
		Rule: rule, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// closedWindow waits (on the Redis clock) for a new window to start and
// returns the one just closed: the window whose verdicts count now.
func closedWindow(t *testing.T, h *redis.Health, rule health.Rule) int64 {
	t.Helper()
	w := report(t, h, rule, health.None, 0, 1).Window
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(rule.Window / 20) {
		if sh := report(t, h, rule, health.None, 0, 1); sh.Window > w {
			return sh.Window - 1
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Redis clock did not leave window %d", w)
		}
	}
}

// settled waits until window k can get no more verdicts and returns the
// factor after the read that settles it.
func settled(t *testing.T, h *redis.Health, rule health.Rule, k int64) health.Shared {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(rule.Window / 20) {
		if sh := report(t, h, rule, health.None, 0, 1); sh.Window >= k+2 {
			return sh
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Redis clock did not pass window %d", k+1)
		}
	}
}

// verdicts reports each verdict on the window just closed, concurrently
// (one gateway each), and answers the window and whether every report
// landed while it was the one just closed (a loaded machine may straddle
// a boundary: the caller then tries again on a fresh key).
func verdicts(t *testing.T, h *redis.Health, rule health.Rule, states ...health.State) (int64, bool) {
	t.Helper()
	k := closedWindow(t, h, rule)
	var wg sync.WaitGroup
	var late atomic.Bool
	for _, st := range states {
		wg.Go(func() {
			if sh := report(t, h, rule, st, k, 1); sh.Window != k+1 {
				late.Store(true)
			}
		})
	}
	wg.Wait()
	return k, !late.Load()
}

// Three gateways that saw the same bad window decrease the shared factor
// once, not three times; the control, the same script with a key per
// gateway, decreases three times.
func TestHealthOneDecreasePerWindow(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		rule.Window = 500 * time.Millisecond
		for attempt := 0; ; attempt++ {
			h := healthKey(t, s)
			k, ok := verdicts(t, h, rule, health.Bad, health.Bad, health.Bad)
			if !ok && attempt < 5 {
				continue
			}
			if sh := report(t, h, rule, health.None, 0, 1); sh.Factor != 1 || sh.Decreases != 0 {
				t.Fatalf("window %d still collecting verdicts: %+v; want the factor unmoved until it is settled", k, sh)
			}
			sh := settled(t, h, rule, k)
			if sh.Factor != 0.5 || sh.Decreases != 1 || sh.LastDecrease != k || sh.Reason != "test bad" {
				t.Fatalf("after three bad reports of window %d: %+v; want factor 0.5, one decrease", k, sh)
			}
			// A late report (a window long gone) is only read.
			if sh := report(t, h, rule, health.Bad, k, 1); sh.Factor != 0.5 || sh.Decreases != 1 {
				t.Fatalf("stale bad report: %+v; want nothing changed", sh)
			}
			if sh := settled(t, h, rule, sh.Window); sh.Decreases != 1 {
				t.Fatalf("stale bad report settled: %+v; want nothing changed", sh)
			}
			break
		}

		// The control: the same script, each gateway with its own key.
		for attempt := 0; ; attempt++ {
			var keys [3]*redis.Health
			for i := range keys {
				keys[i] = healthKey(t, s)
			}
			k := closedWindow(t, keys[0], rule)
			late := false
			for _, h := range keys {
				late = late || report(t, h, rule, health.Bad, k, 1).Window != k+1
			}
			if late && attempt < 5 {
				continue
			}
			var decs int64
			for _, h := range keys {
				decs += settled(t, h, rule, k).Decreases
			}
			if decs != 3 {
				t.Fatalf("control: a key per gateway decreased %d times for one bad window; want 3 (the harness must see the triple cut)", decs)
			}
			break
		}
	})
}

// A window is settled by a majority of the gateways that judged it: one
// gateway calling a window bad while two call it good does not decrease
// the factor (the others' increase stands); a tie is bad. The control,
// the same lone bad verdict with nobody else reporting, decreases.
func TestHealthMajorityPerWindow(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		rule.Window = 500 * time.Millisecond
		for _, tc := range []struct {
			name   string
			states []health.State
			want   float64
		}{
			{"one bad of three", []health.State{health.Bad, health.Good, health.Good}, 0.55},
			{"a tie", []health.State{health.Bad, health.Good}, 0.25},
			{"control: one bad alone", []health.State{health.Bad}, 0.25},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for attempt := 0; ; attempt++ {
					h := healthKey(t, s)
					report(t, h, rule, health.None, 0, 0.5) // the hash starts at 0.5
					k, ok := verdicts(t, h, rule, tc.states...)
					if !ok && attempt < 5 {
						continue
					}
					if sh := settled(t, h, rule, k); math.Abs(sh.Factor-tc.want) > 1e-9 {
						t.Fatalf("verdicts %v on window %d from 0.5: factor %v; want %v", tc.states, k, sh.Factor, tc.want)
					}
					return
				}
			})
		}
	})
}

// Bad windows halve the factor down to the floor and never below; good
// windows then add the step, once a window, up to the dial and never
// above; a window with no evidence moves nothing. The steps are counted
// in windows settled, not wall time: a report that straddles a window's
// end on a loaded machine only delays a step.
func TestHealthFloorAndRecovery(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		rule.Window = 50 * time.Millisecond
		h := healthKey(t, s)
		var sh health.Shared
		for i := 0; sh.Decreases < 6; i++ {
			if i > 60 {
				t.Fatalf("%d decreases in 60 bad windows", sh.Decreases)
			}
			before := sh.Decreases
			k, _ := verdicts(t, h, rule, health.Bad, health.Bad)
			sh = settled(t, h, rule, k)
			if want := math.Max(0.1, math.Pow(0.5, float64(sh.Decreases))); sh.Decreases > before+1 || math.Abs(sh.Factor-want) > 1e-9 {
				t.Fatalf("after %d decreases (%d in one window) the factor is %v; want %v", sh.Decreases, sh.Decreases-before, sh.Factor, want)
			}
		}
		k := closedWindow(t, h, rule)
		report(t, h, rule, health.None, k, 1)
		if sh = settled(t, h, rule, k); sh.Factor != 0.1 {
			t.Fatalf("no evidence moved the factor to %v", sh.Factor)
		}
		inc0 := sh.Increases
		for i := 0; sh.Factor < 1; i++ {
			if i > 200 {
				t.Fatalf("the factor at %v after 200 good windows", sh.Factor)
			}
			before := sh.Increases
			// Two gateways' good verdicts on one window add one step.
			k, _ := verdicts(t, h, rule, health.Good, health.Good)
			sh = settled(t, h, rule, k)
			if want := math.Min(1, 0.1+0.05*float64(sh.Increases-inc0)); sh.Increases > before+1 || math.Abs(sh.Factor-want) > 1e-6 {
				t.Fatalf("after %d increases (%d in one window) the factor is %v; want %v", sh.Increases-inc0, sh.Increases-before, sh.Factor, want)
			}
		}
		if sh.Increases-inc0 != 18 {
			t.Fatalf("%d increases from 0.1 to 1; want 18", sh.Increases-inc0)
		}
		k, _ = verdicts(t, h, rule, health.Good)
		if sh = settled(t, h, rule, k); sh.Factor != 1 {
			t.Fatalf("a good window at the dial moved the factor to %v", sh.Factor)
		}
	})
}

// A hash lost to a Redis failover comes back at the reporting gateway's
// last factor, not at the dial.
func TestHealthLostKeyKeepsTheFactor(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		h := healthKey(t, s)
		if sh := report(t, h, rule, health.None, 0, 0.3); sh.Factor != 0.3 {
			t.Fatalf("a missing hash read with seed 0.3 = %v; want 0.3", sh.Factor)
		}
		s.Client().Del(ctx, h.Key())
		if sh := report(t, h, rule, health.None, 0, 0.01); sh.Factor != rule.Floor {
			t.Fatalf("a missing hash read with a seed below the floor = %v; want the floor", sh.Factor)
		}
	})
}

// The bucket lets the line in at the dial times the factor it is given,
// clamped to [0, 1], and says so in the tick; the control, the same
// bucket at factor 1 over the same kind of interval, offers far more.
func TestTickAtFactor(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		offered := func(factor float64) (n int64, allowed float64, tk gateway.Tick) {
			ev := redistest.Event(t, s)
			setDials(t, s, ev, func(d *gateway.Dials) {
				d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
				d.NewUsersPerMinute, d.TotalActiveUsers = 60000, 100000
			})
			for f := range 2000 {
				s.Join(ctx, ev, fmt.Sprint(f))
			}
			first, err := s.Tick(ctx, ev, factor, gateway.Lease{})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the bucket's input is time
			tk, err = s.Tick(ctx, ev, factor, gateway.Lease{})
			if err != nil {
				t.Fatal(err)
			}
			rate := 60000 * math.Min(1, math.Max(0, factor)) / 60000 // places a millisecond
			allowed = rate*float64(tk.Now.Sub(first.Now).Milliseconds()) + math.Max(1, rate*1000) + 1
			return tk.Serving, allowed, tk
		}
		for _, tc := range []struct {
			factor, wantFactor float64
		}{{0.1, 0.1}, {7, 1}, {-1, 0}} {
			n, allowed, tk := offered(tc.factor)
			if tk.Factor != tc.wantFactor || tk.Rate != 60000*tc.wantFactor {
				t.Errorf("Tick(factor %v) reports factor %v, rate %v; want %v, %v", tc.factor, tk.Factor, tk.Rate, tc.wantFactor, 60000*tc.wantFactor)
			}
			if float64(n) > allowed {
				t.Errorf("Tick(factor %v) offered %d places; the dial times the factor allows %.0f", tc.factor, n, allowed)
			}
			if tc.factor == 0.1 {
				ctl, _, _ := offered(1)
				if n == 0 || ctl < 4*n {
					t.Errorf("at factor 0.1 %d places offered, at factor 1 %d: want some, and far fewer than the dial's", n, ctl)
				}
			}
			if tc.factor < 0 && n != 0 {
				t.Errorf("Tick(factor %v) offered %d places; want none", tc.factor, n)
			}
		}
	})
}

// The Redis cost of the health exchange: one EVALSHA per gateway per tick
// (ten a second each at the default tick), plus one per window with the
// gateway's verdict; a write only with a verdict or when a window is
// settled. Reports the round trip and Redis's own time per call:
//
//	go test -run '^$' -bench HealthExchange ./gateway/redis
func BenchmarkHealthExchange(b *testing.B) {
	s := redistest.NewStore(b, false)
	key := fmt.Sprintf("onsale:health:bench-%d", rand.Int64())
	b.Cleanup(func() { s.Client().Del(ctx, key) })
	h := s.Health(key)
	rule := health.DefaultRule()
	for _, tc := range []struct {
		name    string
		verdict health.State
	}{{"read", health.None}, {"report", health.Bad}} {
		b.Run(tc.name, func(b *testing.B) {
			usec := func() (calls, us float64) {
				info, _ := s.Client().Info(ctx, "commandstats").Result()
				for _, line := range strings.Split(info, "\n") {
					if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
						fmt.Sscanf(rest, "calls=%g,usec=%g", &calls, &us)
					}
				}
				return calls, us
			}
			c0, u0 := usec()
			w := int64(0)
			for b.Loop() {
				sh, err := h.Exchange(ctx, health.Report{Window: w, Verdict: health.Verdict{State: tc.verdict, Reason: "bench"}, Rule: rule, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				w = sh.Window
			}
			c1, u1 := usec()
			if c1 > c0 {
				b.ReportMetric((u1-u0)/(c1-c0), "redis_us/call")
			}
		})
	}
}
