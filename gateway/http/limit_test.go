package http

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	l := newLimiter(1, 2, 100)
	now := time.Now()
	if ok, _ := l.allow("a", now); !ok {
		t.Fatal("first request refused")
	}
	l.allow("a", now)
	ok, wait := l.allow("a", now)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("third request within the burst of 2: ok=%v wait=%v; want refused with a wait under 1 s", ok, wait)
	}
	if ok, _ := l.allow("b", now); !ok {
		t.Fatal("another key shares a's bucket")
	}
	if ok, _ := l.allow("a", now.Add(1100*time.Millisecond)); !ok {
		t.Fatal("a still refused after the refill")
	}
	for i := range 1000 {
		l.allow(fmt.Sprint(i), now)
	}
	if n := len(l.slots); n != 128 {
		t.Fatalf("limiter's table has %d buckets after 1000 keys; want the 128 it was made with", n)
	}
	if n := l.size(now); n > 128 {
		t.Fatalf("limiter counts %d keys; bounded at 128", n)
	}
	later := now.Add(2 * time.Minute)
	if l.allow("late", later); l.size(later) > 2 {
		t.Fatalf("after a minute idle %d buckets are spent; want only the new key's", l.size(later))
	}
}

// A key served at its rate and burst, whoever else spends: a client that
// keeps trying gets exactly its rate (a refusal costs nothing), and one
// whose buckets were both spent by others is refused until they refill.
func TestLimiterRate(t *testing.T) {
	l := newLimiter(10, 5, 1<<10)
	now := time.Now()
	served := 0
	for i := range 1000 { // 10 s of a request a millisecond
		if ok, _ := l.allow("hammer", now.Add(time.Duration(i)*10*time.Millisecond)); ok {
			served++
		}
	}
	if served < 5+99 || served > 5+100 {
		t.Fatalf("a key hammering for 10 s at 10/s burst 5 was served %d times; want 104 or 105", served)
	}
}

// A flood of new keys never resets what a counted client spent, and a key
// that shares one of its two buckets with a spent one is still served from
// the other. The control: a key whose two buckets are both spent is
// refused, so the test sees sharing when it happens.
func TestLimiterSharedBuckets(t *testing.T) {
	l := newLimiter(1, 2, 1<<12)
	now := time.Now()
	l.allow("a", now)
	l.allow("a", now)
	a1, a2 := l.buckets(maphash.String(l.seed, "a"))
	for i := range 1000 {
		// (Keys that share a's buckets can only spend them further: the
		// control below, a served after its refill, needs them left alone.)
		if b1, b2 := l.buckets(maphash.String(l.seed, fmt.Sprint("new", i))); b1 != a1 && b1 != a2 && b2 != a1 && b2 != a2 {
			l.allow(fmt.Sprint("new", i), now)
		}
	}
	if ok, _ := l.allow("a", now); ok {
		t.Fatal("a's spent bucket was reset by a flood of new keys")
	}
	if ok, _ := l.allow("a", now.Add(1100*time.Millisecond)); !ok {
		t.Fatal("a still refused after its refill")
	}
	// Keys that share one bucket with "spent", and one that shares both.
	spent := "spent"
	sa, sb := l.buckets(maphash.String(l.seed, spent))
	var one, both string
	for i := 0; one == "" || both == ""; i++ {
		k := fmt.Sprint("k", i)
		a, b := l.buckets(maphash.String(l.seed, k))
		switch {
		case a == b || k == spent:
		case (a == sa || a == sb) != (b == sa || b == sb) && one == "":
			one = k
		case (a == sa || a == sb) && (b == sa || b == sb) && both == "":
			both = k
		}
		if i > 1e8 {
			t.Fatal("no key shares the spent key's buckets")
		}
	}
	later := now.Add(time.Minute)
	for range 10 {
		l.allow(spent, later)
	}
	if ok, _ := l.allow(one, later); !ok {
		t.Fatalf("%q shares one bucket with a spent key and was refused", one)
	}
	if ok, _ := l.allow(both, later); ok {
		t.Fatalf("%q shares both buckets with a spent key and was served: the buckets are not shared", both)
	}
}

// Requests at one instant from many goroutines get exactly the burst (the
// buckets change by compare-and-swap; run with -race).
func TestLimiterConcurrent(t *testing.T) {
	l := newLimiter(1, 50, 1<<10)
	now := time.Now()
	var served atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if ok, _ := l.allow("a", now); ok {
					served.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// The two buckets are charged one after the other, so racing requests
	// can each find the other's bucket still open: at most one more than
	// the burst per request in flight (8 here), rarely any.
	if n := served.Load(); n < 50 || n > 58 {
		t.Fatalf("%d requests at one instant served; want the burst, 50 (at most 58 with races between the two buckets)", n)
	}
}

// Limits key IPv6 by /64, IPv4 (mapped or not) by address.
func TestAddrKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"2001:db8:1:2::1", "2001:db8:1:2:abcd::9"},
		{"192.0.2.1", "::ffff:192.0.2.1"},
	} {
		if addrKey(tc.a) != addrKey(tc.b) {
			t.Errorf("addrKey(%q) = %q, addrKey(%q) = %q; want one key", tc.a, addrKey(tc.a), tc.b, addrKey(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"192.0.2.1", "192.0.2.2"},
	} {
		if addrKey(tc.a) == addrKey(tc.b) {
			t.Errorf("addrKey(%q) = addrKey(%q) = %q; want two keys", tc.a, tc.b, addrKey(tc.a))
		}
	}
}
