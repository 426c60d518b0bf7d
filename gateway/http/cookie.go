package http

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/token"
)

// The gateway's cookies: the visitor id (onsale_vid, a guest's identity)
// and one queue cookie per event the fan is in line for (onsale_q_<event>,
// the queue token, so a reload or another tab finds the place). Every
// cookie is written here, with three rules:
//
//   - Secure when the fan's browser reached us over TLS (the connection,
//     or X-Forwarded-Proto: https from a trusted proxy that ended TLS), and
//     then named with the __Host- prefix: the browser accepts such a cookie
//     only from a secure origin, for the whole host, never from a sibling
//     subdomain or a cleartext page, so no one can plant a visitor id or a
//     place in a fan's browser. Over plain HTTP (local runs) the names have
//     no prefix; each scheme reads only its own names.
//   - HttpOnly and SameSite=Lax: page scripts never see the tokens, and a
//     cross-site POST does not carry them (the cross-site join itself is
//     refused: crosssite.go).
//   - At most maxQueueCookies queue cookies: writing one drops the others
//     that are finished (a token that no longer verifies, a session over)
//     and then the oldest, so however many sales a fan browses, the Cookie
//     header stays far below ReadBufferSize (a browser over fasthttp's
//     buffer gets 400 on every request, for as long as the cookies live).

const (
	visitorCookie = "onsale_vid"
	queueCookie   = "onsale_q_" // + the event id
	hostPrefix    = "__Host-"
)

// maxQueueCookies bounds the queue cookies one browser holds: four places
// in line at once (a fan rarely queues for more sales in one day), about
// 1.3 KB of Cookie header (a queue token is about 300 bytes).
const maxQueueCookies = 4

// ReadBufferSize is the fasthttp server's per-connection read buffer, which
// also bounds the request line and headers (a request over it is refused
// before any handler). Sized from what a fan's browser sends at worst
// (TestQueueCookiesBounded builds it: about 3.2 KB): maxQueueCookies queue
// cookies and the visitor id (about 1.3 KB), an account token in
// Authorization (about 0.5 KB), a browser's usual headers (about 1 KB) and
// the operator's own cookies on the domain (analytics, consent: 1.2 KB
// there, but they vary). fasthttp's default, 4 KB, leaves too little room
// over that; 8 KB is more than twice it. More would cost memory on every
// open connection (fasthttp keeps the buffer per connection: 100,000
// polling fans at 8 KB is 800 MB).
const ReadBufferSize = 8 << 10

// secure reports whether the fan's browser reached the gateway over TLS:
// this connection, or a TLS-ending balancer that says so in
// X-Forwarded-Proto (believed only when the connection comes from a
// trusted proxy, as X-Forwarded-For is; the first value is the balancer
// nearest the fan). Whom the connection comes from is its upstream peer
// (upstreamAddr), not the fan's address a PROXY header put in its place:
// behind HAProxy with send-proxy-v2 the peer the request shows is the
// fan's, never trusted, and the cookies would never be Secure.
func (s *Server) secure(ctx *fasthttp.RequestCtx) bool {
	if ctx.IsTLS() {
		return true
	}
	peer, ok := upstreamAddr(ctx)
	if !ok || !s.cfg.TrustedProxies.Contains(peer) {
		return false
	}
	proto, _, _ := strings.Cut(string(ctx.Request.Header.Peek("X-Forwarded-Proto")), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// cookieName is the name of a cookie under this request's scheme.
func (s *Server) cookieName(ctx *fasthttp.RequestCtx, name string) string {
	if s.secure(ctx) {
		return hostPrefix + name
	}
	return name
}

// cookie is the value of the request's cookie name (cookieName applied).
func (s *Server) cookie(ctx *fasthttp.RequestCtx, name string) string {
	return string(ctx.Request.Header.Cookie(s.cookieName(ctx, name)))
}

// queueCookieValue is the request's queue cookie for event.
func (s *Server) queueCookieValue(ctx *fasthttp.RequestCtx, event int64) string {
	return string(s.queueCookieBytes(ctx, event))
}

// queueCookieBytes is queueCookieValue as the request holds it (no copy:
// good until the handler returns); its name is made without an allocation.
func (s *Server) queueCookieBytes(ctx *fasthttp.RequestCtx, event int64) []byte {
	var buf [64]byte
	name := buf[:0]
	if s.secure(ctx) {
		name = append(name, hostPrefix...)
	}
	name = strconv.AppendInt(append(name, queueCookie...), event, 10)
	return ctx.Request.Header.CookieBytes(name)
}

// setCookie writes a cookie under this request's scheme's name (maxAge
// negative: remove it).
func (s *Server) setCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge time.Duration) {
	writeCookie(ctx, s.cookieName(ctx, name), value, maxAge, s.secure(ctx))
}

func writeCookie(ctx *fasthttp.RequestCtx, name, value string, maxAge time.Duration, secure bool) {
	var c fasthttp.Cookie
	c.SetKey(name)
	c.SetValue(value)
	c.SetPath("/") // __Host- requires Path=/ and no Domain
	c.SetHTTPOnly(true)
	c.SetSecure(secure)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	if maxAge < 0 {
		c.SetMaxAge(-1) // Max-Age=0: remove it now
	} else {
		c.SetMaxAge(int(maxAge.Seconds()))
	}
	ctx.Response.Header.SetCookie(&c)
}

// setQueueCookie writes event's queue cookie and keeps the browser's queue
// cookies within maxQueueCookies (the package's cookie rules, above).
func (s *Server) setQueueCookie(ctx *fasthttp.RequestCtx, event int64, tok string, maxAge time.Duration) {
	s.setCookie(ctx, queueCookie+strconv.FormatInt(event, 10), tok, maxAge)
	s.pruneQueueCookies(ctx, event)
}

// clearQueueCookie removes event's queue cookie.
func (s *Server) clearQueueCookie(ctx *fasthttp.RequestCtx, event int64) {
	s.setCookie(ctx, queueCookie+strconv.FormatInt(event, 10), "", -1)
}

// pruneQueueCookies removes the request's queue cookies of events other
// than keep that a browser should no longer carry: those of the other
// scheme's names (never read), those whose token no longer verifies or
// whose session is over, and past that the oldest, so that at most
// maxQueueCookies-1 remain beside keep's.
func (s *Server) pruneQueueCookies(ctx *fasthttp.RequestCtx, keep int64) {
	secure := s.secure(ctx)
	type held struct {
		name   string
		issued time.Time
	}
	var live []held
	now := time.Now()
	for k, v := range ctx.Request.Header.Cookies() {
		name, prefixed := bytes.CutPrefix(k, []byte(hostPrefix))
		digits, ok := bytes.CutPrefix(name, []byte(queueCookie))
		if !ok {
			continue
		}
		ev, err := strconv.ParseInt(string(digits), 10, 64)
		switch {
		case err == nil && ev == keep && prefixed == secure:
			continue
		case err != nil || prefixed != secure:
			// Not one of ours to read under this scheme. A __Host- cookie can
			// only be removed by a secure response; the browser ignores the
			// attempt otherwise, and a plain one is removed either way.
			writeCookie(ctx, string(k), "", -1, prefixed)
			continue
		}
		q, err := s.cfg.Queue.Verify(string(v), ev)
		if err != nil || finished(q, now) {
			writeCookie(ctx, string(k), "", -1, secure)
			continue
		}
		live = append(live, held{string(k), issued(q)})
	}
	if len(live) < maxQueueCookies {
		return
	}
	slices.SortFunc(live, func(a, b held) int { return b.issued.Compare(a.issued) }) // newest first
	for _, h := range live[maxQueueCookies-1:] {
		writeCookie(ctx, h.name, "", -1, secure)
	}
}

// finished reports whether a queue token's place is over: its session
// (Admitted) has ended.
func finished(q *token.Queue, now time.Time) bool {
	return q.Admitted > 0 && q.Admitted <= now.UnixMilli()
}

func issued(q *token.Queue) time.Time {
	if q.IssuedAt == nil {
		return time.Time{}
	}
	return q.IssuedAt.Time
}
