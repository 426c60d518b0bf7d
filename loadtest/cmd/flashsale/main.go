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
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/report"
)

type config struct {
	gateway, paysim, providerKey, adminToken, dbURL string
	event                                           int64
	fans, bots                                      int
	onsaleIn, tail, deadline                        time.Duration
	perMinute, maxActive                            int
	sweep, session                                  time.Duration
	report                                          string
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
	flag.DurationVar(&c.tail, "tail", 30*time.Second, "late arrivals keep coming this long after onsale")
	flag.DurationVar(&c.deadline, "deadline", 4*time.Minute, "stop the sale after this long, whatever is left")
	flag.IntVar(&c.perMinute, "per-minute", 3000, "the new_users_per_minute dial")
	flag.IntVar(&c.maxActive, "max-active", 600, "the total_active_users dial")
	flag.DurationVar(&c.session, "session", 2*time.Minute, "the session_seconds dial: how long an admitted fan may shop")
	flag.StringVar(&c.report, "report", "", "write the HTML report here")
	flag.DurationVar(&c.sweep, "sweep", 5*time.Second, "the core's sweep interval (for the checker's margin)")
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

type client struct {
	base string
	http *http.Client
	st   *stats
}

type reply struct {
	status int
	body   map[string]any
	retry  time.Duration
}

func (c *client) do(ctx context.Context, route, method, url string, body any, hdr ...string) reply {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, r)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	t0 := time.Now()
	resp, err := c.http.Do(req)
	c.st.observe(route, time.Since(t0))
	if err != nil {
		c.st.fail("transport")
		return reply{status: 0}
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode}
	json.NewDecoder(resp.Body).Decode(&out.body)
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		var n int
		fmt.Sscan(ra, &n)
		out.retry = time.Duration(n) * time.Second
	}
	if resp.StatusCode >= 500 {
		c.st.fail(fmt.Sprintf("%s %d", route, resp.StatusCode))
	}
	return out
}

func run(ctx context.Context, c config) error {
	st := &stats{latency: map[string][]time.Duration{}, errorsByKind: map[string]int{}}
	transport := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512, IdleConnTimeout: 30 * time.Second}
	admin := &client{base: c.gateway, http: &http.Client{Transport: transport, Timeout: 10 * time.Second}, st: st}
	adminHdr := []string{"Authorization", "Bearer " + c.adminToken}
	// The operators set the dials: the pre-queue opens now, onsale shortly.
	onsale := time.Now().Add(c.onsaleIn).Truncate(time.Second)
	admin.do(ctx, "admin", "GET", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), nil, adminHdr...) // the room learns the event
	r := admin.do(ctx, "admin", "PATCH", fmt.Sprintf("%s/admin/v1/events/%d", c.gateway, c.event), map[string]any{
		"prequeue_at": time.Now().Add(-time.Second), "onsale_at": onsale, "new_users_per_minute": c.perMinute,
		"total_active_users": c.maxActive, "session_seconds": c.session.Seconds(), "claim_seconds": 30}, adminHdr...)
	if r.status != 200 {
		return fmt.Errorf("setting the dials: %d %v", r.status, r.body)
	}
	var ev struct {
		Capacity int `json:"capacity"`
		Bands    []struct {
			Code string `json:"code"`
		} `json:"price_bands"`
	}
	b, _ := json.Marshal(admin.do(ctx, "event", "GET", fmt.Sprintf("%s/v1/events/%d", c.gateway, c.event), nil).body)
	json.Unmarshal(b, &ev)
	fmt.Printf("flashsale: %d fans for %d seats on event %d; onsale at %s; dials %d/min, %d active at most\n",
		c.fans, ev.Capacity, c.event, onsale.Format("15:04:05"), c.perMinute, c.maxActive)
	fmt.Printf("  Little's law: ~4 tickets an order, ~half the admitted buy -> sell-out in about %.1f min at %d/min\n",
		float64(ev.Capacity)/4/0.5/float64(c.perMinute), c.perMinute)

	sale, stop := context.WithTimeout(ctx, c.deadline)
	defer stop()
	var samples []check.Sample
	var series []point
	var smu sync.Mutex
	var soldOutAt atomic.Int64
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
			num := func(m map[string]any, k string) int64 { v, _ := m[k].(float64); return int64(v) }
			smu.Lock()
			series = append(series, point{t: time.Since(onsale).Seconds(), queued: num(s, "queued"), admitted: num(s, "admitted_per_minute"),
				dial: num(d, "new_users_per_minute"), active: num(s, "active"), held: num(cs.body, "held"), sold: num(cs.body, "sold"),
				available: num(cs.body, "available"), holds: st.held.Load(), confirmed: st.confirmed.Load()})
			samples = append(samples, check.Sample{At: asOf, Active: num(s, "active"), Offers: num(s, "offered_unclaimed"),
				AdmittedPerMinute: num(s, "admitted_per_minute"), Queued: num(s, "queued"),
				Dial: num(d, "new_users_per_minute"), Cap: num(d, "total_active_users"), Serving: num(s, "serving")})
			smu.Unlock()
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
			bot := &client{base: c.gateway, http: &http.Client{Transport: transport, Timeout: 5 * time.Second}, st: st}
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

	// The crowd: 30% before onsale, 50% in the first ten seconds, 20% over the tail.
	var wgFans sync.WaitGroup
	traces := make([]*check.Admission, c.fans)
	for i := range c.fans {
		var at time.Duration
		switch p := rand.Float64(); {
		case p < 0.3:
			at = time.Duration(rand.Float64() * float64(c.onsaleIn-time.Second))
		case p < 0.8:
			at = c.onsaleIn + time.Duration(rand.Float64()*float64(10*time.Second))
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
			jar, _ := cookiejar.New(nil)
			f := &fan{c: c, st: st, n: i, bands: ev.Bands, cl: &client{base: c.gateway, http: &http.Client{Transport: transport, Jar: jar, Timeout: 15 * time.Second}, st: st}}
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
	summary(c, st, saleTook, time.Duration(soldOutAt.Load()))
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
		err := writeReport(c, st, series, res, ev.Capacity, saleTook, time.Duration(soldOutAt.Load()))
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
	t                                                                       float64
	queued, admitted, dial, active, held, sold, available, holds, confirmed int64
}

func writeReport(c config, st *stats, series []point, res []check.Result, capacity int, took, soldOut time.Duration) error {
	line := func(name string, f func(p point) int64, dashed bool) report.Line {
		l := report.Line{Name: name, Dashed: dashed}
		for _, p := range series {
			l.Points = append(l.Points, report.Point{T: p.t, V: float64(f(p))})
		}
		return l
	}
	predicted := float64(capacity) / 4 / 0.5 / float64(c.perMinute) * 60
	outcome := fmt.Sprintf("not sold out when the %v deadline came (%.0f s after onsale)", c.deadline, took.Seconds())
	if soldOut > 0 {
		outcome = fmt.Sprintf("sold out %.0f s after onsale", soldOut.Seconds())
	}
	r := report.Report{
		Title: fmt.Sprintf("onsale flash sale: %d fans, %d seats", c.fans, capacity),
		Summary: []string{
			fmt.Sprintf("Dials: %d admitted a minute, %d sessions at most, sessions of %v. %s; Little's-law prediction from the dials (about 4 tickets an order, half the admitted buy): %.0f s — with sessions capped the sale is bound by total_active_users / session length (%.0f a minute) instead.",
				c.perMinute, c.maxActive, c.session, outcome, predicted, float64(c.maxActive)/c.session.Minutes()),
			fmt.Sprintf("Joined %d, admitted %d, holds %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d, payments failed %d, refunded %d, walked away %d; bot requests refused %d.",
				st.joined.Load(), st.admitted.Load(), st.held.Load(), st.taken.Load(), st.limit.Load(), st.paid.Load(), st.confirmed.Load(),
				st.failedPay.Load(), st.refunded.Load(), st.abandoned.Load(), st.botRefused.Load()),
		},
		Charts: []report.Chart{
			{Title: "Queue length", Unit: "fans waiting", Lines: []report.Line{line("queued", func(p point) int64 { return p.queued }, false)}},
			{Title: "Admitted per minute against the dial", Unit: "per minute", Lines: []report.Line{
				line("measured", func(p point) int64 { return p.admitted }, false), line("dial", func(p point) int64 { return p.dial }, true)}},
			{Title: "Active sessions", Lines: []report.Line{line("active", func(p point) int64 { return p.active }, false)}},
			{Title: "Holds and bookings", Unit: "cumulative", Lines: []report.Line{
				line("holds", func(p point) int64 { return p.holds }, false), line("confirmed bookings", func(p point) int64 { return p.confirmed }, false)}},
			{Title: "Seats", Lines: []report.Line{line("remaining", func(p point) int64 { return p.available }, false),
				line("held", func(p point) int64 { return p.held }, false), line("sold", func(p point) int64 { return p.sold }, false)}},
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
	trace check.Admission
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

	// Browse the map, then hold: best available (60%), seats picked from the
	// map (35%, the map may be a second stale), or too many tickets (5%).
	count := []int{1, 2, 2, 3, 4, 4, 4, 4, 5, 6}[rand.IntN(10)]
	m := f.cl.do(ctx, "seatmap", "GET", f.url("/v1/events/%d/seatmap", ev), nil)
	var body map[string]any
	switch p := rand.Float64(); {
	case p < 0.05:
		body = map[string]any{"best_available": map[string]any{"band": f.band(), "count": 9}}
	case p < 0.40 && m.status == 200:
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
	for try := 0; try < 3 && hold == nil; try++ {
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
			return
		}
	}
	if hold == nil {
		return
	}
	f.st.held.Add(1)
	id := hold["hold_id"].(string)
	expires, _ := time.Parse(time.RFC3339Nano, hold["expires_at"].(string))

	switch p := rand.Float64(); {
	case p < 0.10: // closes the app: the hold lapses (the sweeper returns it)
		f.st.abandoned.Add(1)
		return
	case p < 0.15: // changes their mind: releases
		f.cl.do(ctx, "release", "DELETE", f.url("/v1/holds/%s", id), nil, auth...)
		f.st.abandoned.Add(1)
		return
	case p < 0.30: // card, and double-clicks Confirm
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
		f.st.paid.Add(1)
		if got.Load() > 0 {
			f.st.confirmed.Add(1)
		}
		return
	}
	// UPI: some pay at once, some wait until near the hold's end.
	if rand.Float64() < 0.15 {
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
			return
		case "FAILED":
			f.st.failedPay.Add(1)
			return
		case "REFUND_DUE", "REFUNDED":
			f.st.refunded.Add(1)
			return
		}
		if g.status == 401 {
			return // the session ended: the outcome still reaches them by SMS
		}
	}
}

func (f *fan) band() string { return f.bands[rand.IntN(len(f.bands))].Code }

// pick chooses count adjacent free seats from the map, as a fan tapping seats
// would; the map may be a second stale, so some lose the race.
func (f *fan) pick(ctx context.Context, m map[string]any, count int) []string {
	raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(m["available"]))
	l := f.cl.do(ctx, "layout", "GET", f.url("/v1/events/%d/layout", f.c.event), nil)
	secs, _ := l.body["sections"].([]any)
	if len(secs) == 0 {
		return nil
	}
	for try := 0; try < 20; try++ {
		sec := secs[rand.IntN(len(secs))].(map[string]any)
		rows := sec["rows"].([]any)
		row := rows[rand.IntN(min(4, len(rows)))].(map[string]any) // the front rows everyone wants
		nums := row["numbers"].([]any)
		pos := int(float64Of(row["pos"]))
		if len(nums) < count {
			continue
		}
		start := rand.IntN(len(nums) - count + 1)
		ok := true
		for k := range count {
			p := pos + start + k
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
			out = append(out, fmt.Sprintf("%s-%s-%d", sec["code"], row["label"], int(float64Of(nums[start+k]))))
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

func summary(c config, st *stats, took, soldOut time.Duration) {
	fmt.Printf("\nsummary (%d fans, %d bots):\n", c.fans, c.bots)
	fmt.Printf("  joined %d, admitted %d, held %d (lost a seat race %d, over the limit %d), paid %d, confirmed %d,\n",
		st.joined.Load(), st.admitted.Load(), st.held.Load(), st.taken.Load(), st.limit.Load(), st.paid.Load(), st.confirmed.Load())
	fmt.Printf("  payments failed %d, late payers refunded %d, closed the app or released %d, rejoined after a reset %d\n",
		st.failedPay.Load(), st.refunded.Load(), st.abandoned.Load(), st.rejoin.Load())
	fmt.Printf("  bot requests refused (401/429): %d; server errors: %d %v\n", st.botRefused.Load(), st.errors.Load(), st.errorsByKind)
	if soldOut > 0 {
		fmt.Printf("  sold out %.0f s after onsale\n", soldOut.Seconds())
	} else {
		fmt.Printf("  not sold out after %.0f s\n", took.Seconds())
	}
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
	_ = strings.TrimSpace
}
