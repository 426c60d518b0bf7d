package http_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/onsale/onsale/gateway"
	gwhttp "github.com/onsale/onsale/gateway/http"
)

// browser is a fan's browser against the in-memory gateway: a cookie jar
// (names to values, as Set-Cookie leaves them) and a peer address.
type browser struct {
	f    *fake
	jar  map[string]string
	peer string
}

func newBrowser(f *fake) *browser {
	return &browser{f: f, jar: map[string]string{}, peer: "192.0.2.1"}
}

func (b *browser) cookieHeader() string {
	var parts []string
	for k, v := range b.jar {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, "; ")
}

// call sends a request with the jar's cookies from b.peer and keeps the
// answer's cookies; it returns the answer and its Set-Cookie headers.
func (b *browser) call(method, path string, hdr ...string) (resp, []*http.Cookie) {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI("http://onsale.example" + path)
	if c := b.cookieHeader(); c != "" {
		req.Header.Set("Cookie", c)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(b.peer), Port: 40000}, nil)
	b.f.handler(&ctx)
	r := resp{status: ctx.Response.StatusCode(), header: http.Header{}, raw: string(ctx.Response.Body())}
	for k, v := range ctx.Response.Header.All() {
		r.header.Add(string(k), string(v))
	}
	json.Unmarshal(ctx.Response.Body(), &r.body)
	set := (&http.Response{Header: r.header}).Cookies()
	for _, c := range set {
		if c.MaxAge < 0 {
			delete(b.jar, c.Name)
		} else {
			b.jar[c.Name] = c.Value
		}
	}
	return r, set
}

func cookieNamed(cs []*http.Cookie, name string) *http.Cookie {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Item 5 of issue 13: another site's page cannot join (nor leave) for a
// fan. The browser says where a request comes from (Sec-Fetch-Site, else
// Origin); a refused join answers 403 cross_site, sets no cookie and takes
// no place (the next fan's join is still the line's first). Requests of
// the gateway's own pages, and of clients that are not browsers, go on.
func TestCrossSiteJoinRefused(t *testing.T) {
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	for _, tc := range []struct {
		name    string
		hdr     []string
		refused bool
	}{
		{name: "Sec-Fetch-Site cross-site", hdr: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}, refused: true},
		{name: "Sec-Fetch-Site cross-site, no Origin", hdr: []string{"Sec-Fetch-Site", "cross-site"}, refused: true},
		{name: "another site's Origin (no Sec-Fetch-Site)", hdr: []string{"Origin", "https://evil.example"}, refused: true},
		{name: "an Origin on the same name but another host", hdr: []string{"Origin", "http://onsale.example.evil.example"}, refused: true},
		{name: "an opaque Origin (sandboxed frame)", hdr: []string{"Origin", "null"}, refused: true},
		{name: "the gateway's own page", hdr: []string{"Sec-Fetch-Site", "same-origin", "Origin", "http://onsale.example"}},
		{name: "the gateway's own Origin (no Sec-Fetch-Site)", hdr: []string{"Origin", "http://onsale.example"}},
		{name: "the gateway's own host over TLS at a balancer", hdr: []string{"Origin", "https://onsale.example"}},
		{name: "a sibling subdomain of the operator's", hdr: []string{"Sec-Fetch-Site", "same-site", "Origin", "https://www.example"}},
		{name: "typed in the address bar", hdr: []string{"Sec-Fetch-Site", "none"}},
		{name: "not a browser (no Origin, no Sec-Fetch-Site)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, openDials())
			b := newBrowser(f)
			r, set := b.call("POST", path, tc.hdr...)
			if !tc.refused {
				if r.status != 200 || r.body["position"] != 1.0 {
					t.Fatalf("join = %d %s; want 200 at place 1", r.status, r.raw)
				}
				return
			}
			if r.status != 403 || r.body["error"] != gateway.ECrossSite {
				t.Fatalf("join = %d %s; want 403 %s", r.status, r.raw, gateway.ECrossSite)
			}
			if len(set) != 0 {
				t.Errorf("a refused join set cookies %v", set)
			}
			// Nothing changed: the next fan's join is still the first.
			if r, _ := newBrowser(f).call("POST", path); r.body["position"] != 1.0 {
				t.Errorf("the next join = %s; want place 1 (the refused join took none)", r.raw)
			}
		})
	}
	t.Run("leave", func(t *testing.T) {
		f := newFake(t, openDials())
		b := newBrowser(f)
		if r, _ := b.call("POST", path); r.status != 200 {
			t.Fatalf("join = %d %s", r.status, r.raw)
		}
		if r, _ := b.call("DELETE", path, "Sec-Fetch-Site", "cross-site"); r.status != 403 || r.body["error"] != gateway.ECrossSite {
			t.Fatalf("cross-site leave = %d %s; want 403 %s", r.status, r.raw, gateway.ECrossSite)
		}
		if r, _ := b.call("GET", path+"/status"); r.status != 200 || r.body["state"] != gateway.StateWaiting {
			t.Fatalf("status after a cross-site leave = %d %s; want still waiting", r.status, r.raw)
		}
	})
}

// Item 5: a join never replaces a live place of another identity in the
// browser's queue cookie: an account joining in a browser whose cookie
// holds a guest's place gets its token in the answer and the cookie keeps
// the guest's. Once that place is given back (or its session is over), a
// join writes the cookie again.
func TestJoinKeepsAnotherIdentitysPlace(t *testing.T) {
	f := newFake(t, openDials())
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	name := fmt.Sprintf("onsale_q_%d", fakeEvent)
	acct := []string{"Authorization", "Bearer " + accountJWT(t, "9", true)}
	b := newBrowser(f)
	guest, _ := b.call("POST", path)
	if guest.status != 200 || b.jar[name] == "" {
		t.Fatalf("guest join = %d %s; want a place in the cookie", guest.status, guest.raw)
	}
	a, set := b.call("POST", path, acct...)
	if a.status != 200 || a.body["queue_token"] == nil {
		t.Fatalf("account join = %d %s", a.status, a.raw)
	}
	if c := cookieNamed(set, name); c != nil {
		t.Fatalf("the account's join wrote the queue cookie %q over the guest's place", c.Value)
	}
	if b.jar[name] != guest.body["queue_token"] {
		t.Fatal("the cookie no longer holds the guest's place")
	}
	// The page gives the guest place back (its own token), then joins
	// again: the cookie now takes the account's place.
	if r, _ := b.call("DELETE", path, "Authorization", "Bearer "+guest.body["queue_token"].(string)); r.status != 200 {
		t.Fatalf("leave = %d %s", r.status, r.raw)
	}
	again, set := b.call("POST", path, acct...)
	if c := cookieNamed(set, name); again.status != 200 || c == nil || c.Value != a.body["queue_token"] && c.Value != again.body["queue_token"] {
		t.Fatalf("the join after the guest left = %d %s, cookie %v; want the account's place in the cookie", again.status, again.raw, c)
	}
	// A place whose session is over is no one's: a join replaces it.
	over, err := f.queue.Sign(fakeEvent, "vis:someone", 3, time.Now().Add(-time.Minute).UnixMilli(), epochOf(t, f))
	if err != nil {
		t.Fatal(err)
	}
	b.jar[name] = over
	if _, set := b.call("POST", path, acct...); cookieNamed(set, name) == nil {
		t.Fatal("a join kept a cookie whose session is over instead of writing its own place")
	}
}

// browserHeaders are what a desktop Chromium sends with a fetch besides
// cookies and Authorization (about 1 KB).
const browserHeaders = "Host: onsale.example\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\nAccept-Language: en-GB,en-US;q=0.9,en;q=0.8,fr;q=0.7\r\n" +
	"Sec-Ch-Ua: \"Chromium\";v=\"156\", \"Not.A/Brand\";v=\"99\"\r\nSec-Ch-Ua-Mobile: ?0\r\nSec-Ch-Ua-Platform: \"Linux\"\r\n" +
	"Sec-Fetch-Dest: empty\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Site: same-origin\r\n" +
	"Referer: https://onsale.example/events/100/waiting?utm_source=newsletter&utm_medium=email&utm_campaign=onsale\r\n" +
	"Connection: close\r\n"

// siteCookies are an operator's own cookies on the sale's domain: an
// analytics suite and a consent record (about 1.2 KB).
var siteCookies = "_ga=GA1.1.1234567890.1764547200; _ga_ABCDEF1234=GS1.1.1764547200.1.1.1764547300.0.0.0; " +
	"_gid=GA1.2.987654321.1764547200; _fbp=fb.1.1764547200000.1234567890; " +
	"OptanonConsent=isGpcEnabled=0&datestamp=Tue+Dec+01+2026+08%3A00%3A00+GMT%2B0530&version=202411.1.0&browserGpcFlag=0" +
	"&isIABGlobal=false&hosts=&consentId=" + strings.Repeat("a1b2c3d4-", 4) + "&interactionCount=1&isAnonUser=1&landingPath=NotLandingPage" +
	"&groups=C0001%3A1%2CC0002%3A1%2CC0003%3A1%2CC0004%3A0&AwaitingReconsent=false; OptanonAlertBoxClosed=2026-12-01T02:30:00.000Z; " +
	"_hjSessionUser_1234567=" + strings.Repeat("eyJpZCI6IjEyMzQ1Njc4OTAiLCJjcmVhdGVkIjoxNzY0NTQ3MjAwMDAwfQ", 3) + "; " +
	"_hjSession_1234567=" + strings.Repeat("eyJpZCI6ImFiY2RlZiIsImMiOjE3NjQ1NDcyMDAwMDB9", 3)

// serveRaw sends one GET with browserHeaders and extra (header lines) to
// a fasthttp server of that read buffer size (0: fasthttp's default) and
// error handler (nil: fasthttp's) that answers 200, and returns the status
// it answers.
func serveRaw(t *testing.T, readBuffer int, onError func(*fasthttp.RequestCtx, error), extra string) int {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {}, ReadBufferSize: readBuffer, ErrorHandler: onError}
	go srv.Serve(ln)
	defer srv.Shutdown()
	c, err := ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /v1/events/100/queue/status HTTP/1.1\r\n"+browserHeaders+extra+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var res fasthttp.Response
	if err := res.Read(bufio.NewReader(c)); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode()
}

func epochOf(t *testing.T, f *fake) string {
	t.Helper()
	d, err := f.store.Dials(ctx, fakeEvent)
	if err != nil {
		t.Fatal(err)
	}
	return d.Epoch
}

// Item 6: however many sales a fan joins, the browser carries at most four
// queue cookies (the newest places; finished and forged ones go first),
// so its Cookie header stays far below the server's read buffer. The
// control: the cookies one browser would hold without the bound, joining
// twelve sales, are over fasthttp's default 4 KB buffer on their own
// (every request of that browser answered 400 for a day).
func TestQueueCookiesBounded(t *testing.T) {
	f := newFake(t, openDials())
	const sales = 12
	for ev := int64(100); ev < 100+sales; ev++ {
		if err := f.store.InitDials(ctx, ev, openDials()); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(f)
	b.jar["onsale_q_99"] = "forged" // not a token: dropped at the next write
	var all []string                // every queue cookie, as an unbounded jar would keep them
	for ev := int64(100); ev < 100+sales; ev++ {
		r, _ := b.call("POST", fmt.Sprintf("/v1/events/%d/queue", ev))
		if r.status != 200 {
			t.Fatalf("join %d = %d %s", ev, r.status, r.raw)
		}
		all = append(all, fmt.Sprintf("onsale_q_%d=%s", ev, r.body["queue_token"]))
		time.Sleep(time.Millisecond) // (tokens' issue times are in seconds: the order among equals is the jar's)
	}
	var queue []string
	for k := range b.jar {
		if strings.HasPrefix(k, "onsale_q_") {
			queue = append(queue, k)
		}
	}
	if len(queue) > 4 {
		t.Fatalf("the browser holds %d queue cookies %v; want at most 4", len(queue), queue)
	}
	if b.jar[fmt.Sprintf("onsale_q_%d", 100+sales-1)] == "" {
		t.Errorf("the newest place's cookie is gone: %v", queue)
	}
	if b.jar["onsale_q_99"] != "" {
		t.Error("a forged queue cookie was kept")
	}
	// What that browser sends, through a fasthttp server. The sizing's
	// worst case (gwhttp.ReadBufferSize): the bounded queue cookies, the
	// visitor id, an account token in Authorization and the operator's own
	// cookies on the domain (analytics, consent) are answered, with the
	// buffer at least twice their size (the headroom the sizing promises:
	// sites' own cookies vary); the control, the unbounded jar's queue
	// cookies alone, are refused (431) at fasthttp's default 4 KB.
	worst := "Authorization: Bearer " + accountJWT(t, "9", true) + "\r\nCookie: " + b.cookieHeader() + "; " + siteCookies + "\r\n"
	n := len("GET /v1/events/100/queue/status HTTP/1.1\r\n" + browserHeaders + worst)
	if code := serveRaw(t, gwhttp.ReadBufferSize, nil, worst); code != 200 || 2*n > gwhttp.ReadBufferSize {
		t.Errorf("the bounded browser's request (%d bytes of headers) at ReadBufferSize (%d) = %d; want 200, with the buffer twice the headers",
			n, gwhttp.ReadBufferSize, code)
	}
	t.Logf("the bounded browser's worst request: %d bytes of headers; ReadBufferSize %d", n, gwhttp.ReadBufferSize)
	// Headers over the buffer all the same (a site's own cookies grown
	// huge): the gateway's error handler answers 431 headers_too_large,
	// telling the fan what clears it, not 400 "could not be read".
	huge := "Cookie: big=" + strings.Repeat("x", gwhttp.ReadBufferSize) + "\r\n"
	if code := serveRaw(t, gwhttp.ReadBufferSize, f.server.ErrorHandler, huge); code != 431 {
		t.Errorf("headers over ReadBufferSize = %d; want 431 (%s)", code, gateway.EHeadersTooLarge)
	}
	if code := serveRaw(t, 0, nil, "Cookie: "+strings.Join(all, "; ")+"\r\n"); code != 431 {
		t.Errorf("control: %d unbounded queue cookies at fasthttp's default buffer = %d; want 431", sales, code)
	}
	// The browser's places stay usable: a poll of the newest is answered.
	if r, _ := b.call("GET", fmt.Sprintf("/v1/events/%d/queue/status", 100+sales-1)); r.status != 200 {
		t.Errorf("status of the newest place = %d %s", r.status, r.raw)
	}
}

// Item 11 (cookies): over TLS (here, a trusted balancer's X-Forwarded-Proto:
// https) the cookies are Secure and named __Host- (whole host, path /, no
// Domain), and only those names are read: a plain onsale_vid planted
// over cleartext (or by a sibling subdomain) is not the fan's identity.
// Over plain HTTP, or when an untrusted peer claims https, neither.
func TestSecureCookies(t *testing.T) {
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	trust := func(c *gwhttp.Config) {
		var err error
		if c.TrustedProxies, err = gwhttp.ParseTrustedProxies([]string{"10.0.0.0/8"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		peer   string
		proto  string
		secure bool
	}{
		{name: "https at a trusted balancer", peer: "10.0.0.5", proto: "https", secure: true},
		{name: "https, a list, at a trusted balancer", peer: "10.0.0.5", proto: "https, http", secure: true},
		{name: "http at a trusted balancer", peer: "10.0.0.5", proto: "http"},
		{name: "an untrusted peer claiming https", peer: "192.0.2.7", proto: "https"},
		{name: "plain http", peer: "192.0.2.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeWith(t, openDials(), fakeOpts{edit: trust})
			b := newBrowser(f)
			b.peer = tc.peer
			var hdr []string
			if tc.proto != "" {
				hdr = []string{"X-Forwarded-Proto", tc.proto}
			}
			r, set := b.call("POST", path, hdr...)
			if r.status != 200 || len(set) != 2 {
				t.Fatalf("join = %d %s, cookies %v; want 200 with the visitor and queue cookies", r.status, r.raw, set)
			}
			for _, c := range set {
				if hasHost := strings.HasPrefix(c.Name, "__Host-"); c.Secure != tc.secure || hasHost != tc.secure {
					t.Errorf("cookie %s: Secure %v; want Secure and __Host- %v", c.Name, c.Secure, tc.secure)
				}
				if c.Path != "/" || c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
					t.Errorf("cookie %s = %+v; want path /, no domain, HttpOnly, SameSite=Lax", c.Name, c)
				}
			}
			// The same browser joins again: the same place, read from the
			// cookies of its scheme.
			if again, _ := b.call("POST", path, hdr...); again.body["position"] != r.body["position"] {
				t.Errorf("join again = %s; want the same place %v", again.raw, r.body["position"])
			}
			if !tc.secure {
				return
			}
			// A plain onsale_vid someone planted is not read over TLS: the
			// fan keeps its own identity, its place the same.
			other := newBrowser(f)
			if _, _ = other.call("POST", path); other.jar["onsale_vid"] == "" {
				t.Fatal("no plain visitor cookie to plant")
			}
			b.jar["onsale_vid"] = other.jar["onsale_vid"]
			if again, _ := b.call("POST", path, hdr...); again.body["position"] != r.body["position"] {
				t.Errorf("join with a planted plain onsale_vid = %s; want the fan's own place %v", again.raw, r.body["position"])
			}
		})
	}
}

// Behind HAProxy ending TLS and speaking PROXY protocol to the gateway, the
// cookies are Secure and __Host-: the balancer's X-Forwarded-Proto is
// believed because the connection comes from it (a trusted proxy), though
// the PROXY header made the fan's address the request's peer. The
// controls: the same header from a peer that is not trusted (no PROXY
// header, served as itself) is not believed, and the balancer saying http
// is not Secure.
func TestSecureCookiesBehindProxyProtocol(t *testing.T) {
	f := newFakeWith(t, openDials(), fakeOpts{edit: func(c *gwhttp.Config) {
		var err error
		if c.TrustedProxies, err = gwhttp.ParseTrustedProxies([]string{"127.0.0.1"}); err != nil {
			t.Fatal(err)
		}
	}})
	trusted, _ := gwhttp.ParseTrustedProxies([]string{"127.0.0.1"})
	ln, err := gwhttp.Listen("127.0.0.1:0", trusted, true)
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: f.handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	join := func(from string, proxySrc string, proto string) []*http.Cookie {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if proxySrc != "" {
			if _, err := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(proxySrc), Port: 40000}, c.RemoteAddr()).WriteTo(c); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(c, "POST /v1/events/%d/queue HTTP/1.1\r\nHost: onsale.example\r\nX-Forwarded-Proto: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", fakeEvent, proto)
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		if r.StatusCode != 200 || len(r.Cookies()) != 2 {
			b, _ := io.ReadAll(r.Body)
			t.Fatalf("join from %s (PROXY %q) = %d %s, cookies %v; want 200 with the visitor and queue cookies", from, proxySrc, r.StatusCode, b, r.Cookies())
		}
		return r.Cookies()
	}
	for _, tc := range []struct {
		name, from, proxySrc, proto string
		secure                      bool
	}{
		{"https at the balancer, through PROXY protocol", "127.0.0.1", "203.0.113.7", "https", true},
		{"http at the balancer, through PROXY protocol", "127.0.0.1", "203.0.113.8", "http", false},
		{"an untrusted peer claiming https", "127.0.0.2", "", "https", false},
	} {
		for _, c := range join(tc.from, tc.proxySrc, tc.proto) {
			if hasHost := strings.HasPrefix(c.Name, "__Host-"); c.Secure != tc.secure || hasHost != tc.secure {
				t.Errorf("%s: cookie %s Secure %v; want Secure and __Host- %v", tc.name, c.Name, c.Secure, tc.secure)
			}
		}
	}
}
