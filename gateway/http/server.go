// Package http is the gateway's edge on fasthttp: join, status polls (no
// store round trip in the steady state), leave, the admit-token keys, the
// operators' dials and stats, the public reads (cached), the pages, health
// and metrics, the API's OpenAPI documents, and the booking API and the
// provider's webhooks passed through to the core.
//
// One file per concern: routes.go (the route table), error.go (the status
// table and the one error writer), queue.go (join, status, leave),
// reply.go (the status reply's JSON, written by hand: every poll's),
// identity.go (who is joining), cookie.go (the fans' cookies: names, Secure
// and __Host- over TLS, their bound, the read buffer they fit), crosssite.go
// (joins and leaves from other sites refused), limit.go (every route's
// per-address or per-token limit: tables of a fixed size), clientaddr.go (who the client is behind
// a load balancer: trusted proxies, PROXY protocol, X-Forwarded-For),
// admin.go (dials and stats, served on the operators' own listener:
// AdminHandler; operators' session tokens, refused ones limited per
// address, the audit log of each change), readcache.go (the bounded,
// one-in-flight cache of public reads), seatmap.go (the public reads
// through it: catalog, event, layout, counts, seat map), pages.go (pages,
// health, keys), openapi.go (the gateway's OpenAPI document, openapi.yaml,
// and the core's, forwarded), proxy.go (the booking API and the
// provider's webhooks, and the core's health as the proxied calls show
// it), rate.go (the
// effective rate's metrics), bounds.go (the per-key structures' sizes as
// metrics), deadline.go (the fans' connections' deadlines, kept and swept
// once a second instead of re-armed every request), hugetable.go (the
// limiters' large tables in huge pages).
package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
	"github.com/onsale/onsale/gateway/health"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/account"
)

// Config is what a Server is built from.
type Config struct {
	// Room is the views of the events; the server's joins, claims and
	// leaves go to the store it is over (Room.Store), never another.
	Room  *room.Room
	Core  *coreclient.Client // the only way to the core
	Queue *token.QueueSigner
	Admit *token.Ring
	// Operators verifies operators' session tokens (the core's, signed
	// at sign-in; account.OperatorAudience), which the operators' API
	// (/admin/v1/*) takes; nil: it refuses everyone. It trusts the keys of
	// Accounts (account.Verifier.Sibling), refreshed with them.
	Operators *account.Verifier
	// Accounts verifies account tokens (the core's, EdDSA, its keys from
	// the core's JWKS, refreshed by the caller). Nil, or no keys yet: an
	// account token is answered 503 unavailable (the gateway cannot tell a
	// good one from a forged one), never 401.
	Accounts *account.Verifier
	// MaxTickets is the ticket limit put in admit tokens (0: the event's).
	MaxTickets int
	// CheckoutURL is the payment provider's hosted checkout, for the pages.
	CheckoutURL string
	// PaymentMethods are the ways the booking page offers to pay ("upi",
	// "card"; nil: both).
	PaymentMethods []string
	// Per client address (joins; polls without a valid token apart) and per
	// queue token (polls): requests per second and burst. Zero takes the
	// defaults: 5/s burst 20 per address, 2/s burst 10 per token. The other
	// routes' per-address limits are multiples of IPRate (limit.go).
	IPRate, TokenRate   float64
	IPBurst, TokenBurst int
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (clientaddr.go); the zero value trusts no one.
	TrustedProxies TrustedProxies
	// Health records the proxied calls to the core and says why the rate
	// is below the dial (the room ticks at its factor); nil: the feedback
	// is off, the line is let in at the dial.
	Health *health.Monitor
	Log    *slog.Logger
}

// Server serves the waiting room.
type Server struct {
	cfg        Config
	store      gateway.Store
	room       *room.Room
	core       *coreclient.Client
	log        *slog.Logger
	limits     *limits
	adminFails *authFailures
	metrics    *metrics
	prom       fasthttp.RequestHandler
	jwks       []byte
	reads      *reads
}

type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.HistogramVec
	joins    *prometheus.CounterVec
	polls    *prometheus.CounterVec
	leaves   *prometheus.CounterVec
	restores *prometheus.CounterVec
	panics   *prometheus.CounterVec

	// Every request and every poll is counted: their series are looked up
	// once each (a label lookup hashes and locks), then read without a lock.
	latency memo[routeCode, prometheus.Observer]
	pollsBy memo[pollKey, prometheus.Counter]
}

type routeCode struct {
	r    *route
	code int
}

type pollKey struct{ state, touched string }

// observe records a request of route r answered code after d.
func (m *metrics) observe(r *route, code int, d time.Duration) {
	m.latency.get(routeCode{r, code}, func(k routeCode) prometheus.Observer {
		return m.requests.WithLabelValues(k.r.name, strconv.Itoa(k.code))
	}).Observe(d.Seconds())
}

// poll counts a status poll answered state; touched says whether Redis was.
func (m *metrics) poll(state, touched string) {
	m.pollsBy.get(pollKey{state, touched}, func(k pollKey) prometheus.Counter {
		return m.polls.WithLabelValues(k.state, k.touched)
	}).Inc()
}

// memo keeps the values made for keys, read without a lock: a copy of the
// map is made for each new key, so it suits a small, fixed set of keys
// (routes and status codes, states), never keys a client chooses.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (c *memo[K, V]) get(k K, make func(K) V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := map[K]V{}
	if old != nil {
		next = maps.Clone(*old)
	}
	v := make(k)
	next[k] = v
	c.m.Store(&next)
	return v
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "onsale_gateway_http_request_duration_seconds",
			Help: "Request latency by route and status.", Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5, 1}},
			[]string{"route", "code"}),
		joins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_joins_total", Help: "Joins by outcome."}, []string{"outcome"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_polls_total", Help: "Status polls by state and whether Redis was touched."},
			[]string{"state", "redis"}),
		leaves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_leaves_total",
			Help: "Fans who said they were done, by outcome (ended: a session's room went back to the line)."}, []string{"outcome"}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_restores_total",
			Help: "Places put back from fans' queue tokens after Redis lost them (a failover), by outcome (restored: a lost write repaired)."},
			[]string{"outcome"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "onsale_gateway_handler_panics_total",
			Help: "Requests whose handler panicked (a bug), answered 500 internal, by route."}, []string{"route"}),
	}
	m.reg.MustRegister(m.requests, m.joins, m.polls, m.leaves, m.restores, m.panics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// NewServer checks c and returns a server; it fails when a dependency is
// missing.
func NewServer(c Config) (*Server, error) {
	switch {
	case c.Room == nil || c.Room.Store() == nil || c.Core == nil:
		return nil, errors.New("gateway http: a Room over a store, and Core, are required")
	case c.Queue == nil || c.Admit == nil:
		return nil, errors.New("gateway http: the queue signer and the admit key ring are required")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	or := func(v, d float64) float64 {
		if v > 0 {
			return v
		}
		return d
	}
	jwks, err := json.Marshal(c.Admit.JWKS())
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	lim, rd, fails := newLimits(or(c.IPRate, 5), int(or(float64(c.IPBurst), 20)), or(c.TokenRate, 2), int(or(float64(c.TokenBurst), 10))), newReads(), newAuthFailures()
	m.reg.MustRegister(&rateCollector{room: c.Room, health: c.Health}, &boundsCollector{reads: rd, limits: lim, adminFails: fails})
	return &Server{cfg: c, store: c.Room.Store(), room: c.Room, core: c.Core, log: c.Log, limits: lim, adminFails: fails,
		metrics: m, prom: fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})),
		jwks: jwks, reads: rd}, nil
}

// Handler returns the fans' fasthttp handler: every route but the admin
// rows (the operators' API and page, /metrics), which it answers 404 as
// unknown routes; AdminHandler serves them, on a listener operators reach
// and fans do not. Each request gets the route table's handler, its error
// answered by writeError, its latency observed by route.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handler(false) }

// AdminHandler returns the operators' fasthttp handler: the admin rows
// (/admin/*, /metrics) and, so the operators' page works from this
// listener alone (it reads the catalog and the counts), every public route
// too. It is meant for a listener of its own (ONSALE_ADMIN_ADDR), never
// the fans' one.
func (s *Server) AdminHandler() fasthttp.RequestHandler { return s.handler(true) }

// handler serves the route table (the admin rows when admin). A handler
// that panics is answered 500 internal, logged with its stack and
// counted: fasthttp does not recover, and one fan's request must never
// take the process, and every fan in it, down.
func (s *Server) handler(admin bool) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := requestTime(ctx)
		r, p := match(ctx, admin)
		if r.name != "status" {
			nameRequest(ctx)
		}
		defer func() {
			if v := recover(); v != nil {
				s.metrics.panics.WithLabelValues(r.name).Inc()
				s.log.Error("handler panicked", "route", r.name, "method", string(ctx.Method()), "path", string(ctx.Path()),
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				ctx.Response.Reset() // nothing half-written goes out
				if r.name != "status" {
					nameRequest(ctx) // the answer's id again (the request keeps it)
				}
				s.writeError(ctx, &gateway.Error{Code: gateway.EInternal, Message: plainMessage[gateway.EInternal]})
			}
			s.metrics.observe(r, ctx.Response.StatusCode(), time.Since(start))
		}()
		if err := r.handle(s, ctx, p); err != nil {
			s.writeError(ctx, err)
		}
	}
}

// requestTime is when fasthttp began to serve the request (it reads the
// clock just before the handler: RequestCtx.Time), so a poll reads the
// clock once more only, for its latency; a request served outside a
// fasthttp.Server (tests) has no such time, and gets now.
func requestTime(ctx *fasthttp.RequestCtx) time.Time {
	if t := ctx.Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}
