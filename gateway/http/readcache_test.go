package http

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
)

// The TTL of an answer is its Cache-Control's.
func TestTTLOf(t *testing.T) {
	for _, tc := range []struct {
		status int
		cc     string
		want   time.Duration
	}{
		{200, "public, max-age=5", 5 * time.Second},
		{200, "public, max-age=86400, immutable", maxTTL},
		{200, "Public, Max-Age=1", time.Second},
		{200, "no-store", 0},
		{200, "private, max-age=60", 0},
		{200, "public, max-age=60, no-cache", 0},
		{200, "max-age=x", 0},
		{200, "", 0},
		{404, "", negTTL},
		{404, "max-age=10", 10 * time.Second},
		{404, "no-store", 0},
	} {
		if got := ttlOf(coreclient.Answer{Status: tc.status, CacheControl: tc.cc}); got != tc.want {
			t.Errorf("ttlOf(%d %q) = %v; want %v", tc.status, tc.cc, got, tc.want)
		}
	}
}

// The cache stays within its bytes (least recently used out) and its
// refusals' count; refusals never push answers out; an answer the source
// fails to give is the stale one when there is one, else the error.
func TestReadCacheBounds(t *testing.T) {
	c := newReadCache(10*(entryCost+100), 50)
	asked := map[string]int{}
	get := func(key string, status int, err error) (coreclient.Answer, error) {
		a, _, e := c.get(key, func(context.Context) (coreclient.Answer, error) {
			asked[key]++
			return coreclient.Answer{Status: status, Body: make([]byte, 100-len(key)), CacheControl: "max-age=60"}, err
		})
		return a, e
	}
	get("hot", 200, nil)
	for i := range 1000 {
		get(fmt.Sprint("missing", i), 404, nil)
	}
	if a, r, b := c.size(); a != 1 || r != 50 || b > c.maxBytes {
		t.Fatalf("after 1000 refusals: %d answers, %d refusals, %d bytes; want 1, 50, under %d", a, r, b, c.maxBytes)
	}
	for i := range 30 {
		get(fmt.Sprint("k", i), 200, nil)
		get("hot", 200, nil) // kept in use
	}
	if a, _, b := c.size(); a > 10 || b > c.maxBytes || asked["hot"] != 1 {
		t.Fatalf("after 30 answers: %d answers, %d bytes, hot asked %d times; want at most 10, under %d, once", a, b, c.maxBytes, asked["hot"])
	}
	// Expire hot, then fail: the stale answer is served.
	c.pos["hot"].Value.(*cached).expires = time.Now().Add(-time.Second)
	if a, err := get("hot", 0, errors.New("down")); err != nil || a.Status != 200 || asked["hot"] != 2 {
		t.Fatalf("stale hot with the source down = %d, %v (asked %d); want the stale answer", a.Status, err, asked["hot"])
	}
	if _, err := get("cold", 0, errors.New("down")); err == nil {
		t.Fatal("a key never fetched with the source down: nil error")
	}
}

// One fetch per key in flight: the waiters get its answer (a late one
// finds it kept: however many arrived before the release, one fetch).
func TestReadCacheOneInFlight(t *testing.T) {
	c := newReadCache(1<<20, 10)
	var fetches atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _, err := c.get("k", func(context.Context) (coreclient.Answer, error) {
				fetches.Add(1)
				<-release
				return coreclient.Answer{Status: 200, Body: []byte("x"), CacheControl: "max-age=60"}, nil
			})
			if err != nil || string(a.Body) != "x" {
				t.Errorf("get = %q, %v", a.Body, err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the waiters arrive (the property holds however many did)
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("20 concurrent gets fetched %d times; want once", n)
	}
}

// A fetch that panics (a bug) leaves no flight behind: the next get
// fetches again rather than waiting on it.
func TestReadCachePanicLeavesNoFlight(t *testing.T) {
	c := newReadCache(1<<20, 10)
	func() {
		defer func() { _ = recover() }()
		c.get("k", func(context.Context) (coreclient.Answer, error) { panic("bug") })
	}()
	a, _, err := c.get("k", func(context.Context) (coreclient.Answer, error) {
		return coreclient.Answer{Status: 200, Body: []byte("x")}, nil
	})
	if err != nil || string(a.Body) != "x" {
		t.Fatalf("get after a panicked fetch = %q, %v; want a fresh fetch", a.Body, err)
	}
}

// A refusal replaces the key's kept answer: an event the core answered
// once and now refuses (404) is refused from then on, not served its old
// answer (lookup prefers answers), and its bytes are freed, whether the
// refusal is kept (max-age) or not (no-store).
func TestReadCacheRefusalDropsAnswer(t *testing.T) {
	for _, cc := range []string{"max-age=60", "no-store"} {
		t.Run(cc, func(t *testing.T) {
			c := newReadCache(1<<20, 10)
			fetches := 0
			get := func(status int, cc string) coreclient.Answer {
				a, _, err := c.get("k", func(context.Context) (coreclient.Answer, error) {
					fetches++
					return coreclient.Answer{Status: status, Body: []byte(fmt.Sprint(status)), CacheControl: cc}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return a
			}
			get(200, "max-age=60")
			c.pos["k"].Value.(*cached).expires = time.Now().Add(-time.Second) // due again
			if a := get(404, cc); a.Status != 404 {
				t.Fatalf("the refetch = %d; want the core's 404", a.Status)
			}
			if ans, _, b := c.size(); ans != 0 || b != 0 {
				t.Fatalf("after a refusal the cache keeps %d answers, %d bytes; want the old 200 dropped", ans, b)
			}
			before := fetches
			if a := get(404, cc); a.Status != 404 {
				t.Fatalf("the next read = %d (fetched %d times); want 404", a.Status, fetches-before)
			}
		})
	}
}

// At most maxMisses fetches are in flight per cache, whatever the keys:
// past that, a miss with a kept answer is served it, one without is 503
// unavailable with Retry-After at once, and neither fetches. When the
// fetches land, misses fetch again.
func TestReadCacheMissesBounded(t *testing.T) {
	c := newReadCache(1<<20, 10)
	answer := func(context.Context) (coreclient.Answer, error) {
		return coreclient.Answer{Status: 200, Body: []byte("x"), CacheControl: "max-age=60"}, nil
	}
	if _, _, err := c.get("old", answer); err != nil {
		t.Fatal(err)
	}
	c.pos["old"].Value.(*cached).expires = time.Now().Add(-time.Second) // stale
	entered, release := make(chan struct{}, maxMisses), make(chan struct{})
	var wg sync.WaitGroup
	for i := range maxMisses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.get(fmt.Sprint("slow", i), func(ctx context.Context) (coreclient.Answer, error) {
				entered <- struct{}{}
				<-release
				return answer(ctx)
			})
		}()
	}
	for range maxMisses {
		<-entered
	}
	var fetched atomic.Int64
	count := func(ctx context.Context) (coreclient.Answer, error) { fetched.Add(1); return answer(ctx) }
	_, _, err := c.get("new", count)
	var e *gateway.Error
	if !errors.As(err, &e) || e.Code != gateway.EUnavailable || e.RetryAfter <= 0 || fetched.Load() != 0 {
		t.Fatalf("a new key with %d fetches in flight = %v (fetched %d); want unavailable with a Retry-After, no fetch", maxMisses, err, fetched.Load())
	}
	if a, _, err := c.get("old", count); err != nil || string(a.Body) != "x" || fetched.Load() != 0 {
		t.Fatalf("a stale key with %d fetches in flight = %q, %v (fetched %d); want the stale answer, no fetch", maxMisses, a.Body, err, fetched.Load())
	}
	close(release)
	wg.Wait()
	if _, _, err := c.get("new", count); err != nil || fetched.Load() != 1 {
		t.Fatalf("a new key after the fetches landed = %v (fetched %d); want fetched", err, fetched.Load())
	}
}
