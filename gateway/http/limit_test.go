package http

import (
	"fmt"
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
	if n := l.size(); n > 100 {
		t.Fatalf("limiter holds %d keys; bounded at 100", n)
	}
	l.allow("late", now.Add(2*time.Minute))
	if n := l.size(); n != 1 {
		t.Fatalf("after a minute idle %d keys remain; want only the new one", n)
	}
}

// A full map never resets an active client's bucket: a flood of new keys
// while a has spent its burst leaves a refused (the control: after its
// refill it is served again), and the newcomers share one overflow bucket,
// so the flood gets no more than one burst past the full map.
func TestLimiterFullMapKeepsActiveBuckets(t *testing.T) {
	l := newLimiter(1, 2, 100)
	now := time.Now()
	l.allow("a", now)
	l.allow("a", now)
	served := 0
	for i := range 1000 {
		if ok, _ := l.allow(fmt.Sprint("new", i), now); ok {
			served++
		}
	}
	if n := l.size(); n > 100 {
		t.Fatalf("limiter holds %d keys; bounded at 100", n)
	}
	if ok, _ := l.allow("a", now); ok {
		t.Fatal("a's spent bucket was reset by a flood of new keys")
	}
	if served > 99+2 {
		t.Fatalf("%d of 1000 new keys served past a full map; want the 99 counted and one overflow burst of 2", served)
	}
	if ok, _ := l.allow("a", now.Add(1100*time.Millisecond)); !ok {
		t.Fatal("a still refused after its refill")
	}
	// Once buckets idle (refilled), newcomers get their own again.
	later := now.Add(5 * time.Second)
	if ok, _ := l.allow("fresh", later); !ok || l.size() > 100 {
		t.Fatalf("a new key after the others idled: served %v, %d keys", ok, l.size())
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
