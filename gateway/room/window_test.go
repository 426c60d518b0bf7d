package room_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
	"github.com/onsale/onsale/gateway/room"
)

// eachRedis runs fn against the single Redis server and the cluster.
func eachRedis(t *testing.T, fn func(t *testing.T, s *redis.Store)) {
	t.Run("single", func(t *testing.T) { fn(t, redistest.NewStore(t, false)) })
	t.Run("cluster", func(t *testing.T) { fn(t, redistest.NewStore(t, true)) })
}

// roomKeys are every key of an event's room (gateway/redis keysOf).
func roomKeys(ev int64) []string {
	var out []string
	for _, k := range []string{"dials", "pre", "ids", "frozen", "seq", "bucket", "offers", "active", "claims"} {
		out = append(out, fmt.Sprintf("{evt:%d}:%s", ev, k))
	}
	return out
}

func listed(t *testing.T, s *redis.Store, ev int64) bool {
	t.Helper()
	ok, err := s.Client().SIsMember(context.Background(), "onsale:events", ev).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func exists(t *testing.T, s *redis.Store, ev int64) int64 {
	t.Helper()
	var n int64
	for _, k := range roomKeys(ev) {
		c, err := s.Client().Exists(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}

// A fan's join of a catalog event outside its sale window (before it, or
// after the sale closed) writes nothing to Redis: no room, nothing added
// to the events every gateway ticks; it is answered not_open or closed
// from the catalog. The control: an event on sale is set up and listed,
// its keys expiring at the window's end.
func TestEnsureOutsideWindowWritesNothing(t *testing.T) {
	eachRedis(t, func(t *testing.T, s *redis.Store) {
		ctx := context.Background()
		now := time.Now()
		cat := &catalog{events: map[int64]gateway.Event{}}
		want := map[int64]string{}
		for i := range 40 {
			id := redistest.Event(t, s)
			if i%2 == 0 {
				cat.events[id] = gateway.Event{OnsaleAt: now.Add(24 * time.Hour), StartsAt: now.Add(48 * time.Hour)}
				want[id] = gateway.ENotOpen
			} else {
				cat.events[id] = gateway.Event{OnsaleAt: now.Add(-48 * time.Hour), StartsAt: now.Add(-24 * time.Hour)}
				want[id] = gateway.EClosed
			}
		}
		r := room.New(s, cat, nil)
		for id, code := range want {
			if _, err := r.Ensure(ctx, id); gateway.ErrorCode(err) != code {
				t.Fatalf("Ensure(%d) = %v; want %s", id, err, code)
			}
			if listed(t, s, id) || exists(t, s, id) != 0 {
				t.Fatalf("event %d outside its window: listed %v, %d keys; want nothing written", id, listed(t, s, id), exists(t, s, id))
			}
		}
		if ids, _ := s.Events(ctx); len(ids) > 0 {
			for _, id := range ids {
				if _, ours := want[id]; ours {
					t.Fatalf("Events() lists %d, outside its window", id)
				}
			}
		}

		on := redistest.Event(t, s)
		closes := now.Add(2 * time.Hour).Truncate(time.Millisecond)
		cat.events[on] = gateway.Event{OnsaleAt: now.Add(-time.Minute), StartsAt: closes}
		if _, err := r.Ensure(ctx, on); err != nil {
			t.Fatalf("Ensure(on sale) = %v", err)
		}
		if !listed(t, s, on) {
			t.Fatal("the event on sale is not listed")
		}
		at, err := s.Client().PExpireTime(ctx, roomKeys(on)[0]).Result()
		if wantAt := closes.Add(gateway.WindowGrace); err != nil || at != time.Duration(wantAt.UnixMilli())*time.Millisecond {
			t.Fatalf("the dials expire at %v (%v); want %v (closes_at + grace)", at, err, wantAt.UnixMilli())
		}
	})
}

// counting counts each event's ticks.
type counting struct {
	gateway.Store
	mu    sync.Mutex
	ticks map[int64]int
}

func (c *counting) Tick(ctx context.Context, ev int64, f float64, lease gateway.Lease) (gateway.Tick, error) {
	c.mu.Lock()
	c.ticks[ev]++
	c.mu.Unlock()
	return c.Store.Tick(ctx, ev, f, lease)
}

func (c *counting) count(ev int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ticks[ev]
}

// The ticker ticks an event on sale, leaves one before its window alone,
// and retires one whose window is over: out of the listed events, no more
// ticks, its keys gone (their expiry, the window's end, passed). Moving an
// event's end moves every key's expiry.
func TestTickOnlyInWindow(t *testing.T) {
	eachRedis(t, func(t *testing.T, s *redis.Store) {
		ctx := context.Background()
		now := time.Now()
		onsale, closes := now.Add(-time.Minute), now.Add(2*time.Hour)
		onSale, past, early := redistest.Event(t, s), redistest.Event(t, s), redistest.Event(t, s)
		cat := &catalog{events: map[int64]gateway.Event{
			onSale: {OnsaleAt: onsale, StartsAt: closes},
			past:   {OnsaleAt: onsale, StartsAt: closes},
			early:  {OnsaleAt: now.Add(24 * time.Hour), StartsAt: now.Add(48 * time.Hour)},
		}}
		store := &counting{Store: s, ticks: map[int64]int{}}
		r := room.New(store, cat, nil)
		for _, id := range []int64{onSale, past} {
			if _, err := r.Ensure(ctx, id); err != nil {
				t.Fatalf("Ensure(%d) = %v", id, err)
			}
			if _, err := s.Join(ctx, id, "vis:a"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Operate(ctx, early); err != nil {
			t.Fatalf("Operate(early) = %v", err)
		}
		// The sale of past ended two hours ago, more than the grace.
		d := gateway.Dials{PrequeueAt: now.Add(-4 * time.Hour), OnsaleAt: now.Add(-3 * time.Hour), ClosesAt: now.Add(-2 * time.Hour)}
		if _, err := s.PatchDials(ctx, past, d, []string{"prequeue_at", "onsale_at", "closes_at"}); err != nil {
			t.Fatal(err)
		}
		// The end of onSale moves an hour later: every key's expiry follows.
		closes = closes.Add(time.Hour).Truncate(time.Millisecond)
		ver, err := s.PatchDials(ctx, onSale, gateway.Dials{ClosesAt: closes}, []string{"closes_at"})
		if err != nil {
			t.Fatal(err)
		}

		run, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); r.Run(run, 10*time.Millisecond) }()
		defer func() { stop(); <-done }()
		waitUntil(t, "the past event retired", func() bool { _, ok := r.View(past); return !ok && !listed(t, s, past) })
		waitUntil(t, "the new end read", func() bool { v, _ := r.View(onSale); return v.Dials.Version == ver })
		pastTicks, earlyTicks, from := store.count(past), store.count(early), store.count(onSale)
		waitUntil(t, "20 more ticks of the event on sale", func() bool { return store.count(onSale) >= from+20 })
		if n, m := store.count(past), store.count(early); n != pastTicks || m != earlyTicks || m > 1 {
			t.Fatalf("ticks while the event on sale ticked 20 times: past %d -> %d, early %d -> %d; want none (early: only Operate's)", pastTicks, n, earlyTicks, m)
		}
		if n := exists(t, s, past); n != 0 {
			t.Fatalf("the past event keeps %d keys; want none", n)
		}
		if _, ok := r.View(early); !ok || !listed(t, s, early) {
			t.Fatal("the early event was dropped; want it kept, waiting for its window")
		}
		wantAt := time.Duration(closes.Add(gateway.WindowGrace).UnixMilli()) * time.Millisecond
		for _, k := range roomKeys(onSale) {
			at, err := s.Client().PExpireTime(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if at != -2*time.Nanosecond && at != wantAt { // -2: no such key
				t.Fatalf("%s expires at %v; want %v (the moved closes_at + grace)", k, at, wantAt)
			}
		}
	})
}
