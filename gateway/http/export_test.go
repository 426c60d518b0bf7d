package http

import "github.com/valyala/fasthttp"

// Internals the external tests look at.

// RouteLimit is a route table row as TestRouteTableLimits reads it.
type RouteLimit struct {
	Method, Pattern, Name string
	Limited               bool
}

// RouteLimits is the route table's rows and whether each names a limit.
func RouteLimits() []RouteLimit {
	var rs []RouteLimit
	for _, r := range append(routes, unmatched) {
		rs = append(rs, RouteLimit{Method: r.method, Pattern: r.pattern, Name: r.name, Limited: r.limit != limitNone})
	}
	return rs
}

// CacheEntries is how many answers and refusals s's read caches hold.
func CacheEntries(s *Server) int {
	n := 0
	for _, c := range []*readCache{s.reads.events, s.reads.layouts, s.reads.counts, s.reads.bits} {
		a, r, _ := c.size()
		n += a + r
	}
	return n
}

// MaxRefusals bounds each read cache's refusals.
const MaxRefusals = maxRefusals

// RouteName is the name of the route table's row that serves method and
// path on the operators' listener (which serves every row); "unmatched"
// when none does.
func RouteName(method, path string) string {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.URI().SetPath(path)
	r, _ := match(&ctx, true)
	return r.name
}
