package http_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	gwhttp "github.com/onsale/onsale/gateway/http"
)

// The edge under hostile traffic, on the in-memory store with a stand-in
// core: every route is limited, addresses of one IPv6 /64 share a bucket,
// polls without a token spend no joins, and the public reads reach the core
// once per key however many ask at once, honouring its Cache-Control.

// slowLimits is a gateway whose per-address limits refill too slowly for
// a test's speed to matter: joins and tokenless polls 0.05/s, burst 20;
// the other routes 1/s, burst 4 (limit.go: 20x the rate, 4 s of it).
// (At 1/s for joins, the other routes took 20/s with a burst of 80: 100
// requests on a busy machine under -race took over a second, and all 100
// passed, CI saw it once on /v1/events/7.)
func slowLimits(c *gwhttp.Config) { c.IPRate, c.IPBurst = 0.05, 20 }

// A route that is not the queue's is limited per address too: health,
// pages, the public reads and the proxied booking API each refuse 429
// past their burst, and the proxied holds past it never reach the core. A fan at another address is not refused (the control).
func TestEveryRouteLimited(t *testing.T) {
	for _, path := range []string{"/healthz", "/static/nope.js", "/v1/events/7", "/v1/events/7/layout", "/v1/holds/1", "/v1/me", "/nope"} {
		t.Run(path, func(t *testing.T) {
			f := newFakeWith(t, openDials(), fakeOpts{edit: slowLimits})
			f.call("GET", "/healthz", "") // the room is ready: what reaches the core now is the loop's
			f.asks.Store(0)
			limited := 0
			for range 100 {
				if r := f.callFrom("192.0.2.1", "GET", path, ""); r.status == 429 {
					if r.body["error"] != gateway.ERateLimited || r.header.Get("Retry-After") == "" {
						t.Fatalf("GET %s refused %s without rate_limited and Retry-After", path, r.raw)
					}
					limited++
				}
			}
			if limited == 0 {
				t.Fatalf("100 GET %s from one address in a row were never limited", path)
			}
			if n := f.asks.Load(); strings.HasPrefix(path, "/v1/holds") && n != int64(100-limited) {
				t.Fatalf("GET %s: %d requests reached the core, %d refused; want only the %d served", path, n, limited, 100-limited)
			}
			if r := f.callFrom("192.0.2.2", "GET", path, ""); r.status == 429 {
				t.Fatalf("GET %s from another address = 429; want its own bucket", path)
			}
		})
	}
}

// Every row of the route table names a limit but the queue's own, which
// limit by what the request carries.
func TestRouteTableLimits(t *testing.T) {
	for _, r := range gwhttp.RouteLimits() {
		self := (r.Name == "join" || r.Name == "status" || r.Name == "leave") && r.Method != ""
		if r.Limited == self {
			t.Errorf("%s %s (%s): limited %v; want %v", r.Method, r.Pattern, r.Name, r.Limited, !self)
		}
	}
}

// IPv6 clients are keyed by their /64: an attacker who owns one cannot
// take a fresh bucket per address. Another /64 is not refused.
func TestIPv6KeyedBySlash64(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{edit: slowLimits})
	limited := 0
	for i := range 100 {
		if r := f.callFrom(fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1), "GET", "/healthz", ""); r.status == 429 {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("100 requests from 100 addresses of one /64 were never limited")
	}
	if r := f.callFrom("2001:db8:1:3::1", "GET", "/healthz", ""); r.status != 200 {
		t.Fatalf("another /64 = %d %s; want 200", r.status, r.raw)
	}
}

// Polls without a valid token (what a hostile page in the fan's browser
// can send from the fan's address) are limited apart from joins: once
// they are refused 429, the fan at that address can still join.
func TestTokenlessPollsSpendNoJoins(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{edit: slowLimits})
	status := fmt.Sprintf("/v1/events/%d/queue/status", fakeEvent)
	limited := false
	for range 40 {
		if r := f.callFrom("192.0.2.9", "GET", status, "", "Authorization", "Bearer forged"); r.status == 429 {
			limited = true
		}
	}
	if !limited {
		t.Fatal("40 forged polls from one address were never limited")
	}
	if j := f.callFrom("192.0.2.9", "POST", fmt.Sprintf("/v1/events/%d/queue", fakeEvent), ""); j.status != 200 {
		t.Fatalf("join after the forged polls = %d %s; want 200: they spent the fan's joins", j.status, j.raw)
	}
}

// However many fans read the catalog, an event, a layout or the counts
// at once, after a restart (a cold cache), the core is asked once per key;
// later reads within the core's max-age are served from the cache, and a
// no-store answer is never kept.
func TestPublicReadsOneInFlight(t *testing.T) {
	var gate atomic.Pointer[chan struct{}]  // closed: the core answers
	var catalogQuery atomic.Pointer[string] // the query of the core's last catalog read
	open := make(chan struct{})
	close(open)
	gate.Store(&open)
	f := newFakeWith(t, openDials(), fakeOpts{core: func(w http.ResponseWriter, r *http.Request) {
		<-*gate.Load() // a slow core: every fan arrives while the first is asked
		if r.URL.Path == "/v1/events" {
			catalogQuery.Store(&r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/events/9":
			w.Header().Set("Cache-Control", "no-store")
		case r.URL.Path == "/v1/events/404":
			w.WriteHeader(404)
			fmt.Fprint(w, `{"error":"not_found","message":"no event"}`)
			return
		default:
			w.Header().Set("Cache-Control", "public, max-age=60")
		}
		fmt.Fprint(w, coreRead(r.URL.Path))
	}})
	for _, path := range []string{"/v1/events", "/v1/events?city=Oslo&x=1", "/v1/events/7", "/v1/events/7/layout", "/v1/events/7/stats", "/v1/events/404"} {
		t.Run(path, func(t *testing.T) {
			f.asks.Store(0)
			release := make(chan struct{})
			gate.Store(&release)
			var wg sync.WaitGroup
			answers := make(chan resp, 50)
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers <- f.callFrom(fmt.Sprintf("192.0.2.%d", i+1), "GET", path, "")
				}()
			}
			time.Sleep(100 * time.Millisecond) // let the crowd arrive (the property holds however many did)
			close(release)
			wg.Wait()
			close(answers)
			gate.Store(&open) // later asks answer at once
			for a := range answers {
				want := 200
				if strings.HasSuffix(path, "/404") {
					want = 404
				}
				if a.status != want {
					t.Fatalf("GET %s = %d %s; want %d", path, a.status, a.raw, want)
				}
			}
			if n := f.asks.Load(); n != 1 {
				t.Fatalf("50 concurrent GET %s asked the core %d times; want once", path, n)
			}
			if r := f.call("GET", path, ""); f.asks.Load() != 1 {
				t.Fatalf("GET %s again = %d %s: the core asked again within its max-age", path, r.status, r.raw)
			}
		})
	}
	t.Run("the query the core reads, in one spelling", func(t *testing.T) {
		f.asks.Store(0)
		if r := f.call("GET", "/v1/events?x=2&city=Oslo", ""); r.status != 200 || f.asks.Load() != 0 {
			t.Fatalf("the same filters spelled otherwise asked the core: %d %s", r.status, r.raw)
		}
		if r := f.call("GET", "/v1/events?city=Oslo", ""); r.status != 200 || *catalogQuery.Load() != "city=oslo" {
			t.Fatalf("catalog = %d, the core asked with %q; want only the filters it reads", r.status, *catalogQuery.Load())
		}
	})
	t.Run("no-store is not kept", func(t *testing.T) {
		f.asks.Store(0)
		f.call("GET", "/v1/events/9", "")
		f.call("GET", "/v1/events/9", "")
		if n := f.asks.Load(); n != 2 {
			t.Fatalf("two reads of a no-store answer asked the core %d times; want 2", n)
		}
	})
}

// The catalog's filters are read as the core reads them before they
// become cache keys: a city in any case is one key (the core matches it in
// any case), and a filter the core refuses (kind outside concert and movie,
// a date not YYYY-MM-DD) or no city's name is 400 invalid_request, naming
// it, with no core query. The control: the same filters, well formed, do
// reach the core.
func TestCatalogFiltersValidated(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{core: func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=60")
		fmt.Fprint(w, coreRead(r.URL.Path))
	}})
	for _, tc := range []struct{ query, names string }{
		{"kind=Concert", "kind"},
		{"kind=theatre", "kind"},
		{"date=2030-1-1", "date"},
		{"date=2030-02-30", "date"},
		{"date=tomorrow", "date"},
		{"city=" + strings.Repeat("x", 101), "city"},
		{"city=%00oslo", "city"},
		{"city=%ff", "city"},
	} {
		r := f.call("GET", "/v1/events?"+tc.query, "")
		if msg, _ := r.body["message"].(string); r.status != 400 || r.body["error"] != "invalid_request" || !strings.Contains(msg, tc.names) {
			t.Errorf("GET /v1/events?%s = %d %s; want 400 invalid_request naming %s", tc.query, r.status, r.raw, tc.names)
		}
	}
	if n := f.asks.Load(); n != 0 {
		t.Fatalf("bad filters asked the core %d times; want none", n)
	}
	for _, q := range []string{"city=OSLO&kind=concert&date=2030-01-02", "city=oslo&kind=concert&date=2030-01-02", "date=2030-01-02&city=Oslo&kind=concert"} {
		if r := f.call("GET", "/v1/events?"+q, ""); r.status != 200 || f.asked.Load().URL.RawQuery != "city=oslo&date=2030-01-02&kind=concert" {
			t.Fatalf("GET /v1/events?%s = %d %s, the core asked %q; want city=oslo&date=2030-01-02&kind=concert", q, r.status, r.raw, f.asked.Load().URL.RawQuery)
		}
	}
	if n := f.asks.Load(); n != 1 {
		t.Fatalf("one city in three spellings asked the core %d times; want once", n)
	}
}

// A loop over random event ids keeps the gateway's caches bounded: no
// entry per id that is not an event, the refusals capped, and a real
// event's answers not pushed out by them.
func TestRandomEventIDsBounded(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{core: func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events/7/stats" || r.URL.Path == "/v1/events/7" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "public, max-age=60")
			fmt.Fprint(w, coreRead(r.URL.Path))
			return
		}
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"not_found","message":"no event"}`)
	}})
	for _, p := range []string{"/v1/events/7", "/v1/events/7/stats"} {
		if r := f.call("GET", p, ""); r.status != 200 {
			t.Fatalf("GET %s = %d %s", p, r.status, r.raw)
		}
	}
	const n = 5000
	for i := range n {
		f.unchecked = i > 0 // the first round is checked against the document
		id := rand.Int64N(1<<62) + 1
		for _, suffix := range []string{"", "/stats", "/layout", "/seatmap"} {
			if r := f.callFrom(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "GET", fmt.Sprintf("/v1/events/%d%s", id, suffix), ""); r.status != 404 {
				t.Fatalf("GET random id %d%s = %d %s; want 404", id, suffix, r.status, r.raw)
			}
		}
	}
	// The event and its counts, and the refusals of three caches (the
	// seat map's "none" is never kept).
	f.unchecked = false
	entries, bound := gwhttp.CacheEntries(f.server), 2+3*gwhttp.MaxRefusals
	if entries > bound {
		t.Fatalf("after %d random ids the caches hold %d entries; want at most %d", n, entries, bound)
	}
	m := f.call("GET", "/metrics", "").raw
	for _, want := range []string{`onsale_gateway_read_cache_entries{cache="counts",kind="answer"} 1`,
		fmt.Sprintf(`onsale_gateway_read_cache_entries{cache="counts",kind="refusal"} %d`, gwhttp.MaxRefusals),
		`onsale_gateway_read_cache_entries{cache="bits",kind="refusal"} 0`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grep(m, "read_cache"))
		}
	}
	f.asks.Store(0)
	for _, p := range []string{"/v1/events/7", "/v1/events/7/stats"} {
		if r := f.call("GET", p, ""); r.status != 200 || f.asks.Load() != 0 {
			t.Fatalf("GET %s after the random ids = %d, core asked %d times: pushed out", p, r.status, f.asks.Load())
		}
	}
}

// The provider's webhooks reach the core through the gateway as sent
// (signature header and body untouched; the core verifies), and a body
// over the bound is refused before the core sees it.
func TestWebhookProxied(t *testing.T) {
	var got struct {
		sig, body string
	}
	f := newFakeWith(t, openDials(), fakeOpts{core: func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, r.ContentLength)
		_, _ = r.Body.Read(b)
		got.sig, got.body = r.Header.Get("Onsale-Signature"), string(b)
		fmt.Fprint(w, `{"received":true}`)
	}})
	body := `{"type":"payment.succeeded","data":{"id":"pay_1"}}`
	r := f.call("POST", "/v1/webhooks/payments", body, "Onsale-Signature", "t=1,v1=abc")
	if r.status != 200 || got.sig != "t=1,v1=abc" || got.body != body {
		t.Fatalf("webhook = %d %s; the core saw signature %q body %q", r.status, r.raw, got.sig, got.body)
	}
	f.asks.Store(0)
	big := `{"x":"` + strings.Repeat("x", 40<<10) + `"}`
	if r := f.call("POST", "/v1/webhooks/payments", big); r.status != fasthttp.StatusRequestEntityTooLarge || r.body["error"] != gateway.ETooLarge || f.asks.Load() != 0 {
		t.Fatalf("a 40 KiB webhook = %d %s, core asked %d times; want 413 body_too_large, unasked", r.status, r.raw, f.asks.Load())
	}
	if r := f.call("GET", "/v1/webhooks/payments", ""); r.status != 405 || f.asks.Load() != 0 {
		t.Fatalf("GET webhooks = %d %s; want 405", r.status, r.raw)
	}
}
