package http

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
