package http

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/onsale/onsale/gateway"
)

// Two limits guard the gateway: per client address (joins, and polls with a
// bad token: what an attacker without tokens can send) and per queue token
// (polls: a fan's page polls as told, a script polling in a loop does not).

// limit refuses key's request when over l's rate: rate_limited, with
// Retry-After when the bucket has a token again.
func limit(l *limiter, key string) error {
	if ok, wait := l.allow(key, time.Now()); !ok {
		return &gateway.Error{Code: gateway.ERateLimited, Message: "too many requests: slow down", RetryAfter: wait}
	}
	return nil
}

// limiter keeps one token bucket per key (a client IP, a queue token) with a
// bounded number of keys: buckets idle for a minute are dropped, and when
// the map is full an arbitrary bucket makes room (Go's map order is random,
// so no one can aim at a victim).
type limiter struct {
	mu    sync.Mutex
	per   rate.Limit
	burst int
	max   int
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

func newLimiter(perSecond float64, burst, max int) *limiter {
	return &limiter{per: rate.Limit(perSecond), burst: burst, max: max, m: make(map[string]*bucket)}
}

// allow reports whether key may make a request now, and if not, how long
// until it may.
func (l *limiter) allow(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > 30*time.Second {
		for k, b := range l.m {
			if now.Sub(b.seen) > time.Minute {
				delete(l.m, k)
			}
		}
		l.swept = now
	}
	b, ok := l.m[key]
	if !ok {
		for k := range l.m {
			if len(l.m) < l.max {
				break
			}
			delete(l.m, k)
		}
		b = &bucket{l: rate.NewLimiter(l.per, l.burst)}
		l.m[key] = b
	}
	b.seen = now
	r := b.l.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
