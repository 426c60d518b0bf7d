package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"
)

// holdClient is one benchmark client's HTTP/1.1 connection to the core,
// kept alive across its requests (fasthttp's HostClient, one connection,
// its request and answer reused). The API is measured beside pgbench, a
// C client spending about 15 µs of CPU per transaction on the same two
// cores; net/http's client spent 53 µs per hold (three goroutines per
// request, a header map per answer), CPU that the core and PostgreSQL
// under test did not get.
type holdClient struct {
	hc   *fasthttp.HostClient
	req  fasthttp.Request
	resp fasthttp.Response
}

// newHoldClient posts to base (http://host:port) + path with the bearer
// token tok; it dials on the first post.
func newHoldClient(base, path, tok string) (*holdClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("core URL %q: want http://host:port", base)
	}
	c := &holdClient{hc: &fasthttp.HostClient{Addr: u.Host, MaxConns: 1, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}}
	c.req.SetRequestURI(base + path)
	c.req.Header.SetMethod(fasthttp.MethodPost)
	c.req.Header.SetContentType("application/json")
	c.req.Header.Set("Authorization", "Bearer "+tok)
	return c, nil
}

// post sends body and returns the answer's status code.
func (c *holdClient) post(body []byte) (int, error) {
	c.req.SetBodyRaw(body)
	if err := c.hc.Do(&c.req, &c.resp); err != nil {
		return 0, err
	}
	return c.resp.StatusCode(), nil
}

// Close closes the connection; the next post dials again.
func (c *holdClient) Close() { c.hc.CloseIdleConnections() }
