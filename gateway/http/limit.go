package http

import (
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/onsale/onsale/gateway"
)

// Every route is under a limit (the route table names which, routes.go), so
// that no request the gateway serves is free to repeat. The limits are per
// client address (an IPv6 client by its /64: one subscriber's allocation,
// which an attacker gets whole) except a fan's own status polls, which are
// per queue token; each kind of traffic has its own buckets, so one kind
// spent cannot refuse another:
//
//   - join: joins, per address (IPRate).
//   - anon: polls and leaves that carry no valid queue token, per address. A
//     hostile page in a fan's browser can send those from the fan's address,
//     but they spend neither the fan's polls (per token) nor its joins.
//   - token: a fan's polls with its valid queue token (TokenRate).
//   - read: the public reads (catalog, event, layout, counts, seat map),
//     served from the gateway's caches (readcache.go): generous, since
//     fans behind a carrier's NAT share one address.
//   - api: everything passed through to the core (holds, payments,
//     bookings, sign-in, the account, the gate).
//   - webhook: the payment provider's webhooks, from its few addresses.
//   - page: pages, static files, health, keys, metrics, the operators' API.
//
// The read, api, page and webhook rates are multiples of IPRate (a deploy
// that raises it for a load test raises them all): see newLimits.

// limitKind names the bucket family a route's requests are counted in.
type limitKind int

const (
	limitNone    limitKind = iota // the handler limits itself (join, status, leave)
	limitRead                     // public reads, cached
	limitAPI                      // passed through to the core
	limitWebhook                  // the payment provider's webhooks
	limitPage                     // pages, static files, health, keys, metrics, admin
)

// limits are the gateway's limiters, one per kind of traffic.
type limits struct {
	join, anon, token, read, api, webhook, page *limiter
}

// Multiples of IPRate, and the keys each limiter holds at most. A full map
// never resets an active client's bucket (limiter.allow), so the bounds
// only decide how many clients are counted apart before newcomers share
// one overflow bucket.
const (
	readPerIP    = 20  // 100/s at the default IPRate of 5: a NAT of fans browsing
	apiPerIP     = 20  // 100/s: holds, payments, sign-in of a NAT of fans
	webhookPerIP = 100 // 500/s: the provider's webhooks at the height of a sale
	pagePerIP    = 20  // 100/s: pages, static files, a load balancer's probes
	burstOfRate  = 4   // each per-address bucket holds 4 s of its rate

	maxAddrKeys  = 200_000
	maxTokenKeys = 1_000_000
)

func newLimits(ipRate float64, ipBurst int, tokenRate float64, tokenBurst int) *limits {
	per := func(k float64) *limiter {
		return newLimiter(k*ipRate, max(1, int(k*ipRate*burstOfRate)), maxAddrKeys)
	}
	return &limits{
		join:    newLimiter(ipRate, ipBurst, maxAddrKeys),
		anon:    newLimiter(ipRate, ipBurst, maxAddrKeys),
		token:   newLimiter(tokenRate, tokenBurst, maxTokenKeys),
		read:    per(readPerIP),
		api:     per(apiPerIP),
		webhook: per(webhookPerIP),
		page:    per(pagePerIP),
	}
}

// of is the limiter of kind; nil for limitNone.
func (l *limits) of(kind limitKind) *limiter {
	switch kind {
	case limitRead:
		return l.read
	case limitAPI:
		return l.api
	case limitWebhook:
		return l.webhook
	case limitPage:
		return l.page
	}
	return nil
}

// limit refuses key's request when over l's rate: rate_limited, with
// Retry-After when the bucket has a token again.
func limit(l *limiter, key string) error {
	if ok, wait := l.allow(key, time.Now()); !ok {
		return &gateway.Error{Code: gateway.ERateLimited, Message: "too many requests: slow down", RetryAfter: wait}
	}
	return nil
}

// addrKey is the limits' key of a client address: an IPv4 address as it
// is, an IPv6 address by its /64 (a subscriber gets a whole /64, so keying
// by address would give an attacker 2^64 buckets). Anything else (no
// address) is its own text.
func addrKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).Masked().String()
}

// clientKey is the request's client address as the limits key it.
func (s *Server) clientKey(ctx *fasthttp.RequestCtx) string { return addrKey(s.clientIP(ctx)) }

// limiter keeps one token bucket per key (a client address, a queue token)
// with at most max keys. Only an idle bucket is ever dropped: one that has
// refilled to its burst, which is exactly what a new bucket would be, so
// dropping it changes no one's budget. When the map is full and no bucket
// is idle, new keys share one overflow bucket until some bucket idles: a
// flood of new addresses can then refuse newcomers (they share a budget),
// never a client already counted.
type limiter struct {
	mu       sync.Mutex
	per      rate.Limit
	burst    int
	max      int
	idle     time.Duration // time to refill a bucket from empty
	m        map[string]*bucket
	overflow *bucket
	swept    time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &limiter{per: rate.Limit(perSecond), burst: burst, max: max, idle: idle + time.Second,
		m: make(map[string]*bucket), overflow: &bucket{l: rate.NewLimiter(rate.Limit(perSecond), burst)}}
}

// allow reports whether key may make a request now, and if not, how long
// until it may.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > 30*time.Second {
		l.sweep(now)
	}
	b, ok := l.m[key]
	if !ok && len(l.m) >= l.max && now.Sub(l.swept) > time.Second {
		l.sweep(now) // at most once a second: a full map of busy buckets costs one pass
	}
	switch {
	case ok:
	case len(l.m) < l.max:
		b = &bucket{l: rate.NewLimiter(l.per, l.burst)}
		l.m[key] = b
	default:
		b = l.overflow
	}
	b.seen = now
	r := b.l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops the idle buckets.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.m {
		if now.Sub(b.seen) >= l.idle {
			delete(l.m, k)
		}
	}
	l.swept = now
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
