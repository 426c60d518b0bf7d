package http

import (
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/token"
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

// Multiples of IPRate. Each limiter is a table of a fixed size (limiter):
// the gateway's memory for its limits does not grow with its clients.
const (
	readPerIP    = 20  // 100/s at the default IPRate of 5: a NAT of fans browsing
	apiPerIP     = 20  // 100/s: holds, payments, sign-in of a NAT of fans
	webhookPerIP = 100 // 500/s: the provider's webhooks at the height of a sale
	pagePerIP    = 20  // 100/s: pages, static files, a load balancer's probes
	burstOfRate  = 4   // each per-address bucket holds 4 s of its rate
)

func newLimits(ipRate float64, ipBurst int, tokenRate float64, tokenBurst int) *limits {
	per := func(k float64) *limiter {
		return newLimiter(k*ipRate, max(1, int(k*ipRate*burstOfRate)), addrSlots)
	}
	return &limits{
		join:    newLimiter(ipRate, ipBurst, addrSlots),
		anon:    newLimiter(ipRate, ipBurst, addrSlots),
		token:   newLimiter(tokenRate, tokenBurst, tokenSlots),
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
		return rateLimited(wait)
	}
	return nil
}

// limitToken refuses a fan's poll over the per-token rate (limits.token:
// its key is the token's id and identity).
func (s *Server) limitToken(q *token.Queue, now time.Time) error {
	if ok, wait := s.limits.token.allow2(q.ID, q.Subject, now); !ok {
		return rateLimited(wait)
	}
	return nil
}

func rateLimited(wait time.Duration) error {
	return &gateway.Error{Code: gateway.ERateLimited, Message: "too many requests: slow down", RetryAfter: wait}
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

// limiter is a fixed table of token buckets that keys share by hash: its
// memory is the table's, set when it is made, whatever the number of
// clients or queue tokens (600,000 fans in line take what 6,000 take),
// and a request takes no lock. Each bucket is one number, the time at
// which it is full again (GCRA, the generic cell rate algorithm: a
// bucket whose time is past is full, each request moves it one interval
// on, and a request that would move it more than burst intervals past now
// is refused), changed by compare-and-swap.
//
// A key spends from two buckets of the table, and a request is served when
// either has a token: a key that shares one bucket with a busy client (or
// with a flood of other keys) is still served from its other one, so only
// a key whose two buckets are both spent by others can be refused for
// them, rarely by chance (fans poll far below their rate) and, in a flood,
// only while the flood keeps both spent. A served request is charged to
// both buckets (one spent past its burst by at most one interval), so a
// key alone in its two buckets gets the rate and burst (requests racing
// at the same instant may get one more: the two charges are not one
// atomic step), and one
// that hammers gets the rate of one bucket, not two. A refused request
// changes nothing: a client that keeps trying still gets its rate. No
// bucket is ever reset: what a client spent stays spent until it refills.
type limiter struct {
	interval int64 // nanoseconds between tokens: 1/rate
	span     int64 // burst intervals: how far past now a bucket may be spent
	slots    []atomic.Int64
	mask     uint64
	seed     maphash.Seed
}

// Table sizes (buckets, a power of two; 8 bytes each): the queue tokens'
// table is four times the fans of a full-size sale's line at a time
// (2^20 buckets, 8 MB); the per-address ones 2^18 (2 MB each).
const (
	tokenSlots = 1 << 20
	addrSlots  = 1 << 18
)

func newLimiter(perSecond float64, burst, slots int) *limiter {
	interval := max(1, int64(float64(time.Second)/perSecond))
	n := 1
	for n < slots {
		n <<= 1
	}
	l := &limiter{interval: interval, span: int64(max(1, burst)) * interval, mask: uint64(n - 1), seed: maphash.MakeSeed()}
	l.slots = newTable(l, n)
	return l
}

// allow reports whether key may make a request now, and if not, how long
// until it may.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	return l.allowSum(maphash.String(l.seed, key), now)
}

// allow2 is allow for the key a+b (without making it).
func (l *limiter) allow2(a, b string, now time.Time) (bool, time.Duration) {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(a)
	h.WriteString(b)
	return l.allowSum(h.Sum64(), now)
}

func (l *limiter) allowSum(sum uint64, now time.Time) (bool, time.Duration) {
	a, b := l.buckets(sum)
	t := now.UnixNano()
	// Both buckets are read before either is changed: in a table this
	// size a key's buckets are two cache misses, and read so they are
	// waited for together, not the second after the first's
	// compare-and-swap. (A bucket's time only moves forward, so an early
	// read is never stricter than a fresh one: take reads again when its
	// swap finds the bucket changed.)
	fullA, fullB := a.Load(), b.Load()
	okA, waitA := l.take(a, fullA, t)
	if a == b {
		return okA, time.Duration(waitA)
	}
	okB, waitB := l.take(b, fullB, t)
	switch {
	case okA && okB:
		return true, 0
	case okA:
		l.charge(b, t)
	case okB:
		l.charge(a, t)
	default:
		return false, time.Duration(min(waitA, waitB))
	}
	return true, 0
}

// buckets are the two buckets of a key's hash (two independent parts of
// it; the same bucket twice, rarely, is one bucket).
func (l *limiter) buckets(sum uint64) (*atomic.Int64, *atomic.Int64) {
	return &l.slots[sum&l.mask], &l.slots[(sum>>32)&l.mask]
}

// take spends a token of bucket b at now if it has one; otherwise it
// changes nothing and says how long until it has one. full is b as read
// a moment ago.
func (l *limiter) take(b *atomic.Int64, full, now int64) (bool, int64) {
	for {
		next := max(full, now) + l.interval
		if wait := next - now - l.span; wait > 0 {
			return false, wait
		}
		if b.CompareAndSwap(full, next) {
			return true, 0
		}
		full = b.Load()
	}
}

// charge spends a token of bucket b at now whether it has one or not, at
// most one interval past its burst.
func (l *limiter) charge(b *atomic.Int64, now int64) {
	for {
		full := b.Load()
		next := min(max(full, now)+l.interval, now+l.span+l.interval)
		if next <= full || b.CompareAndSwap(full, next) {
			return
		}
	}
}

// size is how many of the table's buckets are not full at now: the
// clients (or tokens, two buckets each) spending, for the bounds metric.
func (l *limiter) size(now time.Time) int {
	t, n := now.UnixNano(), 0
	for i := range l.slots {
		if l.slots[i].Load() > t {
			n++
		}
	}
	return n
}
