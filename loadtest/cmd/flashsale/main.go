// Command flashsale runs the noon sale against a running stack (gateway,
// core, payment simulator): a crowd that arrives before onsale, at onsale
// and after, polls its place at the interval the gateway asks, is admitted,
// looks at the seat map, holds seats (best available, or picked from a map
// that may be stale), pays by UPI or card, and misbehaves in stated
// proportions; bots hammer the queue with no or forged tokens. It prints
// progress, waits for every payment to settle, runs the invariant checker
// and prints a summary.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/procstat"
	"github.com/onsale/onsale/loadtest/report"
)

type config struct {
	gateway, paysim, providerKey, adminToken, dbURL string
	event                                           int64
	fans, bots                                      int
	onsaleIn, wall, tail, deadline, claim           time.Duration
	perMinute, maxActive                            int
	sweep, session                                  time.Duration
	report, watch                                   string
	conns                                           int
}

func main() {
	var c config
	flag.StringVar(&c.gateway, "gateway", "http://127.0.0.1:18080", "gateway base URL")
	flag.StringVar(&c.paysim, "paysim", "http://127.0.0.1:18090", "payment simulator base URL")
	flag.StringVar(&c.providerKey, "provider-key", "sk_test_paysim", "payment simulator API key (for its ledger)")
	flag.StringVar(&c.adminToken, "admin-token", "", "gateway admin token")
	flag.StringVar(&c.dbURL, "database-url", os.Getenv("DATABASE_URL"), "the core's database (for the checker)")
	flag.Int64Var(&c.event, "event", 1, "the event on sale")
	flag.IntVar(&c.fans, "fans", 4000, "fans in the crowd")
	flag.IntVar(&c.bots, "bots", 4, "bots hammering the queue")
	flag.DurationVar(&c.onsaleIn, "onsale-in", 10*time.Second, "time until onsale (the pre-queue crowd arrives before)")
	flag.DurationVar(&c.wall, "wall", 10*time.Second, "half the crowd arrives within this long after onsale")
	flag.DurationVar(&c.claim, "claim", 30*time.Second, "the claim_seconds dial (a far-back fan polls about every third of it)")
	flag.DurationVar(&c.tail, "tail", 30*time.Second, "late arrivals keep coming this long after onsale")
	flag.DurationVar(&c.deadline, "deadline", 4*time.Minute, "stop the sale after this long, whatever is left")
	flag.IntVar(&c.perMinute, "per-minute", 3000, "the new_users_per_minute dial")
	flag.IntVar(&c.maxActive, "max-active", 600, "the total_active_users dial")
	flag.DurationVar(&c.session, "session", 2*time.Minute, "the session_seconds dial: how long an admitted fan may shop")
	flag.StringVar(&c.report, "report", "", "write the HTML report here")
	flag.DurationVar(&c.sweep, "sweep", 5*time.Second, "the core's sweep interval (for the checker's margin)")
	flag.IntVar(&c.conns, "conns", 1024, "connections the crowd opens to the gateway at most")
	flag.StringVar(&c.watch, "watch", "", "processes to sample for CPU and memory, name=pid,... (children count with their parent)")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}

// stats is what the crowd saw, counted as it happens.
type stats struct {
	joined, admitted, held, paid, confirmed, taken, limit, abandoned, failedPay, refunded, rejoin atomic.Int64
	botRefused, errors                                                                            atomic.Int64
	left                                                                                          atomic.Int64
	sessionNanos                                                                                  atomic.Int64 // admitted to done, summed over fans who said they were done
	start                                                                                         time.Time
	pollsAt                                                                                       []atomic.Int64 // status polls answered, by second since start
	mu                                                                                            sync.Mutex
	latency                                                                                       map[string][]time.Duration
	errorsByKind                                                                                  map[string]int
}

func (s *stats) observe(route string, d time.Duration) {
	s.mu.Lock()
	s.latency[route] = append(s.latency[route], d)
	s.mu.Unlock()
}

func (s *stats) fail(kind string) {
	s.errors.Add(1)
	s.mu.Lock()
	s.errorsByKind[kind]++
	s.mu.Unlock()
}

// client is one fan's (or the operators', or a bot's) side of the
// connection pool: fasthttp, so the crowd costs the shared cores as little
// as it can, with the fan's cookies kept by hand (a jar per fan would cost
// more than the fan).
type client struct {
	hc      *fasthttp.HostClient
	timeout time.Duration
	st      *stats
	keep    bool // keep cookies (a fan); the operators and bots send none
	mu      sync.Mutex
	cookies map[string]string
}

func newPool(base string, conns int) *fasthttp.HostClient {
	u, _ := url.Parse(base)
	return &fasthttp.HostClient{Addr: u.Host, MaxConns: conns, MaxConnWaitTimeout: 20 * time.Second,
		MaxIdleConnDuration: 30 * time.Second, ReadBufferSize: 16 << 10}
}

type reply struct {
	status int
	body   map[string]any
	retry  time.Duration
}

// do sends one request; route names it in the latency table. The reply's
// JSON is decoded unless the route is "layout" (the crowd parses the
// immutable layout once: a browser would cache it).
func (c *client) do(ctx context.Context, route, method, target string, body any, hdr ...string) reply {
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if ctx.Err() != nil || timeout <= 0 {
		return reply{}
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(target)
	req.Header.SetMethod(method)
	if body != nil {
		b, _ := json.Marshal(body)
		req.SetBodyRaw(b)
		req.Header.SetContentType("application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if c.keep {
		c.mu.Lock()
		for k, v := range c.cookies {
			req.Header.SetCookie(k, v)
		}
		c.mu.Unlock()
	}
	t0 := time.Now()
	err := c.hc.DoTimeout(req, resp, timeout)
	c.st.observe(route, time.Since(t0))
	if err != nil {
		if ctx.Err() == nil {
			c.st.fail("transport")
		}
		return reply{}
	}
	if route == "status" {
		if i := int(time.Since(c.st.start) / time.Second); i >= 0 && i < len(c.st.pollsAt) {
			c.st.pollsAt[i].Add(1)
		}
	}
	if c.keep {
		c.mu.Lock()
		resp.Header.VisitAllCookie(func(key, value []byte) {
			var ck fasthttp.Cookie
			if ck.ParseBytes(value) != nil {
				return
			}
			if c.cookies == nil {
				c.cookies = map[string]string{}
			}
			if len(ck.Value()) == 0 {
				delete(c.cookies, string(key))
			} else {
				c.cookies[string(key)] = string(ck.Value())
			}
		})
		c.mu.Unlock()
	}
	out := reply{status: resp.StatusCode()}
	if route != "layout" {
		json.Unmarshal(resp.Body(), &out.body)
	}
	if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
		n, _ := strconv.Atoi(string(ra))
		out.retry = time.Duration(n) * time.Second
	}
	if out.status >= 500 {
		c.st.fail(fmt.Sprintf("%s %d", route, out.status))
	}
	return out
}

func run(ctx context.Context, c config) error {
	st := &stats{latency: map[string][]time.Duration{}, errorsByKind: map[string]int{}, start: time.Now(),
		pollsAt: make([]atomic.Int64, int((c.onsaleIn+c.deadline).Seconds())+60)}
	targets, err := procstat.Parse(c.watch)
	if err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	procs, err := procstat.Watch(watchCtx, append(targets, procstat.Target{Name: "flashsale (the crowd)", PID: os.Getpid()}), time.Second)
	if err != nil {
		return err
	}
	pool := newPool(c.gateway, c.conns)
	// The operators' screens have their own connections: a crowd queued on
	// the fans' pool must not delay the samples the checker relies on.
	admin := &client{hc: newPool(c.gateway, 8), timeout: 10 * time.Second, st: st}
	adminHdr := []string{"Authorization", "Bearer " + c.adminToken}
	// The operators set the dials: the pre-queue opens now, onsale shortly.
	onsale := time.Now().Add(c.onsaleIn).Truncate(time.Second)
	admin.do(ctx, "admin", "GET", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), nil, adminHdr...) // the room learns the event
	r := admin.do(ctx, "admin", "PATCH", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), map[string]any{
		"prequeue_at": time.Now().Add(-time.Second), "onsale_at": onsale, "new_users_per_minute": c.perMinute,
		"total_active_users": c.maxActive, "session_seconds": c.session.Seconds(), "claim_seconds": c.claim.Seconds()}, adminHdr...)
	if r.status != 200 {
		return fmt.Errorf("setting the dials: %d %v", r.status, r.body)
	}
	var ev struct {
		Capacity    int `json:"capacity"`
		HoldSeconds int `json:"hold_seconds"`
		Bands       []struct {
			Code string `json:"code"`
		} `json:"price_bands"`
	}
	b, _ := json.Marshal(admin.do(ctx, "event", "GET", fmt.Sprintf("%s/v1/events/%d", c.gateway, c.event), nil).body)
	json.Unmarshal(b, &ev)
	fmt.Printf("flashsale: %d fans for %d seats on event %d; onsale at %s; dials %d/min, %d active at most\n",
		c.fans, ev.Capacity, c.event, onsale.Format("15:04:05"), c.perMinute, c.maxActive)
	hold := time.Duration(ev.HoldSeconds) * time.Second
	fmt.Printf("  forecast if nobody left before the session ends (W = the session dial): %v\n",
		predict(ev.Capacity, c.perMinute, c.maxActive, c.session, hold, c.sweep))

	sale, stop := context.WithTimeout(ctx, c.deadline)
	defer stop()
	var samples []check.Sample
	var series []point
	var smu sync.Mutex
	var soldOutAt, allTakenAt atomic.Int64
	start := time.Now()
	// Progress and the samples the checker uses.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-sale.Done():
				return
			case <-t.C:
			}
			asOf := time.Now() // the reading is at least this recent
			a := admin.do(sale, "admin", "GET", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), nil, adminHdr...)
			cs := admin.do(sale, "stats", "GET", fmt.Sprintf("%s/v1/events/%d/stats", c.gateway, c.event), nil)
			if a.status != 200 || cs.status != 200 {
				continue
			}
			s := a.body["stats"].(map[string]any)
			d := a.body["dials"].(map[string]any)
			// The gateway says when it read these (its view of the room, a
			// tick at most ~100 ms old); failing that, the reading is at
			// least as recent as the request.
			if t, err := time.Parse(time.RFC3339Nano, fmt.Sprint(s["as_of"])); err == nil {
				asOf = t
			}
			num := func(m map[string]any, k string) int64 { v, _ := m[k].(float64); return int64(v) }
			smu.Lock()
			series = append(series, point{t: time.Since(onsale).Seconds(), queued: num(s, "queued"), admitted: num(s, "admitted_per_minute"),
				dial: num(d, "new_users_per_minute"), active: num(s, "active"), cap: num(d, "total_active_users"), serving: num(s, "serving"), held: num(cs.body, "held"), sold: num(cs.body, "sold"),
				available: num(cs.body, "available"), holds: st.held.Load(), confirmed: st.confirmed.Load()})
			samples = append(samples, check.Sample{At: asOf, Active: num(s, "active"), Offers: num(s, "offered_unclaimed"),
				AdmittedPerMinute: num(s, "admitted_per_minute"), Queued: num(s, "queued"),
				Dial: num(d, "new_users_per_minute"), Cap: num(d, "total_active_users"), Serving: num(s, "serving")})
			smu.Unlock()
			if num(cs.body, "available") == 0 && allTakenAt.Load() == 0 {
				allTakenAt.Store(int64(time.Since(onsale)))
			}
			if num(cs.body, "available") == 0 && num(cs.body, "held") == 0 && soldOutAt.Load() == 0 {
				// Every seat sold, none held that could come back: the
				// operators tell the line, and the crowd goes home.
				soldOutAt.Store(int64(time.Since(onsale)))
				admin.do(sale, "admin", "PATCH", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), map[string]any{"sold_out": true}, adminHdr...)
				fmt.Printf("  t%+4.0fs  SOLD OUT: the line is told\n", time.Since(onsale).Seconds())
			}
			if i%2 == 0 {
				fmt.Printf("  t%+4.0fs  queued %6d  admitted %6d  held %5d  sold %6d/%d  seats left %6d  errors %d\n",
					time.Since(onsale).Seconds(), num(s, "queued"), st.admitted.Load(), st.held.Load(), num(cs.body, "sold"),
					ev.Capacity, num(cs.body, "available"), st.errors.Load())
			}
		}
	}()

	// Bots: no token, a forged token, joins as fast as they can.
	var wg sync.WaitGroup
	for i := range c.bots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bot := &client{hc: pool, timeout: 5 * time.Second, st: st}
			forged := "eyJhbGciOiJIUzI1NiJ9.eyJldnQiOjEsInBvcyI6MX0.forged"
			for sale.Err() == nil && time.Since(start) < c.onsaleIn+c.tail {
				var r reply
				switch i % 3 {
				case 0:
					r = bot.do(sale, "bot", "GET", fmt.Sprintf("%s/v1/events/%d/queue/status", c.gateway, c.event), nil)
				case 1:
					r = bot.do(sale, "bot", "GET", fmt.Sprintf("%s/v1/events/%d/queue/status", c.gateway, c.event), nil, "Authorization", "Bearer "+forged)
				default:
					r = bot.do(sale, "bot", "POST", fmt.Sprintf("%s/v1/events/%d/queue", c.gateway, c.event), nil)
				}
				if r.status == 401 || r.status == 429 {
					st.botRefused.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}

	// The crowd: 30% before onsale, 50% in the wall right after, 20% over the tail.
	var wgFans sync.WaitGroup
	traces := make([]*check.Admission, c.fans)
	for i := range c.fans {
		var at time.Duration
		switch p := rand.Float64(); {
		case p < 0.3:
			at = time.Duration(rand.Float64() * float64(c.onsaleIn-time.Second))
		case p < 0.8:
			at = c.onsaleIn + time.Duration(rand.Float64()*float64(c.wall))
		default:
			at = c.onsaleIn + time.Duration(rand.Float64()*float64(c.tail))
		}
		wgFans.Add(1)
		go func() {
			defer wgFans.Done()
			select {
			case <-sale.Done():
				return
			case <-time.After(at - time.Since(start)):
			}
			f := &fan{c: c, st: st, n: i, bands: ev.Bands, cl: &client{hc: pool, timeout: 20 * time.Second, st: st, keep: true}}
			f.shop(sale)
			traces[i] = &f.trace
		}()
	}
	wgFans.Wait()
	stop()
	wg.Wait()
	saleTook := time.Since(onsale)

	// Let payments and refunds settle, then check.
	fmt.Println("  the crowd is done; waiting for payments and refunds to settle…")
	settle(ctx, c)
	var admissions []check.Admission
	for _, tr := range traces {
		if tr != nil {
			admissions = append(admissions, *tr)
		}
	}
	res, err := check.Run(ctx, check.Input{DatabaseURL: c.dbURL, Event: c.event, LedgerURL: c.paysim + "/v1/ledger",
		ProviderKey: c.providerKey, SweepInterval: c.sweep, Samples: samples, Admissions: admissions})
	if err != nil {
		return err
	}
	stopWatch()
	// Little's law with the session length the crowd actually kept: fans
	// who said they were done, their measured time; the rest, the whole
	// session (they hold the room until it runs out).
	w := c.session
	if n := st.admitted.Load(); n > 0 {
		w = time.Duration((st.sessionNanos.Load() + (n-st.left.Load())*int64(c.session)) / n)
	}
	fc := predict(ev.Capacity, c.perMinute, c.maxActive, w, hold, c.sweep)
	out := outcome{took: saleTook, hold: hold, allTaken: time.Duration(allTakenAt.Load()), soldOut: time.Duration(soldOutAt.Load()), forecast: fc,
		procs: procs.Usage(), cpu: procs.Samples(), targets: procs.Targets(), onsale: onsale}
	summary(c, st, out)
	fmt.Println("\ninvariants:")
	failed := 0
	for _, r := range res {
		v := "PASS"
		if !r.Pass {
			v, failed = "FAIL", failed+1
		}
		fmt.Printf("  %s  %s (%s)\n", v, r.Name, r.Detail)
	}
	if c.report != "" {
		smu.Lock()
		err := writeReport(c, st, series, res, ev.Capacity, out)
		smu.Unlock()
		if err != nil {
			return err
		}
		fmt.Println("\nreport:", c.report)
	}
	if failed > 0 {
		return fmt.Errorf("%d invariants broken", failed)
	}
	return nil
}

// point is one second of the sale as the operators' screens showed it.
type point struct {
	t                                                                            float64
	queued, admitted, dial, active, cap, held, sold, available, holds, confirmed int64
	serving                                                                      int64
}

// outcome is how the sale went, beside its forecast.
type outcome struct {
	took, allTaken, soldOut time.Duration
	hold                    time.Duration
	forecast                forecast
	procs                   []procstat.Usage
	cpu                     []procstat.Sample
	targets                 []procstat.Target
	onsale                  time.Time
}

func (o outcome) lines(c config, st *stats) []string {
	end := fmt.Sprintf("not sold out when the %v deadline came (%.0f s after onsale)", c.deadline, o.took.Seconds())
	if o.soldOut > 0 {
		end = fmt.Sprintf("sold out %.0f s after onsale (forecast about %.0f s)", o.soldOut.Seconds(), o.forecast.SoldOut.Seconds())
	}
	taken := "never every seat taken at once"
	if o.allTaken > 0 {
		taken = fmt.Sprintf("every seat held or sold %.0f s after onsale (forecast %.0f s)", o.allTaken.Seconds(), o.forecast.AllTaken.Seconds())
	}
	return []string{
		fmt.Sprintf("Dials: %d let in a minute, %d sessions at most, sessions of %v; holds of %v; sweep every %v.",
			c.perMinute, c.maxActive, c.session, o.hold, c.sweep),
		fmt.Sprintf("Outcome: %s; %s.", taken, end),
		fmt.Sprintf("Little's law with the sessions the crowd kept (%d of %d admitted fans said they were done, after %.1f s on average; the rest kept the room for the whole session): %v.",
			st.left.Load(), st.admitted.Load(), meanLeft(st).Seconds(), o.forecast),
	}
}

func meanLeft(st *stats) time.Duration {
	if n := st.left.Load(); n > 0 {
		return time.Duration(st.sessionNanos.Load() / n)
	}
	return 0
}

// pollRate is the status polls the crowd had answered, per second of the sale.
func (st *stats) pollRate() (mean, peak float64, secs []report.Point) {
	var total, n int64
	for i := range st.pollsAt {
		v := st.pollsAt[i].Load()
		if v == 0 && total == 0 {
			continue
		}
		total += v
		n++
		peak = max(peak, float64(v))
		secs = append(secs, report.Point{T: float64(i), V: float64(v)})
	}
	for len(secs) > 0 && secs[len(secs)-1].V == 0 {
		secs = secs[:len(secs)-1]
	}
	if len(secs) > 0 {
		mean = float64(total) / float64(len(secs))
	}
	return mean, peak, secs
}

// offeredPerMinute is the places offered over the minute before each point
// (the serving counter's advance): the admission the dial governs.
func offeredPerMinute(series []point) report.Line {
	l := report.Line{Name: "offered (the admission)"}
	j := 0
	for _, p := range series {
		for j < len(series) && series[j].t < p.t-60 {
			j++
		}
		if p.t-series[j].t >= 30 { // a full-ish minute behind it
			l.Points = append(l.Points, report.Point{T: p.t, V: float64(p.serving-series[j].serving) * 60 / (p.t - series[j].t)})
		}
	}
	return l
}

func writeReport(c config, st *stats, series []point, res []check.Result, capacity int, o outcome) error {
	line := func(name string, f func(p point) int64, dashed bool) report.Line {
		l := report.Line{Name: name, Dashed: dashed}
		for _, p := range series {
			l.Points = append(l.Points, report.Point{T: p.t, V: float64(f(p))})
		}
		return l
	}
	mean, peak, polls := st.pollRate()
	off := st.start.Sub(o.onsale).Seconds()
	for i := range polls {
		polls[i].T += off
	}
	cpu := report.Chart{Title: "CPU per process", Unit: "cores"}
	for i, t := range o.targets {
		l := report.Line{Name: t.Name}
		for _, s := range o.cpu {
			l.Points = append(l.Points, report.Point{T: s.At.Sub(o.onsale).Seconds(), V: s.Cores[i]})
		}
		cpu.Lines = append(cpu.Lines, l)
	}
	r := report.Report{
		Title: fmt.Sprintf("onsale flash sale: %d fans, %d seats", c.fans, capacity),
		Summary: append(o.lines(c, st),
			fmt.Sprintf("Joined %d, admitted %d, holds %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d, payments failed %d, refunded %d, walked away %d; bot requests refused %d.",
				st.joined.Load(), st.admitted.Load(), st.held.Load(), st.taken.Load(), st.limit.Load(), st.paid.Load(), st.confirmed.Load(),
				st.failedPay.Load(), st.refunded.Load(), st.abandoned.Load(), st.botRefused.Load()),
			fmt.Sprintf("Status polls answered: %.0f a second on average over the sale, %.0f in the busiest second.", mean, peak)),
		Charts: []report.Chart{
			{Title: "Queue length", Unit: "fans waiting", Lines: []report.Line{line("queued", func(p point) int64 { return p.queued }, false)}},
			{Title: "Admitted per minute against the dial", Unit: "per minute, over the last minute", Lines: []report.Line{
				offeredPerMinute(series), line("claimed (fans who came in)", func(p point) int64 { return p.admitted }, false),
				line("new_users_per_minute", func(p point) int64 { return p.dial }, true)}},
			{Title: "Active sessions", Lines: []report.Line{line("active", func(p point) int64 { return p.active }, false),
				line("total_active_users", func(p point) int64 { return p.cap }, true)}},
			{Title: "Holds and bookings", Unit: "cumulative", Lines: []report.Line{
				line("holds", func(p point) int64 { return p.holds }, false), line("confirmed bookings", func(p point) int64 { return p.confirmed }, false)}},
			{Title: "Seats", Lines: []report.Line{line("remaining", func(p point) int64 { return p.available }, false),
				line("held", func(p point) int64 { return p.held }, false), line("sold", func(p point) int64 { return p.sold }, false)}},
			{Title: "Status polls answered", Unit: "per second", Lines: []report.Line{{Name: "polls", Points: polls}}},
			cpu,
		},
		Errors: st.errorsByKind,
	}
	for _, x := range res {
		r.Checks = append(r.Checks, report.Check{Name: x.Name, Detail: x.Detail, Pass: x.Pass})
	}
	for route, d := range st.latency {
		slices.Sort(d)
		ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
		r.Latencies = append(r.Latencies, report.Latency{Route: route, Count: len(d), P50: ms(d[len(d)/2]), P90: ms(d[len(d)*9/10]),
			P99: ms(d[len(d)*99/100]), Max: ms(d[len(d)-1])})
	}
	for _, u := range o.procs {
		r.Processes = append(r.Processes, report.Process{Name: u.Name, CPUPeak: u.CPUPeak, CPUMean: u.CPUMean,
			MemPeakMB: float64(u.MemPeak) / (1 << 20), Procs: u.Procs})
	}
	return report.Write(c.report, r)
}

// fan is one member of the crowd.
type fan struct {
	c     config
	st    *stats
	n     int
	cl    *client
	bands []struct {
		Code string `json:"code"`
	}
	admit string
	until time.Time // the session ends
	trace check.Admission
	done  bool // says so when leaving
}

// leave tells the waiting room the fan is done (the queue cookie says who).
// It runs after the sale's context may have ended, so it has its own.
func (f *fan) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := f.cl.do(ctx, "leave", "DELETE", f.url("/v1/events/%d/queue", f.c.event), nil)
	if r.status == 200 && r.body["outcome"] == "ended" {
		f.st.left.Add(1)
		f.st.sessionNanos.Add(int64(time.Since(f.trace.AdmittedAt)))
	}
}

func (f *fan) url(format string, args ...any) string {
	return f.c.gateway + fmt.Sprintf(format, args...)
}

func (f *fan) shop(ctx context.Context) {
	ev := f.c.event
	r := f.cl.do(ctx, "join", "POST", f.url("/v1/events/%d/queue", ev), nil)
	f.trace.Prequeue = r.status == 200 && r.body["state"] == "prequeue"
	f.trace.First = int64(float64Of(r.body["position"]))
	if r.status != 200 {
		f.st.fail(fmt.Sprintf("join %d", r.status))
		return
	}
	f.st.joined.Add(1)
	// Poll at the interval the gateway asks for.
	for {
		wait := time.Duration(float64Of(r.body["poll_after_ms"])) * time.Millisecond
		if r.status != 200 {
			wait = max(2*time.Second, r.retry)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r = f.cl.do(ctx, "status", "GET", f.url("/v1/events/%d/queue/status", ev), nil)
		if r.status == 409 {
			f.st.rejoin.Add(1)
			r = f.cl.do(ctx, "join", "POST", f.url("/v1/events/%d/queue", ev), nil)
			continue
		}
		if r.status == 410 {
			return
		}
		if p := int64(float64Of(r.body["position"])); r.status == 200 && p > 0 {
			f.trace.Position = p
			if f.trace.First == 0 {
				f.trace.First = p
			}
		}
		if r.status == 200 && r.body["state"] == "admitted" {
			f.admit = r.body["admit_token"].(string)
			f.until, _ = time.Parse(time.RFC3339Nano, fmt.Sprint(r.body["admit_expires_at"]))
			f.trace.Position = int64(float64Of(r.body["position"]))
			f.trace.AdmittedAt = time.Now()
			break
		}
		if r.status == 200 && (r.body["state"] == "sold_out" || r.body["state"] == "closed") {
			return
		}
	}
	f.st.admitted.Add(1)
	auth := []string{"Authorization", "Bearer " + f.admit}
	// A fan who is done (tickets bought, payment failed, mind changed, no
	// seats to be had) says so, and the room goes to the next in line; a fan
	// who closes the app mid-hold says nothing and keeps the room until the
	// session runs out.
	defer func() {
		if f.done {
			f.leave()
		}
	}()

	// Browse the map, then hold: best available (60%), seats picked from the
	// map (35%, the map may be a second stale), or too many tickets (5%).
	count := ticketCounts[rand.IntN(len(ticketCounts))]
	m := f.cl.do(ctx, "seatmap", "GET", f.url("/v1/events/%d/seatmap", ev), nil)
	var body map[string]any
	switch p := rand.Float64(); {
	case p < shareOverLimit:
		body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": 9}}
	case p < shareOverLimit+sharePicked && m.status == 200:
		seats := f.pick(ctx, m.body, count)
		if seats == nil {
			body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": count}}
		} else {
			body = map[string]any{"seats": seats}
		}
	default:
		body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": count}}
	}
	var hold map[string]any
	for try := 0; hold == nil; try++ {
		if try == 3 {
			// Three misses: every seat is held or sold. Half give up; the
			// rest keep the page open and watch the map for seats coming
			// back (lapsed holds, failed payments) while the session lasts.
			if rand.IntN(2) == 0 {
				f.done = true
				return
			}
		}
		if try >= 3 {
			seats, soldOut := f.watchMap(ctx, count)
			if soldOut {
				f.done = true // the page says sold out: the fan leaves
				return
			}
			if seats == nil {
				return // the session (or the sale) is over
			}
			body = map[string]any{"seats": seats}
		}
		h := f.cl.do(ctx, "hold", "POST", f.url("/v1/events/%d/holds", ev), body, auth...)
		switch h.status {
		case 201:
			hold = h.body
		case 409:
			f.st.taken.Add(1)
			body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": count}}
		case 422:
			f.st.limit.Add(1)
			body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": 4}}
		default:
			f.done = true
			return
		}
	}
	f.st.held.Add(1)
	id := hold["hold_id"].(string)
	expires, _ := time.Parse(time.RFC3339Nano, hold["expires_at"].(string))

	switch p := rand.Float64(); {
	case p < shareClose: // closes the app: the hold lapses (the sweeper returns it)
		f.st.abandoned.Add(1)
		return
	case p < shareClose+shareRelease: // changes their mind: releases
		f.cl.do(ctx, "release", "DELETE", f.url("/v1/holds/%s", id), nil, auth...)
		f.st.abandoned.Add(1)
		f.done = true
		return
	case p < shareClose+shareRelease+shareCard: // card, and double-clicks Confirm
		key := fmt.Sprintf("confirm-%d-%s", f.n, id)
		var wg sync.WaitGroup
		var got atomic.Int32
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := f.cl.do(ctx, "confirm", "POST", f.url("/v1/holds/%s/confirm", id), map[string]any{"payment_token": "tok_visa"},
					append(auth, "Idempotency-Key", key)...)
				if c.status == 200 || c.status == 202 {
					got.Add(1)
				}
			}()
		}
		wg.Wait()
		f.done = true
		f.st.paid.Add(1)
		if got.Load() > 0 {
			f.st.confirmed.Add(1)
		} else {
			// Declined: the fan lets the seats go rather than leave them held.
			f.st.failedPay.Add(1)
			f.cl.do(ctx, "release", "DELETE", f.url("/v1/holds/%s", id), nil, auth...)
		}
		return
	}
	// UPI: some pay at once, some wait until near the hold's end.
	if rand.Float64() < shareSlowUPI {
		slow := time.Until(expires) - 20*time.Second
		if slow > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(slow):
			}
		}
	}
	key := fmt.Sprintf("pay-%d-%s", f.n, id)
	p := f.cl.do(ctx, "pay", "POST", f.url("/v1/holds/%s/payment", id), map[string]any{"phone": fmt.Sprintf("+9198%08d", f.n)},
		append(auth, "Idempotency-Key", key)...)
	if p.status != 201 {
		if p.status == 410 {
			f.st.abandoned.Add(1)
		}
		f.done = true
		return
	}
	f.st.paid.Add(1)
	bk := int64(float64Of(p.body["booking"].(map[string]any)["booking_id"]))
	// Wait for the outcome (the simulated payer approves after a few seconds).
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		g := f.cl.do(ctx, "booking", "GET", f.url("/v1/bookings/%d", bk), nil, auth...)
		switch g.body["status"] {
		case "CONFIRMED":
			f.st.confirmed.Add(1)
			f.done = true
			return
		case "FAILED":
			// The fan gives up and lets the seats go (the page offers it).
			f.st.failedPay.Add(1)
			f.cl.do(ctx, "release", "DELETE", f.url("/v1/holds/%s", id), nil, auth...)
			f.done = true
			return
		case "REFUND_DUE", "REFUNDED":
			f.st.refunded.Add(1)
			f.done = true
			return
		}
		if g.status == 401 {
			return // the session ended: the outcome still reaches them by SMS
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
		m := f.cl.do(ctx, "seatmap", "GET", f.url("/v1/events/%d/seatmap", f.c.event), nil)
		if m.status == 200 && float64Of(m.body["available_count"]) == 0 {
			s := f.cl.do(ctx, "event stats", "GET", f.url("/v1/events/%d/stats", f.c.event), nil)
			if s.status == 200 && float64Of(s.body["available"]) == 0 && float64Of(s.body["held"]) == 0 {
				return nil, true
			}
			continue
		}
		if m.status != 200 {
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m.body["available"]))
		if seats := pickFree(f.layout(), raw, count); seats != nil {
			return seats, false
		}
	}
}

// pickFree finds count adjacent free seats in one row, starting from a
// random section; failing that, up to count free seats wherever they are.
func pickFree(l layout, raw []byte, count int) []string {
	free := func(p int) bool { return p/8 < len(raw) && raw[p/8]&(0x80>>(p%8)) != 0 }
	var scattered []string
	n := len(l.Sections)
	off := rand.IntN(max(1, n))
	for i := range n {
		sec := l.Sections[(off+i)%n]
		for _, row := range sec.Rows {
			run := 0
			for k, num := range row.Numbers {
				if !free(row.Pos + k) {
					run = 0
					continue
				}
				run++
				if len(scattered) < count {
					scattered = append(scattered, fmt.Sprintf("%s-%s-%d", sec.Code, row.Label, num))
				}
				if run == count {
					var out []string
					for j := k - count + 1; j <= k; j++ {
						out = append(out, fmt.Sprintf("%s-%s-%d", sec.Code, row.Label, row.Numbers[j]))
					}
					return out
				}
			}
		}
	}
	if len(scattered) == 0 {
		return nil
	}
	return scattered
}

func (f *fan) band() string { return f.bands[rand.IntN(len(f.bands))].Code }

// layout is the event's seat layout, immutable: fetched and parsed once for
// the whole crowd (each fan still asks for it, as a browser would, but a
// browser parses only its own copy).
type layout struct {
	Sections []struct {
		Code string `json:"code"`
		Rows []struct {
			Label   string `json:"label"`
			Pos     int    `json:"pos"`
			Numbers []int  `json:"numbers"`
		} `json:"rows"`
	} `json:"sections"`
}

var (
	layoutOnce sync.Once
	theLayout  layout
)

func (f *fan) layout() layout {
	layoutOnce.Do(func() {
		code, body, err := fasthttp.GetTimeout(nil, f.url("/v1/events/%d/layout", f.c.event), 30*time.Second)
		if err == nil && code == 200 {
			json.Unmarshal(body, &theLayout)
		}
	})
	return theLayout
}

// pick chooses count adjacent free seats from the map, as a fan tapping seats
// would; the map may be a second stale, so some lose the race.
func (f *fan) pick(ctx context.Context, m map[string]any, count int) []string {
	raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["available"]))
	f.cl.do(ctx, "layout", "GET", f.url("/v1/events/%d/layout", f.c.event), nil)
	secs := f.layout().Sections
	if len(secs) == 0 {
		return nil
	}
	for try := 0; try < 20; try++ {
		sec := secs[rand.IntN(len(secs))]
		row := sec.Rows[rand.IntN(min(4, len(sec.Rows)))] // the front rows everyone wants
		if len(row.Numbers) < count {
			continue
		}
		start := rand.IntN(len(row.Numbers) - count + 1)
		ok := true
		for k := range count {
			p := row.Pos + start + k
			if p/8 >= len(raw) || raw[p/8]&(0x80>>(p%8)) == 0 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var out []string
		for k := range count {
			out = append(out, fmt.Sprintf("%s-%s-%d", sec.Code, row.Label, row.Numbers[start+k]))
		}
		return out
	}
	return nil
}

func float64Of(v any) float64 { f, _ := v.(float64); return f }

// settle waits (bounded) until no booking is pending at the core.
func settle(ctx context.Context, c config) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		n, err := pendingBookings(ctx, c)
		if err == nil && n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

func summary(c config, st *stats, o outcome) {
	fmt.Printf("\nsummary (%d fans, %d bots):\n", c.fans, c.bots)
	fmt.Printf("  joined %d, admitted %d, held %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d,\n",
		st.joined.Load(), st.admitted.Load(), st.held.Load(), st.taken.Load(), st.limit.Load(), st.paid.Load(), st.confirmed.Load())
	fmt.Printf("  payments failed %d, late payers refunded %d, closed the app or released %d, rejoined after a reset %d\n",
		st.failedPay.Load(), st.refunded.Load(), st.abandoned.Load(), st.rejoin.Load())
	fmt.Printf("  bot requests refused (401/429): %d; server errors: %d %v\n", st.botRefused.Load(), st.errors.Load(), st.errorsByKind)
	for _, l := range o.lines(c, st) {
		fmt.Println("  " + l)
	}
	mean, peak, _ := st.pollRate()
	fmt.Printf("  status polls answered: %.0f/s on average over the sale, %.0f/s in the busiest second\n", mean, peak)
	fmt.Printf("  %-10s %8s %8s %8s %8s\n", "latency", "count", "p50 ms", "p99 ms", "max ms")
	routes := make([]string, 0, len(st.latency))
	for r := range st.latency {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	for _, r := range routes {
		d := st.latency[r]
		slices.Sort(d)
		ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e4) / 100 }
		fmt.Printf("  %-10s %8d %8.1f %8.1f %8.1f\n", r, len(d), ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1]))
	}
	fmt.Printf("  %-22s %6s %9s %9s %9s\n", "process", "procs", "CPU mean", "CPU peak", "mem peak")
	for _, u := range o.procs {
		fmt.Printf("  %-22s %6d %9.2f %9.2f %6.0f MB\n", u.Name, u.Procs, u.CPUMean, u.CPUPeak, float64(u.MemPeak)/(1<<20))
	}
}
