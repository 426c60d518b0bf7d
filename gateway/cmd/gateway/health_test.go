package main

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// fakeCore is a core whose health the test sets: healthy, slow holds (the
// database stalling under the core), or 503 for everything (the core
// failing closed, its database gone); behind a relay the test can cut (the
// core unreachable).
type fakeCore struct {
	mode  atomic.Value // "healthy", "slow", "503"
	slow  time.Duration
	relay *relay
	url   string
}

func newFakeCore(t *testing.T, slow time.Duration) *fakeCore {
	c := &fakeCore{slow: slow}
	c.mode.Store("healthy")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mode := c.mode.Load().(string)
		switch {
		case serveJWKS(w, r):
		case mode == "503":
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"unavailable","message":"database unavailable"}`))
		case r.URL.Path == "/readyz":
			w.Write([]byte(`{"status":"ready"}`))
		case strings.HasSuffix(r.URL.Path, "/holds"):
			if mode == "slow" {
				time.Sleep(c.slow)
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"hold_id":"h"}`))
		default:
			w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(srv.Close)
	c.relay = newRelay(t, strings.TrimPrefix(srv.URL, "http://"))
	c.url = "http://" + c.relay.ln.Addr().String()
	return c
}

func (c *fakeCore) set(mode string) { c.mode.Store(mode) }

// key is the Redis hash of the factor the gateways in front of c share.
func (c *fakeCore) key() string { return redis.HealthKey(c.relay.ln.Addr().String()) }

// sharedHealth reads the shared factor's hash and the Redis clock.
type sharedHealth struct {
	factor               float64
	decreases, increases int64
	now                  time.Time
}

func readShared(t testing.TB, s *redis.Store, key string) sharedHealth {
	t.Helper()
	m, err := s.Client().HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	now, err := s.Client().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	h := sharedHealth{factor: 1, now: now}
	if f, err := strconv.ParseFloat(m["factor"], 64); err == nil {
		h.factor = f
	}
	h.decreases, _ = strconv.ParseInt(m["decreases"], 10, 64)
	h.increases, _ = strconv.ParseInt(m["increases"], 10, 64)
	return h
}

// badWindows is the windows a gateway judged bad (its /metrics).
func badWindows(t testing.TB, addr string) int64 {
	r, err := http.Get("http://" + operatorsOf(t, addr) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `onsale_gateway_core_windows_total{verdict="bad"} `); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int64(n)
		}
	}
	t.Fatal("no onsale_gateway_core_windows_total on /metrics")
	return 0
}

// holdLoad posts holds through every gateway of f, each of n workers one
// every 100 ms (slower when the core is slow), until the test ends.
func holdLoad(t *testing.T, f *fleet, ev int64, n int) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cl := &http.Client{Timeout: 3 * time.Second}
	for _, a := range f.addrs {
		for range n {
			wg.Go(func() {
				tk := time.NewTicker(100 * time.Millisecond)
				defer tk.Stop()
				for {
					if r, err := cl.Post(fmt.Sprintf("http://%s/v1/events/%d/holds", a, ev), "application/json",
						strings.NewReader(`{"quantity":1}`)); err == nil {
						r.Body.Close()
					}
					select {
					case <-stop:
						return
					case <-tk.C:
					}
				}
			})
		}
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// adminSample is what an operator's console reads from one gateway.
type adminSample struct {
	dial, effective, factor float64
	state, reason           string
}

func readAdmin(t testing.TB, addr string, ev int64) adminSample {
	a := adminCall(t, addr, "GET", ev, "")
	st, _ := a["stats"].(map[string]any)
	d, _ := a["dials"].(map[string]any)
	h, _ := a["health"].(map[string]any)
	num := func(m map[string]any, k string) float64 { v, _ := m[k].(float64); return v }
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	return adminSample{dial: num(d, "new_users_per_minute"), effective: num(st, "effective_per_minute"), factor: num(st, "factor"),
		state: str(h, "state"), reason: str(h, "reason")}
}

// healthFleet is two gateway processes sharing Redis in front of a fake
// core, judging the core's health in quarter-second windows (the default
// rule otherwise, with a hold p90 threshold the fake's slow holds pass),
// and an event at 6,000 a minute with a long line.
func healthFleet(t *testing.T, feedback string) (*redis.Store, *fakeCore, *fleet, int64) {
	s := redistest.NewStore(t, false)
	core := newFakeCore(t, 250*time.Millisecond) // startFleet forgets its factor at cleanup
	ev := newEvent(t, s, func(d *gateway.Dials) { d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds = 6000, 1_000_000, 600 })
	for i := range 5000 {
		if _, err := s.Join(ctx, ev, fmt.Sprintf("fan-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f := startFleet(t, 2, redistest.Addrs(t, false), "-core-url", core.url, "-tick", "50ms", "-health", feedback,
		"-health-window", "250ms", "-health-hold-p90", "100ms")
	for _, a := range f.addrs {
		adminCall(t, a, "GET", ev, "") // both gateways know the event
	}
	return s, core, f, ev
}

// Admission follows the core's health across two gateway processes: at
// each fault (slow holds, 503s, the core unreachable) the effective rate
// drops to the floor, once per bad window however many gateways judged it,
// never above the dial, and the console says why; when the core is well
// again it climbs back to the dial by itself, one step a window.
func TestAdmissionFollowsCoreHealth(t *testing.T) {
	s, core, f, ev := healthFleet(t, "on")
	holdLoad(t, f, ev, 12)
	window := 250 * time.Millisecond

	// The console of both gateways, read all along: never above the dial.
	var mu sync.Mutex
	var samples []adminSample
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			for _, a := range f.addrs {
				smp := readAdmin(t, a, ev)
				mu.Lock()
				samples = append(samples, smp)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	reasons := func() (seen []string, over int) {
		mu.Lock()
		defer mu.Unlock()
		for _, smp := range samples {
			if smp.reason != "" && (len(seen) == 0 || seen[len(seen)-1] != smp.reason) {
				seen = append(seen, smp.reason)
			}
			if smp.effective > smp.dial+1e-9 || smp.factor > 1 {
				over++
			}
		}
		samples = samples[:0]
		return seen, over
	}
	factorIs := func(want float64) func() bool {
		return func() bool { return math.Abs(readShared(t, s, core.key()).factor-want) < 1e-9 }
	}
	for _, fault := range []struct {
		name         string
		reasons      []string // one of the console's reasons starts with one
		inject, heal func()
	}{
		{"slow holds", []string{"core hold p90 "}, func() { core.set("slow") }, func() { core.set("healthy") }},
		{"503s", []string{"core 503s "}, func() { core.set("503") }, func() { core.set("healthy") }},
		// The first bad window may still hold calls answered before the cut.
		{"unreachable", []string{"core unreachable", "core not answering "}, core.relay.cut, core.relay.restore},
	} {
		waitFor(t, "the dial before "+fault.name, 30*time.Second, factorIs(1))
		reasons()
		before := readShared(t, s, core.key())
		bad0 := badWindows(t, f.addrs[0]) + badWindows(t, f.addrs[1])
		fault.inject()
		waitFor(t, "the floor under "+fault.name, 20*time.Second, factorIs(0.1))
		time.Sleep(4 * window) // more bad windows at the floor: still one decrease each
		fault.heal()
		during := readShared(t, s, core.key())
		bad := badWindows(t, f.addrs[0]) + badWindows(t, f.addrs[1]) - bad0
		windows := during.now.Sub(before.now) / window
		decreases := during.decreases - before.decreases
		waitFor(t, "the dial after "+fault.name, 30*time.Second, factorIs(1))
		after := readShared(t, s, core.key())
		seen, over := reasons()
		t.Logf("%s: %d bad windows judged by 2 gateways, %d decreases in %d windows, then %d increases back to the dial; console said %q",
			fault.name, bad, decreases, windows, after.increases-during.increases, seen)
		switch {
		case decreases > int64(windows)+2:
			t.Errorf("%s: %d decreases in %d windows; want one a window at most", fault.name, decreases, windows)
		case bad <= decreases:
			t.Errorf("%s: %d bad verdicts from two gateways, %d decreases; want fewer decreases than verdicts (one a window, not one a gateway)",
				fault.name, bad, decreases)
		case after.increases-during.increases < 18:
			t.Errorf("%s: back from 0.1 to 1 in %d increases; want 18 or more (steps of 0.05)", fault.name, after.increases-during.increases)
		case over > 0:
			t.Errorf("%s: %d console readings above the dial", fault.name, over)
		// The console shows the last cut's reason until the next cut, so the
		// first readings after the fault may still name the one before it
		// (a loaded machine samples before the first cut): the cause must be
		// named among them, not necessarily first.
		case !slices.ContainsFunc(seen, func(r string) bool {
			return slices.ContainsFunc(fault.reasons, func(p string) bool { return strings.HasPrefix(r, p) })
		}):
			t.Errorf("%s: the console said %q; want one of %q among them", fault.name, seen, fault.reasons)
		}
	}
	close(stop)
	<-sampled
}

// During a core outage two gateways with the feedback let in far fewer
// than the dial allows; the control, the same outage with the feedback off,
// lets the line in at the dial: the harness sees the difference.
func TestAdmissionDuringCoreOutage(t *testing.T) {
	outage := func(t *testing.T, feedback string) (share float64) {
		s, core, _, ev := healthFleet(t, feedback)
		waitFor(t, "admission to start", 10*time.Second, func() bool { return serving(t, s, ev) > 0 })
		core.relay.cut()
		start, s0 := readShared(t, s, core.key()).now, serving(t, s, ev)
		time.Sleep(3 * time.Second) // the outage: twelve windows
		end, s1 := readShared(t, s, core.key()).now, serving(t, s, ev)
		core.relay.restore()
		allowed := 6000 * end.Sub(start).Minutes()
		share = float64(s1-s0) / allowed
		t.Logf("feedback %s: %d places offered during a %.1f s outage; the dial allows %.0f (%.0f%%)",
			feedback, s1-s0, end.Sub(start).Seconds(), allowed, 100*share)
		return share
	}
	t.Run("feedback", func(t *testing.T) {
		if share := outage(t, "on"); share > 0.5 {
			t.Fatalf("%.0f%% of the dial let in while the core was unreachable; want the rate cut (0.1 of the dial within four windows)", 100*share)
		}
	})
	t.Run("control: feedback off", func(t *testing.T) {
		if share := outage(t, "off"); share < 0.8 {
			t.Fatalf("control: %.0f%% of the dial let in with the feedback off; want the dial's pace (the harness must see the difference)", 100*share)
		}
	})
}
