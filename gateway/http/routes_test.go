package http

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"
)

// Each request goes to the one route the table says, with its captures.
func TestRouteTable(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		name         string
		id, file     string
	}{
		{"GET", "/healthz", "healthz", "", ""},
		{"HEAD", "/readyz", "readyz", "", ""},
		{"GET", "/metrics", "metrics", "", ""},
		{"GET", "/.well-known/jwks.json", "jwks", "", ""},
		{"POST", "/v1/events/12/queue", "join", "12", ""},
		{"DELETE", "/v1/events/12/queue", "leave", "12", ""},
		{"PUT", "/v1/events/12/queue", "join", "12", ""}, // 405
		{"GET", "/v1/events/12/queue/status", "status", "12", ""},
		{"POST", "/v1/events/12/queue/status", "status", "12", ""}, // 405
		{"GET", "/v1/events/12/layout", "layout", "12", ""},
		{"GET", "/v1/events/12/stats", "stats", "12", ""},
		{"GET", "/v1/events/12/seatmap", "seatmap", "12", ""},
		{"POST", "/v1/events/12/seatmap", "proxy", "", ""}, // not ours: the core's
		{"GET", "/admin/v1/events/12", "admin", "12", ""},
		{"PATCH", "/admin/v1/events/12", "admin", "12", ""},
		{"DELETE", "/admin/v1/events/12", "admin", "12", ""},
		{"GET", "/events/12", "page", "", "12"},
		{"GET", "/events/12/book", "page", "", "12"},
		{"GET", "/admin", "page", "", ""},
		{"GET", "/admin/", "page", "", ""},
		{"GET", "/static/app.css", "static", "", "app.css"},
		{"GET", "/web-config.json", "page", "", ""},
		{"GET", "/openapi.yaml", "openapi", "", ""},
		{"GET", "/openapi/core.yaml", "openapi", "", ""},
		{"POST", "/openapi.yaml", "openapi", "", ""},
		{"GET", "/v1/events", "catalog", "", ""},
		{"GET", "/v1/events/12", "event", "12", ""},
		{"POST", "/v1/events/12", "proxy", "", ""},
		{"GET", "/v1/events/", "proxy", "", ""},
		{"POST", "/v1/webhooks/payments", "webhook", "", ""},
		{"GET", "/v1/webhooks/payments", "webhook", "", ""},
		{"POST", "/v1/webhooks/stripe", "webhook", "", ""},
		{"POST", "/v1/webhooks/razorpay", "webhook", "", ""},
		{"POST", "/v1/webhooks/other", "unmatched", "", ""},
		{"POST", "/v1/holds", "proxy", "", ""},
		{"POST", "/v1/holds/9/payments", "proxy", "", ""},
		{"GET", "/v1/bookings/3", "proxy", "", ""},
		{"POST", "/v1/auth/code", "proxy", "", ""},
		{"POST", "/v1/auth/verify", "proxy", "", ""},
		{"GET", "/v1/me", "proxy", "", ""},
		{"PATCH", "/v1/me", "proxy", "", ""},
		{"GET", "/v1/me/bookings", "proxy", "", ""},
		{"POST", "/v1/gate/scan", "proxy", "", ""},
		{"GET", "/v1/gate/offline", "proxy", "", ""},
		{"POST", "/v1/gate/sync", "proxy", "", ""},
		{"GET", "/v1/meow", "unmatched", "", ""},
		{"GET", "/me", "page", "", ""},
		{"GET", "/tickets/41", "page", "", "41"},
		{"GET", "/signin", "page", "", ""},
		{"GET", "/gate", "page", "", ""},
		{"GET", "/gate-sw.js", "page", "", ""},
		{"POST", "/gate", "unmatched", "", ""},
		{"GET", "/tickets", "unmatched", "", ""},
		{"POST", "/events/12", "unmatched", "", ""},
		{"GET", "/v1", "unmatched", "", ""},
		{"GET", "/", "page", "", ""},
		{"GET", "/browse", "page", "", ""},
		{"POST", "/", "unmatched", "", ""},
		{"GET", "/v1/queue", "unmatched", "", ""},
		// Literal-only routes match their one path exactly.
		{"GET", "/healthz/", "unmatched", "", ""},
		{"GET", "/readyz/", "unmatched", "", ""},
		{"GET", "/metrics/", "unmatched", "", ""},
		{"GET", "/metrics/x", "unmatched", "", ""},
		{"GET", "/.well-known/jwks.json/", "unmatched", "", ""},
		{"GET", "/web-config.json/", "unmatched", "", ""},
		{"GET", "/admin/x", "unmatched", "", ""},
		// Patterns with captures ignore a trailing slash, as before.
		{"GET", "/v1/events/12/queue/status/", "status", "12", ""},
		{"GET", "/events/12/", "page", "", "12"},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(tc.method)
		ctx.Request.SetRequestURI(tc.path)
		r, p := match(&ctx, true)
		if r.name != tc.name || p.id != tc.id || p.name != tc.file {
			t.Errorf("%s %s = route %q id %q name %q; want %q %q %q", tc.method, tc.path, r.name, p.id, p.name, tc.name, tc.id, tc.file)
		}
	}
}

// Every error code declared in gateway/error.go has its one status.
func TestStatusTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../error.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				code, _ := strconv.Unquote(v.(*ast.BasicLit).Value)
				n++
				if st, ok := status[code]; !ok || st < 400 || st > 599 {
					t.Errorf("error code %q has status %d in the table; want one 4xx or 5xx", code, st)
				}
			}
		}
	}
	if n != len(status) || n == 0 {
		t.Errorf("gateway/error.go declares %d codes, the status table maps %d", n, len(status))
	}
}
