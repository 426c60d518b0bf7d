// Package coreclient is the gateway's one client of the core, and the only
// code that talks to it: the room's event times, the public reads the
// gateway caches (catalog, event, seat layout and counts: Read), and the
// reverse proxy of the booking API and the provider's webhooks. It also decides, in one
// function (answerError), what each answer of the core means to a fan.
package coreclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/health"
)

// Client talks to one core over three bounded pools of connections: one
// for the booking API it passes through (Proxy), one for the public reads
// the gateway caches for fans (Read), and one for the gateway's own needs
// (Event, Ready, the dials). The proxy's requests may each take up to 30 s
// (a payment waits on its provider), so under booking load its pool is
// full; the public reads are driven by whoever asks, and a flood of
// uncacheable ones (random ids, new filters) fills theirs. The room's
// reads (the first join of an event, a rejoin after Redis lost a room) and
// the health probe must queue behind neither: a probe refused a connection
// counts the core unavailable and cuts admission on every gateway, and a
// cold room's join answers 503.
type Client struct {
	proxy *fasthttp.HostClient
	cache *fasthttp.HostClient // Read: the public reads' fetches
	reads *fasthttp.HostClient // Event, Ready, dials: the gateway's own
	base  string               // scheme://host:port
	log   *slog.Logger
}

var _ gateway.Catalog = (*Client)(nil)

// Pool sizes. The proxy's request waits up to 3 s for one of its 512
// connections before it is shed with 503 busy (without the wait, any burst
// past 512 was refused at once). The public reads' fetches are bounded
// before they get here (each read cache lets a few misses in flight at
// once: gateway/http/readcache.go), so their 32 connections are rarely all
// taken; a fetch that finds them so waits at most a second. The gateway's
// own reads are few (an event's times once per room, a probe a second, a
// dial change now and then) and have their 16 to themselves.
const (
	proxyConns    = 512
	cacheConns    = 32
	readConns     = 16
	maxReadBody   = 16 << 20 // a seat layout of a stadium is a few MiB
	proxyWaitConn = 3 * time.Second
	readWaitConn  = time.Second
)

// New returns a client of the core at coreURL (see ParseURL: http or https,
// the port defaulting to the scheme's); a nil log discards. A URL that
// ParseURL refuses (the gateway's config refuses it first) gives a client
// whose every request fails.
func New(coreURL string, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr, tls, err := ParseURL(coreURL)
	if err != nil {
		log.Error("the core's URL is unusable: every request to the core fails", "err", err)
		addr = "invalid.core.url.invalid:1" // .invalid never resolves (RFC 6761)
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	proxy := &fasthttp.HostClient{Addr: addr, IsTLS: tls, ReadTimeout: proxyTimeout, WriteTimeout: 10 * time.Second,
		MaxConns: proxyConns, MaxConnWaitTimeout: proxyWaitConn, DisablePathNormalizing: true}
	cache := &fasthttp.HostClient{Addr: addr, IsTLS: tls, ReadTimeout: readTimeout, WriteTimeout: readTimeout,
		MaxConns: cacheConns, MaxConnWaitTimeout: readWaitConn, MaxResponseBodySize: maxReadBody}
	reads := &fasthttp.HostClient{Addr: addr, IsTLS: tls, ReadTimeout: readTimeout, WriteTimeout: readTimeout,
		MaxConns: readConns, MaxConnWaitTimeout: readWaitConn, MaxResponseBodySize: maxReadBody}
	return &Client{proxy: proxy, cache: cache, reads: reads, base: scheme + addr, log: log}
}

// ParseURL reads the core's base URL: http:// or https:// and a host, with
// an optional port (80 or 443 when absent) and no path beyond "/". It
// returns host:port and whether to speak TLS, which the client then does
// for every request, proxied ones included, and verifies the core's
// certificate for the URL's host against the system roots.
func ParseURL(coreURL string) (addr string, tls bool, err error) {
	u, err := url.Parse(strings.TrimSpace(coreURL))
	if err != nil {
		return "", false, fmt.Errorf("core url: %w", err)
	}
	port := u.Port()
	switch u.Scheme {
	case "https":
		tls = true
		if port == "" {
			port = "443"
		}
	case "http":
		if port == "" {
			port = "80"
		}
	default:
		return "", false, fmt.Errorf("core url %q: want http:// or https://", coreURL)
	}
	switch {
	case u.Hostname() == "":
		return "", false, fmt.Errorf("core url %q names no host", coreURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
		return "", false, fmt.Errorf("core url %q: want only scheme://host[:port]", coreURL)
	}
	return net.JoinHostPort(u.Hostname(), port), tls, nil
}

// Addr is the core's host:port.
func (c *Client) Addr() string { return c.proxy.Addr }

// Timeouts of the gateway's own reads, and of a proxied call. The proxy's
// outlasts the core's longest request (core/http.LongestRequest, 45 s: a
// Pay or Confirm that waits on the provider, then records its outcome)
// plus the core's write margin (its WriteTimeout, 50 s): a gateway that
// gave up first would cut the fan's answer after money moved (the fan's
// retry with the same Idempotency-Key still gets the stored answer, but
// only after a timeout and a retry).
const (
	readTimeout  = 5 * time.Second
	proxyTimeout = 55 * time.Second
)

// answerError maps the core's answer to a request of the gateway's into the
// gateway's vocabulary, the one place that does: nil for 200; no answer is
// core_unavailable (502), or busy (503) when every connection stayed taken;
// 404 is not_found; 429 and 5xx (the core failing closed, or overloaded)
// are unavailable (503, come back soon); any other status means the gateway
// asked wrongly, an internal error.
func answerError(status int, err error, what string) error {
	switch {
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		// Every connection to the core has been busy for a while: the core
		// is saturated, so shed the request rather than pile on.
		return &gateway.Error{Code: gateway.EBusy, Message: "the booking service is busy; try again in a moment"}
	case err != nil:
		return &gateway.Error{Code: gateway.ECoreUnavailable, Message: "the booking service did not answer; try again"}
	case status == fasthttp.StatusOK:
		return nil
	case status == fasthttp.StatusNotFound:
		return gateway.Errorf(gateway.ENotFound, "no %s for this event", what)
	case status == fasthttp.StatusTooManyRequests || status >= 500:
		return gateway.Errorf(gateway.EUnavailable, "the %s cannot be read right now", what)
	}
	return gateway.Errorf(gateway.EInternal, "the booking service answered %d to a request for the %s", status, what)
}

// readDeadline is readTimeout from now, or ctx's deadline if sooner: how
// long the gateway's own calls to the core may take.
func readDeadline(ctx context.Context) time.Time {
	deadline := time.Now().Add(readTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		return d
	}
	return deadline
}

// get fetches path, within readTimeout or ctx's deadline if sooner.
func (c *Client) get(ctx context.Context, path, what string) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	deadline := readDeadline(ctx)
	err := c.reads.DoDeadline(req, resp, deadline)
	if err != nil {
		c.log.Warn("the core did not answer", "path", path, "err", err)
	}
	if err := answerError(resp.StatusCode(), err, what); err != nil {
		return nil, err
	}
	return append([]byte(nil), resp.Body()...), nil
}

// Event returns an event's onsale and show times: ErrNoEvent when the core
// has none, an error wrapping ErrUnavailable when the core cannot say.
func (c *Client) Event(ctx context.Context, id int64) (gateway.Event, error) {
	b, err := c.get(ctx, fmt.Sprintf("/v1/events/%d", id), "event")
	switch {
	case gateway.ErrorCode(err) == gateway.ENotFound:
		return gateway.Event{}, gateway.ErrNoEvent
	case err != nil:
		return gateway.Event{}, fmt.Errorf("%w: core: %v", gateway.ErrUnavailable, err)
	}
	var ev gateway.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return gateway.Event{}, fmt.Errorf("%w: core event: %v", gateway.ErrUnavailable, err)
	}
	return ev, nil
}

// Answer is the core's answer to a public read (the catalog, an event, a
// layout, the counts) as the gateway caches and serves it: 200, or a
// refusal of the request itself (a 4xx other than 429: no such event, a
// bad filter), with the headers a cache and a browser need.
type Answer struct {
	Status       int
	Body         []byte
	ContentType  string
	CacheControl string
}

// Read fetches a public read (path and query, e.g. /v1/events?city=oslo;
// what names it in errors) over the public reads' own connections, within
// readTimeout or ctx's deadline if sooner:
// the core's answer when it is 200 or a 4xx other than 429; otherwise the
// error answerError gives (busy, core_unavailable, unavailable).
func (c *Client) Read(ctx context.Context, pathQuery, what string) (Answer, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + pathQuery)
	deadline := readDeadline(ctx)
	err := c.cache.DoDeadline(req, resp, deadline)
	if err != nil {
		c.log.Warn("the core did not answer", "path", pathQuery, "err", err)
	}
	st := resp.StatusCode()
	if err != nil || st != fasthttp.StatusOK && (st < 400 || st >= 500 || st == fasthttp.StatusTooManyRequests) {
		return Answer{}, answerError(st, err, what)
	}
	return Answer{Status: st, Body: append([]byte(nil), resp.Body()...), ContentType: string(resp.Header.ContentType()),
		CacheControl: string(resp.Header.Peek(fasthttp.HeaderCacheControl))}, nil
}

// Ready asks the core whether it can serve (GET /readyz: the core answers
// 200 while its database answers, 503 when not) within ctx's deadline, and
// answers what that says of its health (the gateway's health probe).
func (c *Client) Ready(ctx context.Context) health.Outcome {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + "/readyz")
	deadline := readDeadline(ctx)
	err := c.reads.DoDeadline(req, resp, deadline)
	return health.OutcomeOf(resp.StatusCode(), nil, err == nil, errors.Is(err, fasthttp.ErrNoFreeConns))
}

// ClientAddrHeader tells the core the address of the fan a proxied
// request came from (for its per-address limits): only gateways reach the
// core, so it trusts this header, which Proxy always sets.
const ClientAddrHeader = "X-Onsale-Client-Addr"

// RequestIDHeader carries a request's id to the core, which logs it and
// records it in its audit log.
const RequestIDHeader = "X-Request-Id"

// Proxy passes the request to the core, with ClientAddrHeader set to
// clientAddr (whatever the client sent in it is replaced), and its answer
// back as it is; it returns an error (busy, core_unavailable) only when the
// core gave none.
func (c *Client) Proxy(ctx *fasthttp.RequestCtx, clientAddr string) error {
	req := &ctx.Request
	req.Header.Del("Connection")
	req.Header.Del(ClientAddrHeader) // every spelling and copy the client sent
	req.Header.Set(ClientAddrHeader, clientAddr)
	req.SetHost(c.proxy.Addr)
	// The fan's request came in as http (TLS ends at the edge); the
	// client speaks to the core in the scheme of the core's URL (fasthttp
	// refuses a request whose scheme is not its client's).
	if c.proxy.IsTLS {
		req.URI().SetScheme("https")
	} else {
		req.URI().SetScheme("http")
	}
	err := c.proxy.DoTimeout(req, &ctx.Response, proxyTimeout)
	if err == nil {
		return nil
	}
	ctx.Response.Reset()
	if !errors.Is(err, fasthttp.ErrNoFreeConns) {
		c.log.Warn("the core did not answer", "path", string(ctx.Path()), "err", err)
	}
	return answerError(0, err, "")
}
