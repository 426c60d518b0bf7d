package redis_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
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

// nextWindow waits (on the Redis clock) until the window after w.
func nextWindow(t *testing.T, h *redis.Health, rule health.Rule, w int64) health.Shared {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(rule.Window / 4) {
		if sh := report(t, h, rule, health.None, 0, 1); sh.Window > w {
			return sh
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Redis clock did not leave window %d", w)
		}
	}
}

// Three gateways that saw the same bad window decrease the shared factor
// once, not three times; the control, each gateway cutting the factor it
// read, cuts it three times.
func TestHealthOneDecreasePerWindow(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		rule.Window = time.Minute // the three reports fall in one window (or the next: a just-closed window counts too)
		h := healthKey(t, s)
		w := report(t, h, rule, health.None, 0, 1).Window
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { report(t, h, rule, health.Bad, w, 1) })
		}
		wg.Wait()
		sh := report(t, h, rule, health.None, 0, 1)
		if sh.Factor != 0.5 || sh.Decreases != 1 || sh.LastDecrease != w || sh.Reason != "test bad" {
			t.Fatalf("after three bad reports of window %d: %+v; want factor 0.5, one decrease", w, sh)
		}
		// A good report on the window somebody called bad raises nothing.
		if sh := report(t, h, rule, health.Good, w, 1); sh.Factor != 0.5 || sh.Increases != 0 {
			t.Fatalf("good report on a bad window: %+v; want factor 0.5 kept", sh)
		}
		// A late report (a stalled gateway's window long gone) is only read.
		if sh := report(t, h, rule, health.Bad, w-5, 1); sh.Factor != 0.5 || sh.Decreases != 1 {
			t.Fatalf("stale bad report: %+v; want nothing changed", sh)
		}

		// The control: each gateway reads the factor and cuts it itself.
		naive := fmt.Sprintf("onsale:health:naive-%d", rand.Int64())
		t.Cleanup(func() { s.Client().Del(ctx, naive) })
		s.Client().HSet(ctx, naive, "factor", 1)
		var mu sync.Mutex // the cuts are serialised: even without a race the naive rule cuts thrice
		for range 3 {
			wg.Go(func() {
				mu.Lock()
				defer mu.Unlock()
				f, _ := s.Client().HGet(ctx, naive, "factor").Float64()
				s.Client().HSet(ctx, naive, "factor", f*rule.Decrease)
			})
		}
		wg.Wait()
		if f, _ := s.Client().HGet(ctx, naive, "factor").Float64(); f != 0.125 {
			t.Fatalf("control: three per-gateway cuts left %v; want 0.125 (the harness must see the triple cut)", f)
		}
	})
}

// Bad windows halve the factor down to the floor and never below; good
// windows then add the step, once a window, up to the dial and never
// above; a window with no evidence moves nothing.
func TestHealthFloorAndRecovery(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		rule := health.DefaultRule()
		rule.Window = 20 * time.Millisecond
		h := healthKey(t, s)
		sh := report(t, h, rule, health.None, 0, 1)
		want := []float64{0.5, 0.25, 0.125, 0.1, 0.1, 0.1}
		for i, f := range want {
			sh = report(t, h, rule, health.Bad, sh.Window, 1)
			if sh.Factor != f {
				t.Fatalf("after %d bad windows the factor is %v; want %v", i+1, sh.Factor, f)
			}
			sh = nextWindow(t, h, rule, sh.Window)
		}
		if sh = report(t, h, rule, health.None, sh.Window, 1); sh.Factor != 0.1 {
			t.Fatalf("no evidence moved the factor to %v", sh.Factor)
		}
		var got []float64
		for range 25 {
			w := sh.Window
			report(t, h, rule, health.Good, w, 1)
			// A second gateway's good verdict on the same window adds nothing.
			sh = report(t, h, rule, health.Good, w, 1)
			got = append(got, sh.Factor)
			sh = nextWindow(t, h, rule, sh.Window)
		}
		for i, f := range got {
			want := math.Min(1, 0.1+0.05*float64(i+1))
			if math.Abs(f-want) > 1e-6 {
				t.Fatalf("after %d good windows the factor is %v; want %v (one step of 0.05 a window): %v", i+1, f, want, got)
			}
		}
		if sh.Increases != 18 {
			t.Fatalf("%d increases from 0.1 to 1; want 18", sh.Increases)
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
			first, err := s.Tick(ctx, ev, factor)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the bucket's input is time
			tk, err = s.Tick(ctx, ev, factor)
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
// (ten a second each at the default tick), read-only unless a window just
// closed. Reports the round trip and Redis's own time per call:
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
