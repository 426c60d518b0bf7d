package redis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// The tick lease: the first gateway to tick holds it; another's tick runs
// nothing and is told the holder's last tick, which a GET (LastTick)
// reads too. Once the holder stops renewing it, the lease and the last
// tick lapse together; the next gateway takes it and the first is then
// told the new holder's tick. After the gap the bucket lets through at
// most its one second of burst, however long the gap was.
func TestTickLease(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers = 600, 1000 // burst: one second's worth, 10
		})
		for f := range 100 {
			s.Join(ctx, ev, fmt.Sprint(f))
		}
		a := gateway.Lease{Holder: "gateway-a", For: 300 * time.Millisecond}
		b := gateway.Lease{Holder: "gateway-b", For: 300 * time.Millisecond}
		bucketLast := func() string {
			v, err := s.Client().HGet(ctx, fmt.Sprintf("{evt:%d}:bucket", ev), "last").Result()
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		first, err := s.Tick(ctx, ev, 1, a)
		if err != nil || first.Ticker != a.Holder || first.DialsVersion < 0 {
			t.Fatalf("first tick = %+v, %v; want gateway-a's", first, err)
		}
		last := bucketLast()
		time.Sleep(20 * time.Millisecond)
		told, err := s.Tick(ctx, ev, 1, b)
		if err != nil || told != first {
			t.Fatalf("gateway-b's tick while a holds the lease = %+v, %v; want a's %+v", told, err, first)
		}
		if bucketLast() != last {
			t.Fatal("gateway-b's tick ran the bucket while gateway-a held the lease")
		}
		read, ok, err := s.LastTick(ctx, ev)
		if left := read.LeaseLeft; err == nil && ok && (left <= 0 || left > a.For) {
			t.Fatalf("LastTick's lease left = %v; want (0, %v]", left, a.For)
		}
		if read.LeaseLeft = 0; err != nil || !ok || read != first {
			t.Fatalf("LastTick = %+v, %v, %v; want a's %+v", read, ok, err, first)
		}

		time.Sleep(1500 * time.Millisecond) // a stops ticking: its lease lapses; 15 places' worth of tokens would accrue
		if read, ok, err := s.LastTick(ctx, ev); err != nil || ok {
			t.Fatalf("LastTick after the lease lapsed = %+v, %v, %v; want none", read, ok, err)
		}
		took, err := s.Tick(ctx, ev, 1, b)
		if err != nil || took.Ticker != b.Holder {
			t.Fatalf("gateway-b's tick after a's lease lapsed = %+v, %v; want b's own", took, err)
		}
		if got := took.Serving - first.Serving; got != 10 {
			t.Fatalf("%d places offered at the takeover after a 1.5 s gap; want the burst, one second's worth: 10", got)
		}
		if back, err := s.Tick(ctx, ev, 1, a); err != nil || back != took {
			t.Fatalf("gateway-a's tick, back = %+v, %v; want b's %+v", back, err, took)
		}
		if again, err := s.Tick(ctx, ev, 1, b); err != nil || again.Ticker != b.Holder || again.Now.Before(took.Now) {
			t.Fatalf("gateway-b's next tick = %+v, %v; want its own, renewing the lease", again, err)
		}

		// Release: a gateway gives up only its own lease.
		if err := s.Release(ctx, ev, a.Holder); err != nil {
			t.Fatal(err)
		}
		if read, ok, err := s.LastTick(ctx, ev); err != nil || !ok || read.Ticker != b.Holder {
			t.Fatalf("LastTick after gateway-a released b's lease = %+v, %v, %v; want b's still", read, ok, err)
		}
		if err := s.Release(ctx, ev, b.Holder); err != nil {
			t.Fatal(err)
		}
		if read, ok, err := s.LastTick(ctx, ev); err != nil || ok {
			t.Fatalf("LastTick after gateway-b released its lease = %+v, %v, %v; want none", read, ok, err)
		}
		if next, err := s.Tick(ctx, ev, 1, a); err != nil || next.Ticker != a.Holder {
			t.Fatalf("gateway-a's tick after b released the lease = %+v, %v; want a's own", next, err)
		}
	})
}

// A room that is gone (no dials) has no lease to hold: a tick says so
// (version -1) and stores nothing for other gateways to read.
func TestTickLeaseGoneRoom(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		tk, err := s.Tick(ctx, ev, 1, gateway.Lease{Holder: "gateway-a", For: time.Second})
		if err != nil || tk.DialsVersion != -1 {
			t.Fatalf("tick of a gone room = %+v, %v; want version -1", tk, err)
		}
		if _, ok, err := s.LastTick(ctx, ev); err != nil || ok {
			t.Fatalf("LastTick of a gone room = %v, %v; want none", ok, err)
		}
		if n, _ := s.Client().Exists(ctx, fmt.Sprintf("{evt:%d}:tick", ev)).Result(); n != 0 {
			t.Fatal("a gone room's tick took a lease")
		}
	})
}
