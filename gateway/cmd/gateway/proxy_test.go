package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/onsale/onsale/gateway/coreclient"
	"github.com/onsale/onsale/gateway/redis/redistest"
	"github.com/onsale/onsale/shared/admission"
)

// startMain runs the real Main on 127.0.0.1:0 with args, its core a fake that
// records the X-Onsale-Client-Addr of each request it is passed (not the
// gateway's own: its health probes and key fetches); the returned func
// gives the last one seen.
func startMain(t *testing.T, args ...string) (addr string, lastClient func() string) {
	t.Helper()
	var mu sync.Mutex
	var seen string
	core := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" && r.URL.Path != "/.well-known/jwks.json" {
			mu.Lock()
			seen = r.Header.Get(coreclient.ClientAddrHeader)
			mu.Unlock()
		}
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(core.Close)
	forgetHealth(t, redistest.Addrs(t, false), core.URL)
	key, _ := admission.GenerateKey()
	keyFile := t.TempDir() + "/admit.key"
	admission.WritePrivateKeyFile(keyFile, key)
	env := map[string]string{"ONSALE_QUEUE_SECRET": strings.Repeat("s", 32), "ONSALE_LOG_LEVEL": "error"}
	m := NewMain()
	m.Getenv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := m.ParseFlags(append([]string{"-addr", "127.0.0.1:0", "-redis", redistest.Addrs(t, false), "-admit-keys", keyFile,
		"-core-url", core.URL}, args...)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		m.Close()
	})
	return m.Addr().String(), func() string { mu.Lock(); defer mu.Unlock(); return seen }
}

// send dials the gateway from the local address from (a loopback address:
// Linux answers on all of 127.0.0.0/8), writes the PROXY v2 header naming
// proxySrc when it is not empty, then one request with xff as
// X-Forwarded-For when not empty. It returns the status, or 0 when the
// gateway closed the connection without an answer.
func send(t *testing.T, gw, from, proxySrc, xff string) int {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", gw)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if proxySrc != "" {
		h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(proxySrc), Port: 40000}, c.RemoteAddr())
		if _, err := h.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	req := "GET /v1/events/1/whatever HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n"
	if xff != "" {
		req += "X-Forwarded-For: " + xff + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0
	}
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

// Behind HAProxy with send-proxy-v2, the address the core is told (and the
// per-address limits count) is the PROXY header's source, and only when the
// header comes from a trusted proxy. The controls: an untrusted peer's
// PROXY header is refused and its X-Forwarded-For ignored, and without
// trusted proxies the same X-Forwarded-For is not believed either.
func TestClientAddrBehindALoadBalancer(t *testing.T) {
	t.Run("PROXY protocol", func(t *testing.T) {
		gw, client := startMain(t, "-trusted-proxies", "127.0.0.1", "-proxy-protocol", "on")
		for _, tc := range []struct {
			name, from, proxySrc, xff string
			status                    int
			want                      string
		}{
			{"trusted proxy: the header's source", "127.0.0.1", "203.0.113.7", "", 200, "203.0.113.7"},
			{"trusted proxy, IPv6 source", "127.0.0.1", "2001:db8::7", "", 200, "2001:db8::7"},
			{"the fan's own X-Forwarded-For is not believed", "127.0.0.1", "203.0.113.8", "192.0.2.1", 200, "203.0.113.8"},
			{"trusted proxy without the header: refused", "127.0.0.1", "", "", 0, ""},
			{"untrusted peer's PROXY header: refused", "127.0.0.2", "203.0.113.9", "", 0, ""},
			{"untrusted peer without a header: served as itself", "127.0.0.2", "", "192.0.2.1", 200, "127.0.0.2"},
		} {
			before := client()
			status := send(t, gw, tc.from, tc.proxySrc, tc.xff)
			if status != tc.status {
				t.Errorf("%s: status %d; want %d", tc.name, status, tc.status)
			}
			if got := client(); tc.want != "" && got != tc.want || tc.want == "" && got != before {
				t.Errorf("%s: the core was told %s; want %q", tc.name, got, tc.want)
			}
		}
	})
	t.Run("X-Forwarded-For", func(t *testing.T) {
		gw, client := startMain(t, "-trusted-proxies", "127.0.0.1/32,10.0.0.0/8")
		for _, tc := range []struct{ name, from, xff, want string }{
			{"from a trusted proxy: the rightmost untrusted hop", "127.0.0.1", "6.6.6.6, 198.51.100.4, 10.1.1.1", "198.51.100.4"},
			{"from an untrusted peer: ignored", "127.0.0.2", "198.51.100.4", "127.0.0.2"},
		} {
			if status := send(t, gw, tc.from, "", tc.xff); status != 200 {
				t.Errorf("%s: status %d; want 200", tc.name, status)
			}
			if got := client(); got != tc.want {
				t.Errorf("%s: the core was told %s; want %s", tc.name, got, tc.want)
			}
		}
	})
	t.Run("control: no trusted proxies", func(t *testing.T) {
		gw, client := startMain(t)
		if status := send(t, gw, "127.0.0.1", "", "198.51.100.4"); status != 200 || client() != "127.0.0.1" {
			t.Errorf("X-Forwarded-For with no trusted proxies: %d, the core was told %s; want 200, 127.0.0.1", status, client())
		}
		if status := send(t, gw, "127.0.0.1", "203.0.113.7", ""); status == 200 && client() == "203.0.113.7" {
			t.Error("a PROXY header was believed with PROXY protocol off")
		}
	})
}

// The per-address limit counts the PROXY header's source: two fans behind
// one trusted proxy have a bucket each, so one fan over the limit does not
// stop the other.
func TestPerAddressLimitBehindAProxy(t *testing.T) {
	gw, _ := startMain(t, "-trusted-proxies", "127.0.0.1", "-proxy-protocol", "on", "-ip-rate", "1")
	join := func(src string) int {
		c, err := net.Dial("tcp", gw)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(src), Port: 1}, c.RemoteAddr()).WriteTo(c)
		fmt.Fprint(c, "POST /v1/events/999999999/queue HTTP/1.1\r\nHost: gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	limited := false
	for range 10 { // burst 4 at 1/s
		if join("203.0.113.1") == 429 {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("203.0.113.1 was never limited: the harness cannot see the limit")
	}
	if code := join("203.0.113.2"); code == 429 {
		t.Errorf("another fan behind the same proxy = 429; want its own bucket")
	}
}
