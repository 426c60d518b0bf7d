package coreclient

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/shared/tlstest"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		addr string
		tls  bool
		bad  bool
	}{
		{in: "http://127.0.0.1:8081", addr: "127.0.0.1:8081"},
		{in: "http://core/", addr: "core:80"},
		{in: "https://core.example", addr: "core.example:443", tls: true},
		{in: "https://core.example:8443/", addr: "core.example:8443", tls: true},
		{in: "https://[::1]", addr: "[::1]:443", tls: true},
		{in: "core:8081", bad: true},
		{in: "ftp://core", bad: true},
		{in: "https://", bad: true},
		{in: "https://core/api", bad: true},
		{in: "https://u:p@core", bad: true},
	} {
		addr, tls, err := ParseURL(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseURL(%q) = %q %v; want an error", tc.in, addr, tls)
			}
			continue
		}
		if err != nil || addr != tc.addr || tls != tc.tls {
			t.Errorf("ParseURL(%q) = %q %v %v; want %q %v", tc.in, addr, tls, err, tc.addr, tc.tls)
		}
	}
}

// An https core URL without a port: the gateway's reads and the booking
// API it passes through both go to port 443 over TLS, the core's
// certificate verified (here against a test CA). The core is a TLS-only
// server; the dial is redirected to it, recording the address asked for.
func TestHTTPSCoreWithoutPort(t *testing.T) {
	ca := tlstest.New(t)
	var mu sync.Mutex
	var sawTLS []bool
	core := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sawTLS = append(sawTLS, r.TLS != nil)
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/events/1":
			fmt.Fprint(w, `{"onsale_at":"2030-01-01T00:00:00Z","starts_at":"2030-01-02T00:00:00Z"}`)
		case "/v1/holds":
			fmt.Fprint(w, `{"hold":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	core.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server}}
	core.StartTLS()
	defer core.Close()

	c := New("https://localhost", nil)
	var dialed []string
	for _, hc := range []*fasthttp.HostClient{c.proxy, c.cache, c.reads} {
		hc.TLSConfig = &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"}
		hc.Dial = func(addr string) (net.Conn, error) {
			mu.Lock()
			dialed = append(dialed, addr)
			mu.Unlock()
			return net.Dial("tcp", core.Listener.Addr().String())
		}
	}
	if _, err := c.Event(context.Background(), 1); err != nil {
		t.Fatalf("Event over https = %v", err)
	}
	if _, err := c.Read(context.Background(), "/v1/events/1", "event"); err != nil {
		t.Fatalf("Read over https = %v", err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/v1/holds") // as a fan's request reaches the gateway: http
	ctx.Request.Header.SetMethod(fasthttp.MethodPost)
	if err := c.Proxy(&ctx, "192.0.2.1"); err != nil {
		t.Fatalf("Proxy over https = %v", err)
	}
	if ctx.Response.StatusCode() != 200 || string(ctx.Response.Body()) != `{"hold":1}` {
		t.Fatalf("Proxy answered %d %q; want the core's 200", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) != 3 || dialed[0] != "localhost:443" || dialed[1] != "localhost:443" || dialed[2] != "localhost:443" {
		t.Errorf("dialed %v; want localhost:443 for the event, the public read and the proxy", dialed)
	}
	if len(sawTLS) != 3 || !sawTLS[0] || !sawTLS[1] || !sawTLS[2] {
		t.Errorf("the core saw TLS %v; want every request over TLS", sawTLS)
	}
}
