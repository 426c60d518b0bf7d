package http

import (
	"container/list"
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
)

// readCache holds public reads (the catalog, an event, a layout, the
// counts, the seat map's bits) so that however many fans read, and however
// cold the cache after a restart, the core or Redis sees about one request
// per key per TTL:
//
//   - One request in flight per key: the first asker fetches, the others
//     wait for its answer, or, when a stale answer is kept, are served
//     that at once.
//   - TTL from the answer's Cache-Control: max-age (capped at maxTTL),
//     no-store, no-cache or private not kept. An answer the core failed to
//     give (it is down, busy, 5xx) is never kept: the stale answer is
//     served if there is one, else the error.
//   - Few misses at once: at most maxMisses fetches in flight per cache,
//     whatever the keys. A flood of keys never asked before (random ids,
//     new filters) would otherwise send one fetch each, fill the core's
//     public-read connections and queue real misses behind it; past the
//     bound a miss is served its stale answer if one is kept, else 503
//     unavailable with Retry-After at once (never a wait).
//   - Bounded: kept answers by their bytes (least recently used first
//     out), refusals (404 for an event that does not exist, 400 for a bad
//     filter) in a separate, small LRU by count, so a loop over random ids
//     can neither grow memory nor push a real event's answers out.
type readCache struct {
	mu       sync.Mutex
	maxBytes int
	maxNeg   int
	bytes    int
	pos      map[string]*list.Element // of *cached
	posLRU   *list.List
	neg      map[string]*list.Element
	negLRU   *list.List
	flights  map[string]*flight
	misses   chan struct{} // a slot per fetch in flight (maxMisses)
}

type cached struct {
	key     string
	a       coreclient.Answer
	at      time.Time // when fetched
	expires time.Time
	cost    int
}

type flight struct {
	done chan struct{}
	c    *cached
	err  error
}

// maxTTL caps the core's max-age (a layout says a day): an answer is
// re-read at least hourly. negTTL is a refusal's TTL when it says none.
// fetchTimeout bounds a fetch, and a waiter's wait for it.
//
// maxMisses bounds each cache's fetches in flight: the three caches over
// the core (events, layouts, counts) together take at most 24 of the
// core client's 32 public-read connections (coreclient.cacheConns), so a
// fetch never waits for one; a miss of a cold key takes a few
// milliseconds, so eight at once is hundreds of new keys a second per
// cache, far above what honest fans ask of one gateway.
const (
	maxMisses    = 8
	maxTTL       = time.Hour
	negTTL       = 2 * time.Second
	fetchTimeout = 5 * time.Second
	entryCost    = 256 // bytes of bookkeeping per entry, beside key and body
)

func newReadCache(maxBytes, maxNeg int) *readCache {
	return &readCache{maxBytes: maxBytes, maxNeg: maxNeg, pos: map[string]*list.Element{}, posLRU: list.New(),
		neg: map[string]*list.Element{}, negLRU: list.New(), flights: map[string]*flight{}, misses: make(chan struct{}, maxMisses)}
}

// get returns key's answer, from the cache or from fetch (one at a time
// per key), and when it was fetched.
func (c *readCache) get(key string, fetch func(ctx context.Context) (coreclient.Answer, error)) (coreclient.Answer, time.Time, error) {
	now := time.Now()
	c.mu.Lock()
	stale := c.lookup(key, now)
	if stale != nil && now.Before(stale.expires) {
		c.mu.Unlock()
		return stale.a, stale.at, nil
	}
	if f, ok := c.flights[key]; ok {
		c.mu.Unlock()
		if stale != nil {
			return stale.a, stale.at, nil // someone is asking: the last answer, a little older, will do
		}
		select {
		case <-f.done:
		case <-time.After(fetchTimeout):
			return coreclient.Answer{}, time.Time{}, gateway.Errorf(gateway.EUnavailable, "the answer is slow in coming; try again")
		}
		if f.err != nil {
			return coreclient.Answer{}, time.Time{}, f.err
		}
		return f.c.a, f.c.at, nil
	}
	select {
	case c.misses <- struct{}{}:
	default: // maxMisses fetches in flight: shed this one at once
		c.mu.Unlock()
		if stale != nil {
			return stale.a, stale.at, nil
		}
		return coreclient.Answer{}, time.Time{}, &gateway.Error{Code: gateway.EUnavailable, RetryAfter: time.Second,
			Message: "too many new reads at once; try again in a moment"}
	}
	defer func() { <-c.misses }()
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	c.mu.Unlock()
	landed := false
	defer func() {
		if !landed { // fetch panicked (a bug): the waiters and later askers must not wait on it
			c.mu.Lock()
			delete(c.flights, key)
			f.err = gateway.Errorf(gateway.EInternal, "internal error")
			c.mu.Unlock()
			close(f.done)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	a, err := fetch(ctx)
	cancel()
	landed = true

	c.mu.Lock()
	delete(c.flights, key)
	switch {
	case err != nil && stale != nil:
		f.c = stale // the source is down: the last answer is still a fair picture
	case err != nil:
		f.err = err
	default:
		f.c = &cached{key: key, a: a, at: now, expires: now.Add(ttlOf(a)), cost: entryCost + len(key) + len(a.Body)}
		c.store(f.c)
	}
	c.mu.Unlock()
	close(f.done)
	if f.err != nil {
		return coreclient.Answer{}, time.Time{}, f.err
	}
	return f.c.a, f.c.at, nil
}

// lookup is key's kept answer, fresh or stale (nil: none); an expired
// refusal is dropped.
func (c *readCache) lookup(key string, now time.Time) *cached {
	if e, ok := c.pos[key]; ok {
		c.posLRU.MoveToFront(e)
		return e.Value.(*cached)
	}
	if e, ok := c.neg[key]; ok {
		v := e.Value.(*cached)
		if now.Before(v.expires) {
			return v
		}
		c.negLRU.Remove(e)
		delete(c.neg, key)
	}
	return nil
}

// store keeps v if its TTL allows, in the LRU of its kind, and evicts past
// the bounds. A refusal drops the key's kept answer whether or not it is
// kept itself (lookup prefers answers: a kept 200 would go on being served
// stale for an event the core no longer has).
func (c *readCache) store(v *cached) {
	if v.a.Status != 200 {
		if e, ok := c.pos[v.key]; ok {
			c.bytes -= e.Value.(*cached).cost
			c.posLRU.Remove(e)
			delete(c.pos, v.key)
		}
	}
	if !v.expires.After(v.at) {
		return
	}
	if v.a.Status != 200 {
		if e, ok := c.neg[v.key]; ok {
			c.negLRU.Remove(e)
		}
		c.neg[v.key] = c.negLRU.PushFront(v)
		for len(c.neg) > c.maxNeg {
			old := c.negLRU.Remove(c.negLRU.Back()).(*cached)
			delete(c.neg, old.key)
		}
		return
	}
	if e, ok := c.neg[v.key]; ok { // the event exists now
		c.negLRU.Remove(e)
		delete(c.neg, v.key)
	}
	if v.cost > c.maxBytes {
		return
	}
	if e, ok := c.pos[v.key]; ok {
		c.bytes -= e.Value.(*cached).cost
		c.posLRU.Remove(e)
	}
	c.pos[v.key] = c.posLRU.PushFront(v)
	c.bytes += v.cost
	for c.bytes > c.maxBytes {
		old := c.posLRU.Remove(c.posLRU.Back()).(*cached)
		delete(c.pos, old.key)
		c.bytes -= old.cost
	}
}

// size is the number of kept answers and refusals, and the answers' bytes.
func (c *readCache) size() (answers, refusals, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pos), len(c.neg), c.bytes
}

// ttlOf is how long an answer may be served: its Cache-Control's max-age
// capped at maxTTL; 0 (not kept) for no-store, no-cache or private; a
// refusal without a max-age, negTTL; an answer without one, 0.
func ttlOf(a coreclient.Answer) time.Duration {
	ttl := time.Duration(-1)
	for _, d := range strings.Split(a.CacheControl, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		switch {
		case d == "no-store" || d == "no-cache" || d == "private":
			return 0
		case strings.HasPrefix(d, "max-age="):
			n, err := strconv.Atoi(strings.TrimPrefix(d, "max-age="))
			if err != nil || n < 0 {
				return 0
			}
			ttl = min(time.Duration(n)*time.Second, maxTTL)
		}
	}
	switch {
	case ttl >= 0:
		return ttl
	case a.Status != 200:
		return negTTL
	}
	return 0
}
