package http

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
)

// handler serves one route; an error it returns is answered by writeError.
type handler func(s *Server, ctx *fasthttp.RequestCtx, p params) error

// route is one row of the route table. A pattern is slash-separated
// segments: a literal, {id} (an event id), {name} (any one segment), or a
// final * (any number of segments, none included). A pattern of literals
// only matches exactly that path (/healthz/ is not /healthz: a health
// check or a key URL has one spelling); a pattern with captures ignores a
// trailing slash. Method "" matches any. Name labels the route in the
// latency metric.
type route struct {
	method, pattern, name string
	limit                 limitKind // the bucket family its requests spend (limit.go); none: the handler limits
	handle                handler
	// admin rows (the operators' API and page, /metrics) are served only
	// by AdminHandler, on a listener of their own: a fan's listener
	// answers them 404 as if they did not exist.
	admin bool
	segs  []string
	exact bool // literals only: the path must be the pattern
}

// routes is the gateway's surface, matched top to bottom: the first row
// whose pattern and method both match serves the request. A row without a
// method after a route's methods answers the others 405. The public reads
// (catalog, event, layout, counts, seat map) are served from the gateway's
// caches (seatmap.go); the rest of the booking API (holds, payments,
// bookings), sign-in (/v1/auth), the fan's account (/v1/me), the gate's
// check-in (/v1/gate) and the provider's webhooks go to the core. Rows
// marked admin (the operators' API and page, /metrics) are served only on
// the operators' listener (AdminHandler).
var routes = compile([]route{
	{method: "", pattern: "/healthz", name: "healthz", limit: limitPage, handle: (*Server).healthz},
	{method: "", pattern: "/readyz", name: "readyz", limit: limitPage, handle: (*Server).readyz},
	{method: "", pattern: "/metrics", name: "metrics", limit: limitPage, handle: (*Server).metricsPage, admin: true},
	{method: "", pattern: "/.well-known/jwks.json", name: "jwks", limit: limitPage, handle: (*Server).jwksPage},

	{method: "POST", pattern: "/v1/events/{id}/queue", name: "join", handle: (*Server).join},
	{method: "DELETE", pattern: "/v1/events/{id}/queue", name: "leave", handle: (*Server).leave},
	{method: "", pattern: "/v1/events/{id}/queue", name: "join", limit: limitPage, handle: notAllowed("POST to join the queue, DELETE to leave it")},
	{method: "GET", pattern: "/v1/events/{id}/queue/status", name: "status", handle: (*Server).status},
	{method: "", pattern: "/v1/events/{id}/queue/status", name: "status", limit: limitPage, handle: notAllowed("GET the queue status")},
	{method: "GET", pattern: "/v1/events", name: "catalog", limit: limitRead, handle: (*Server).catalog},
	{method: "GET", pattern: "/v1/events/{id}", name: "event", limit: limitRead, handle: (*Server).event},
	{method: "GET", pattern: "/v1/events/{id}/layout", name: "layout", limit: limitRead, handle: (*Server).layout},
	{method: "GET", pattern: "/v1/events/{id}/stats", name: "stats", limit: limitRead, handle: (*Server).counts},
	{method: "GET", pattern: "/v1/events/{id}/seatmap", name: "seatmap", limit: limitRead, handle: (*Server).seatmap},

	{method: "GET", pattern: "/admin/v1/events/{id}", name: "admin", limit: limitPage, handle: (*Server).adminGet, admin: true},
	{method: "PATCH", pattern: "/admin/v1/events/{id}", name: "admin", limit: limitPage, handle: (*Server).adminPatch, admin: true},
	{method: "", pattern: "/admin/v1/events/{id}", name: "admin", limit: limitPage, handle: (*Server).adminOther, admin: true},
	// The core's operators' API (sign-in, layouts, shows, audit), passed
	// through on the operators' listener only: the console talks to one
	// origin, and the core authenticates and audits each call.
	{method: "", pattern: "/operator/v1/*", name: "operator", limit: limitPage, handle: (*Server).proxy, admin: true},

	{method: "GET", pattern: "/events/{name}", name: "page", limit: limitPage, handle: page("waiting.html")},
	{method: "GET", pattern: "/events/{name}/book", name: "page", limit: limitPage, handle: page("book.html")},
	{method: "GET", pattern: "/browse", name: "page", limit: limitPage, handle: page("browse.html")},
	{method: "GET", pattern: "/", name: "page", limit: limitPage, handle: page("browse.html")},
	{method: "GET", pattern: "/me", name: "page", limit: limitPage, handle: page("me.html")},
	{method: "GET", pattern: "/tickets/{name}", name: "page", limit: limitPage, handle: page("tickets.html")},
	{method: "GET", pattern: "/signin", name: "page", limit: limitPage, handle: page("signin.html")},
	{method: "GET", pattern: "/gate", name: "page", limit: limitPage, handle: page("gate.html")},
	// The scanner's service worker, at the root so that its scope can be /gate.
	{method: "GET", pattern: "/gate-sw.js", name: "page", limit: limitPage, handle: page("gate-sw.js")},
	{method: "GET", pattern: "/admin", name: "page", limit: limitPage, handle: page("admin.html"), admin: true},
	{method: "GET", pattern: "/admin/", name: "page", limit: limitPage, handle: page("admin.html"), admin: true},
	{method: "GET", pattern: "/admin/shows", name: "page", limit: limitPage, handle: page("shows.html"), admin: true},
	{method: "GET", pattern: "/static/{name}", name: "static", limit: limitPage, handle: (*Server).static},
	{method: "GET", pattern: "/web-config.json", name: "page", limit: limitPage, handle: (*Server).webConfig},

	// The API's documents: the gateway's own (openapi.go), and the core's
	// read from the core (cached: openapi.go), which integrators cannot reach.
	{method: "GET", pattern: "/openapi.yaml", name: "openapi", limit: limitPage, handle: (*Server).openapiDocument},
	{method: "GET", pattern: "/openapi/core.yaml", name: "openapi", limit: limitPage, handle: (*Server).coreDocument},
	{method: "", pattern: "/openapi.yaml", name: "openapi", limit: limitPage, handle: notAllowed("GET the document")},
	{method: "", pattern: "/openapi/core.yaml", name: "openapi", limit: limitPage, handle: notAllowed("GET the document")},
	// The payment provider's webhooks, on to the core, which verifies their
	// signatures: the core need not face the internet (webhook). One path
	// per provider the core has an adapter for (the simulator's is
	// /payments); the core answers the one it uses, 404 the others.
	{method: "POST", pattern: "/v1/webhooks/payments", name: "webhook", limit: limitWebhook, handle: (*Server).webhook},
	{method: "", pattern: "/v1/webhooks/payments", name: "webhook", limit: limitPage, handle: notAllowed("POST a webhook")},
	{method: "POST", pattern: "/v1/webhooks/stripe", name: "webhook", limit: limitWebhook, handle: (*Server).webhook},
	{method: "", pattern: "/v1/webhooks/stripe", name: "webhook", limit: limitPage, handle: notAllowed("POST a webhook")},
	{method: "POST", pattern: "/v1/webhooks/razorpay", name: "webhook", limit: limitWebhook, handle: (*Server).webhook},
	{method: "", pattern: "/v1/webhooks/razorpay", name: "webhook", limit: limitPage, handle: notAllowed("POST a webhook")},
	{method: "", pattern: "/v1/events/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy},
	{method: "", pattern: "/v1/holds/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy},
	{method: "", pattern: "/v1/bookings/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy},
	{method: "", pattern: "/v1/auth/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy},
	{method: "", pattern: "/v1/me/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy}, // /v1/me itself too
	{method: "", pattern: "/v1/gate/*", name: "proxy", limit: limitAPI, handle: (*Server).proxy},
})

// unmatched answers what no row matches.
var unmatched = compile([]route{{name: "unmatched", limit: limitPage, handle: func(*Server, *fasthttp.RequestCtx, params) error {
	return gateway.Errorf(gateway.ENotFound, "no such route")
}}})[0]

// compile readies the rows: their patterns split, their handlers behind
// their limits.
func compile(rs []route) []route {
	for i := range rs {
		rs[i].segs = split(rs[i].pattern)
		rs[i].exact = !strings.ContainsAny(rs[i].pattern, "{*")
		if kind, h := rs[i].limit, rs[i].handle; kind != limitNone {
			rs[i].handle = func(s *Server, ctx *fasthttp.RequestCtx, p params) error {
				if err := limit(s.limits.of(kind), s.clientKey(ctx)); err != nil {
					return err
				}
				return h(s, ctx, p)
			}
		}
	}
	return rs
}

func split(path string) []string { return splitInto(nil, path) }

// splitInto appends path's slash-separated segments (leading and trailing
// slashes trimmed) to segs.
func splitInto(segs []string, path string) []string {
	path = strings.Trim(path, "/")
	for {
		seg, rest, ok := strings.Cut(path, "/")
		segs = append(segs, seg)
		if !ok {
			return segs
		}
		path = rest
	}
}

// params are the pattern's captures. The id is a view of the request's
// path (no copy on a poll), good until the handler returns; the name is
// the handler's own.
type params struct{ id, name string }

// event is the {id} capture as an event id: a positive integer, or the
// route names no event.
func (p params) event() (int64, error) {
	id, err := strconv.ParseInt(p.id, 10, 64)
	if err != nil || id <= 0 {
		return 0, gateway.Errorf(gateway.ENotFound, "no such event")
	}
	return id, nil
}

// match finds the request's route and captures; admin says whether the
// admin rows are served (AdminHandler) or skipped (Handler).
func match(ctx *fasthttp.RequestCtx, admin bool) (*route, params) {
	raw := ctx.Path()
	path := unsafe.String(unsafe.SliceData(raw), len(raw)) // read during the match; only the name is copied out
	var buf [8]string                                      // a request's segments, without an allocation (the route table's have at most 6)
	segs := splitInto(buf[:0], path)
	method := ctx.Method()
	for i := range routes {
		r := &routes[i]
		if (r.method != "" && r.method != string(method)) || (r.admin && !admin) {
			continue
		}
		if r.exact {
			if path == r.pattern {
				return r, params{}
			}
			continue
		}
		if p, ok := r.match(segs); ok {
			p.name = strings.Clone(p.name) // the handler's own; the id stays a view
			return r, p
		}
	}
	return &unmatched, params{}
}

func (r *route) match(segs []string) (params, bool) {
	var p params
	for i, pat := range r.segs {
		if pat == "*" && i == len(r.segs)-1 {
			return p, true
		}
		if i >= len(segs) {
			return p, false
		}
		switch pat {
		case "{id}":
			p.id = segs[i]
		case "{name}":
			p.name = segs[i]
		default:
			if segs[i] != pat {
				return p, false
			}
		}
	}
	return p, len(segs) == len(r.segs)
}

// notAllowed answers a route's other methods.
func notAllowed(allowed string) handler {
	return func(*Server, *fasthttp.RequestCtx, params) error {
		return gateway.Errorf(gateway.EMethod, "%s", allowed)
	}
}
