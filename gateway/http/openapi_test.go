package http_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/shared/apitest"
)

// Every exchange these tests make with the gateway's handlers is checked
// against the gateway's OpenAPI document (openapi.yaml): the in-memory
// fake's handlers check each call (checked), the Redis tests' clients each
// round trip (apitest's Transport). A handler that answers what the
// document does not say fails the test that made it answer.

// docFile is the gateway's OpenAPI document, embedded and served at /openapi.yaml.
const docFile = "openapi.yaml"

// apiDoc is the document, loaded once for the test binary: the operations
// every test answered add up in it (TestMain's coverage check, apitest.Covered).
var apiDoc = sync.OnceValue(func() *apitest.Doc {
	d, err := apitest.Load(docFile)
	if err != nil {
		panic(err) // TestOpenAPIDocument says what is wrong with it
	}
	return d.Outside(outside)
})

// outside says whether the route table serves method and path with a row
// the document leaves out on purpose: pages and static files, and what is
// forwarded to the core (the core's document describes it).
func outside(method, path string) bool { return outsideRow(gwhttp.RouteName(method, path)) }

// outsideRow says whether the route table's rows of this name are outside
// the document.
func outsideRow(name string) bool {
	switch name {
	case "page", "static", "proxy", "operator", "webhook":
		return true
	}
	return false
}

// check fails tb when the exchange departs from the document.
func check(tb testing.TB, x apitest.Exchange) {
	tb.Helper()
	if err := apiDoc().Check(x); err != nil {
		tb.Errorf("openapi: %v", err)
	}
}

// checked returns h checking each exchange it serves against the document.
// The request is read before h runs: a forwarded request is rewritten.
func checked(tb testing.TB, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		x := requestOf(ctx)
		h(ctx)
		x.Status = ctx.Response.StatusCode()
		x.RespHeader = http.Header{}
		for k, v := range ctx.Response.Header.All() {
			x.RespHeader.Add(string(k), string(v))
		}
		x.RespBody = bytes.Clone(ctx.Response.Body())
		check(tb, x)
	}
}

// requestOf is the request half of ctx's exchange.
func requestOf(ctx *fasthttp.RequestCtx) apitest.Exchange {
	req := &ctx.Request
	host := string(req.Host())
	if host == "" {
		host = "gateway"
	}
	u, err := url.Parse("http://" + host + string(req.URI().RequestURI()))
	if err != nil {
		u = &url.URL{Scheme: "http", Host: host, Path: string(req.URI().Path())}
	}
	x := apitest.Exchange{Method: string(req.Header.Method()), URL: u, Header: http.Header{}, Body: bytes.Clone(req.Body())}
	for k, v := range req.Header.All() {
		x.Header.Add(string(k), string(v))
	}
	return x
}

// covered runs the tests, then apitest.Covered's check of the document.
type covered struct{ m *testing.M }

func (c covered) Run() int { return apitest.Covered(c.m, apiDoc) }

// The document is a valid OpenAPI 3.1 document (apitest.Load checks), the
// gateway serves it as it is on disk, and every route of the table that is
// not a page or forwarded to the core is in it with its method.
func TestOpenAPIDocument(t *testing.T) {
	fresh, err := apitest.Load(docFile)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, openDials())
	r := f.call("GET", "/openapi.yaml", "")
	if r.status != 200 || r.raw != string(want) || r.header.Get("Content-Type") != "application/yaml" {
		t.Errorf("GET /openapi.yaml = %d %q, %d bytes; want 200 application/yaml, %s as it is (%d bytes)",
			r.status, r.header.Get("Content-Type"), len(r.raw), docFile, len(want))
	}
	// A fresh document has answered nothing: its unanswered operations are
	// all of them.
	documented := map[string]bool{}
	paths := map[string]bool{}
	for _, op := range fresh.Unanswered() {
		_, path, _ := strings.Cut(op, " ")
		documented[op], paths[path] = true, true
	}
	n := 0
	for _, row := range gwhttp.RouteLimits() {
		if row.Name == "unmatched" || outsideRow(row.Name) {
			continue
		}
		n++
		if row.Method == "" {
			// Any method: the route's methods above it, or one answered
			// alike whatever the method (GET is the one documented).
			if !paths[row.Pattern] {
				t.Errorf("route %s (%s) is not in %s", row.Pattern, row.Name, docFile)
			}
			continue
		}
		if !documented[row.Method+" "+row.Pattern] {
			t.Errorf("route %s %s (%s) is not in %s", row.Method, row.Pattern, row.Name, docFile)
		}
	}
	if n == 0 {
		t.Fatal("no route of the table was checked")
	}
	// The control: the check catches an answer the document does not
	// allow (a required member missing; a status it does not list).
	x := apitest.Exchange{Method: "GET", URL: &url.URL{Scheme: "http", Host: "gateway", Path: "/web-config.json"}, Status: 200,
		RespHeader: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"x"}, "Cache-Control": {"public, max-age=60"}},
		RespBody:   []byte(`{"checkout_url":"https://pay.example/","payment_methods":["upi","card"]}`)}
	if err := fresh.Check(x); err != nil {
		t.Fatalf("the control's good answer: %v", err)
	}
	for _, bad := range []func(*apitest.Exchange){
		func(x *apitest.Exchange) { x.RespBody = []byte(`{"checkout":"https://pay.example/"}`) },
		func(x *apitest.Exchange) {
			x.RespBody = []byte(`{"checkout_url":"https://pay.example/","payment_methods":["cash"]}`)
		},
		func(x *apitest.Exchange) { x.Status = 418 },
		func(x *apitest.Exchange) { x.RespHeader = http.Header{"Content-Type": {"application/json"}} },
	} {
		y := x
		bad(&y)
		if err := fresh.Check(y); err == nil {
			t.Errorf("%d %v %s passed the document's check", y.Status, y.RespHeader, y.RespBody)
		}
	}
}

// The core's document is the core's: the core is asked for its GET
// /openapi.yaml once, and its answer comes back as it is, then from the
// cache (an integrator's reads cannot take the core's connections).
func TestCoreDocument(t *testing.T) {
	const doc = "openapi: 3.1.0\ninfo: {title: onsale core, version: \"1\"}\npaths: {}\n"
	f := newFakeWith(t, openDials(), fakeOpts{core: func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.URL.Path != "/openapi.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("Cache-Control", "public, max-age=300")
		w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id")) // as the core does
		fmt.Fprint(w, doc)
	}})
	r := f.call("GET", "/openapi/core.yaml", "")
	if r.status != 200 || r.raw != doc || r.header.Get("Content-Type") != "application/yaml" {
		t.Fatalf("GET /openapi/core.yaml = %d %q %q; want the core's document", r.status, r.header.Get("Content-Type"), r.raw)
	}
	if got := f.asked.Load(); got == nil || got.URL.Path != "/openapi.yaml" {
		t.Fatalf("the core was asked %v; want GET /openapi.yaml", got)
	}
	asks := f.asks.Load()
	for range 5 {
		if r := f.call("GET", "/openapi/core.yaml", ""); r.status != 200 || r.raw != doc {
			t.Fatalf("again: %d %q", r.status, r.raw)
		}
	}
	if n := f.asks.Load() - asks; n != 0 {
		t.Errorf("5 more reads asked the core %d times; want 0 (cached for its max-age)", n)
	}
}

// The admit tokens' keys and the pages' configuration.
func TestKeysAndWebConfig(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{edit: func(c *gwhttp.Config) {
		c.CheckoutURL, c.PaymentMethods = "https://pay.example/checkout", []string{"card"}
	}})
	r := f.call("GET", "/.well-known/jwks.json", "")
	if keys, _ := r.body["keys"].([]any); r.status != 200 || len(keys) != 1 {
		t.Errorf("GET /.well-known/jwks.json = %d %s; want one key", r.status, r.raw)
	}
	if r := f.call("GET", "/web-config.json", ""); r.status != 200 || r.body["checkout_url"] != "https://pay.example/checkout" ||
		fmt.Sprint(r.body["payment_methods"]) != "[card]" {
		t.Errorf("GET /web-config.json = %d %s; want the checkout URL and the one way to pay", r.status, r.raw)
	}
}
