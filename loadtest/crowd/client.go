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

// NewPipe is a pipelined client of at most conns connections to base (a
// URL whose host is used), from the local address from (nil: any): many
// requests in flight on each connection, written and read in batches, so
// a crowd's polls cost it (and the gateway) few system calls. Only for
// requests the gateway answers from memory (the status poll): a pipelined
// connection answers in order, so a slow request would hold up the ones
// behind it.
func NewPipe(base string, conns int, from net.IP) *fasthttp.PipelineClient {
	u, _ := url.Parse(base)
	p := &fasthttp.PipelineClient{Addr: u.Host, MaxConns: conns, MaxIdleConnDuration: 30 * time.Second, ReadBufferSize: 16 << 10}
	if from != nil {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 10 * time.Second}
		p.Dial = func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
	}
	return p
}

// doer sends a request and waits for its answer: a pool (HostClient) or a
// pipelined client.
type doer interface {
	DoTimeout(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error
}

// Client is the operators' (or a bot's, or a test's) side of a connection
// pool, keeping cookies when asked to. Every request's latency and every
// failure is counted in the Stats. The fans share their pool's workers
// instead (sender), each with its own jar.
type Client struct {
	s    sender
	keep bool // keep cookies (a browser); the operators and bots send none
	mu   sync.Mutex
	jar  jar
}

// NewClient sends on pool, each request given at most timeout; keepCookies
// makes it a browser that keeps the cookies it is given.
func NewClient(pool *fasthttp.HostClient, timeout time.Duration, st *Stats, keepCookies bool) *Client {
	return &Client{s: sender{hc: pool, timeout: timeout, st: st}, keep: keepCookies}
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
	if !c.keep {
		return c.s.do(ctx, nil, route, method, target, body, hdr)
	}
	c.mu.Lock() // one browser's requests, one at a time: its jar is its own
	defer c.mu.Unlock()
	return c.s.do(ctx, &c.jar, route, method, target, body, hdr)
}

// sender sends requests on a pool with a timeout, counting in st: the
// fans' (a jar each) and every Client's.
type sender struct {
	hc      doer
	timeout time.Duration
	st      *Stats
}

// do is Client.Do with the cookies of jar (none kept when nil).
func (s sender) do(ctx context.Context, jar *jar, route, method, target string, body any, hdr []string) Reply {
	timeout := s.timeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if ctx.Err() != nil || timeout <= 0 {
		return Reply{}
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	build(req, method, target, body, hdr)
	if jar != nil {
		jar.send(req)
	}
	t0 := time.Now()
	err := s.hc.DoTimeout(req, resp, timeout)
	if err != nil {
		if ctx.Err() != nil {
			s.st.Observe(route, time.Since(t0)) // the sale ended under it: no answer to count
			return Reply{}
		}
		s.st.observe(route, errorClass(err), t0, time.Since(t0))
		s.st.Fail("transport")
		return Reply{}
	}
	s.st.observe(route, strconv.Itoa(resp.StatusCode()), t0, time.Since(t0))
	if route == "status" {
		s.st.pollAnswered(time.Now())
	}
	if jar != nil {
		jar.keep(resp)
	}
	out := Reply{Status: resp.StatusCode()}
	if route != "layout" {
		json.Unmarshal(resp.Body(), &out.Body)
	}
	if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
		n, _ := strconv.Atoi(string(ra))
		out.Retry = time.Duration(n) * time.Second
	}
	if out.Status >= 500 {
		s.st.Fail(fmt.Sprintf("%s %d", route, out.Status))
	}
	return out
}

// build fills req: the body as JSON, the headers.
func build(req *fasthttp.Request, method, target string, body any, hdr []string) {
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
}

// jar is one browser's cookies, kept by hand: the few name, value pairs a
// gateway sets (a map, or fasthttp's jar, per fan would cost more than the
// fan).
type jar []cookie

type cookie struct{ name, value string }

// send puts the cookies on req.
func (j *jar) send(req *fasthttp.Request) {
	for _, c := range *j {
		req.Header.SetCookie(c.name, c.value)
	}
}

// keep stores the cookies resp sets (an empty value deletes one).
func (j *jar) keep(resp *fasthttp.Response) {
	for key, value := range resp.Header.Cookies() {
		var ck fasthttp.Cookie
		if ck.ParseBytes(value) != nil {
			continue
		}
		j.set(string(key), string(ck.Value()))
	}
}

// set sets (or with an empty value deletes) the cookie name.
func (j *jar) set(name, value string) {
	for i, c := range *j {
		if c.name != name {
			continue
		}
		if value == "" {
			*j = append((*j)[:i], (*j)[i+1:]...)
		} else {
			(*j)[i].value = value
		}
		return
	}
	if value != "" {
		*j = append(*j, cookie{name, value})
	}
}

// errorClass is the class of a request that got no answer: no answer in
// time (the client's timeout, or no free connection to send it on while
// the others wait for answers), or no connection (refused, reset, closed).
func errorClass(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrNoFreeConns),
		errors.Is(err, fasthttp.ErrPipelineOverflow),
		errors.As(err, &ne) && ne.Timeout():
		return check.ClassTimeout
	}
	return check.ClassConn
}

// number reads a JSON number from a decoded body (0 when absent).
func number(v any) float64 { f, _ := v.(float64); return f }
