package crowd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/loadtest/check"
)

// NewPool is a pool of at most conns connections to base (a URL whose host
// is used): fasthttp, so the crowd costs the shared cores as little as it
// can.
func NewPool(base string, conns int) *fasthttp.HostClient {
	u, _ := url.Parse(base)
	return &fasthttp.HostClient{Addr: u.Host, MaxConns: conns, MaxConnWaitTimeout: 20 * time.Second,
		MaxIdleConnDuration: 30 * time.Second, ReadBufferSize: 16 << 10}
}

// NewPoolFrom is NewPool whose connections come from the local address
// from (a loopback address such as 127.0.0.2: every 127/8 address is this
// host's), so that the server sees the requests come from that address.
func NewPoolFrom(base string, conns int, from net.IP) *fasthttp.HostClient {
	p := NewPool(base, conns)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
	p.Dial = func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
	return p
}

// Client is one fan's (or the operators', or a bot's) side of a connection
// pool, with the fan's cookies kept by hand (a jar per fan would cost more
// than the fan). Every request's latency and every failure is counted in
// the Stats.
type Client struct {
	hc      *fasthttp.HostClient
	timeout time.Duration
	st      *Stats
	keep    bool // keep cookies (a fan); the operators and bots send none
	mu      sync.Mutex
	cookies map[string]string
}

// NewClient sends on pool, each request given at most timeout; keepCookies
// makes it a browser that keeps the cookies it is given.
func NewClient(pool *fasthttp.HostClient, timeout time.Duration, st *Stats, keepCookies bool) *Client {
	return &Client{hc: pool, timeout: timeout, st: st, keep: keepCookies}
}

// Reply is one answer: zero Status when none came (transport error, or the
// context ended).
type Reply struct {
	Status int
	Body   map[string]any
	Retry  time.Duration // Retry-After
}

// Do sends one request; route names it in the latency table. The reply's
// JSON is decoded unless the route is "layout" (the crowd parses the
// immutable layout once: a browser would cache it). hdr is name, value
// pairs. A transport error (unless the context ended) and a 5xx count as
// errors; every answered "status" request counts as a poll.
func (c *Client) Do(ctx context.Context, route, method, target string, body any, hdr ...string) Reply {
	timeout := c.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if ctx.Err() != nil || timeout <= 0 {
		return Reply{}
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	c.build(req, method, target, body, hdr)
	t0 := time.Now()
	err := c.hc.DoTimeout(req, resp, timeout)
	if err != nil {
		if ctx.Err() != nil {
			c.st.Observe(route, time.Since(t0)) // the sale ended under it: no answer to count
			return Reply{}
		}
		c.st.observe(route, errorClass(err), t0, time.Since(t0))
		c.st.Fail("transport")
		return Reply{}
	}
	c.st.observe(route, strconv.Itoa(resp.StatusCode()), t0, time.Since(t0))
	if route == "status" {
		c.st.pollAnswered(time.Now())
	}
	c.keepCookies(resp)
	out := Reply{Status: resp.StatusCode()}
	if route != "layout" {
		json.Unmarshal(resp.Body(), &out.Body)
	}
	if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
		n, _ := strconv.Atoi(string(ra))
		out.Retry = time.Duration(n) * time.Second
	}
	if out.Status >= 500 {
		c.st.Fail(fmt.Sprintf("%s %d", route, out.Status))
	}
	return out
}

// build fills req: the body as JSON, the headers, the cookies kept.
func (c *Client) build(req *fasthttp.Request, method, target string, body any, hdr []string) {
	req.SetRequestURI(target)
	req.Header.SetMethod(method)
	if body != nil {
		b, _ := json.Marshal(body)
		req.SetBodyRaw(b)
		req.Header.SetContentType("application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if !c.keep {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.cookies {
		req.Header.SetCookie(k, v)
	}
}

// keepCookies stores the cookies resp sets (an empty value deletes one).
func (c *Client) keepCookies(resp *fasthttp.Response) {
	if !c.keep {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, value := range resp.Header.Cookies() {
		var ck fasthttp.Cookie
		if ck.ParseBytes(value) != nil {
			continue
		}
		if c.cookies == nil {
			c.cookies = map[string]string{}
		}
		if len(ck.Value()) == 0 {
			delete(c.cookies, string(key))
		} else {
			c.cookies[string(key)] = string(ck.Value())
		}
	}
}

// errorClass is the class of a request that got no answer: no answer in
// time (the client's timeout, or no free connection to send it on while
// the others wait for answers), or no connection (refused, reset, closed).
func errorClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrNoFreeConns),
		errors.As(err, &ne) && ne.Timeout():
		return check.ClassTimeout
	}
	return check.ClassConn
}

// number reads a JSON number from a decoded body (0 when absent).
func number(v any) float64 { f, _ := v.(float64); return f }
