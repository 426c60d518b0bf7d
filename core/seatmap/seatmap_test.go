package seatmap_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	coreredis "github.com/onsale/onsale/core/redis"
	"github.com/onsale/onsale/core/seatmap"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/redisconn"
	sharedseatmap "github.com/onsale/onsale/shared/seatmap"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

func redisClient(t *testing.T) goredis.UniversalClient {
	c, err := redisconn.Open(ctx, servicetest.Env(t, "REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bit reads a seat's bit.
func bit(t *testing.T, rdb goredis.UniversalClient, ev int64, pos int) int64 {
	t.Helper()
	v, err := rdb.GetBit(ctx, sharedseatmap.Key(ev), int64(pos)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newKeeper makes a keeper on the real Redis (through wrap, when given) and
// a fresh database whose store reports seat changes to it, with one live
// cinema event.
func newKeeper(t *testing.T, wrap func(seatmap.Cache) seatmap.Cache) (*seatmap.Keeper, *postgres.DB, goredis.UniversalClient, int64) {
	t.Helper()
	rdb := redisClient(t)
	maps, err := coreredis.Open(ctx, servicetest.Env(t, "REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { maps.Close() })
	var cache seatmap.Cache = maps
	if wrap != nil {
		cache = wrap(maps)
	}
	k := &seatmap.Keeper{Cache: cache, Log: slog.New(slog.DiscardHandler)}
	db := postgrestest.NewDB(t, postgres.Options{OnSeats: k.Changed})
	k.DB = db
	// Redis keys are per event id; other tests' databases also start at 1.
	if _, err := db.Pool().Exec(ctx, `SELECT setval('events_id_seq', $1)`, 1_000_000+rand.Int64N(1<<40)); err != nil {
		t.Fatal(err)
	}
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "map", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(ctx, sharedseatmap.Key(ev)) })
	return k, db, rdb, ev
}

// The bitmap follows holds and releases seat by seat, and a rebuild from
// the database frees a lapsed hold's seats and repairs whatever it missed.
func TestKeeper(t *testing.T) {
	k, db, rdb, ev := newKeeper(t, nil)
	// The store queues each change before its call returns; k.Flush applies
	// the queue at once (what Run does as changes come), so every bit below
	// is read after its change is applied, never polled for.
	if err := k.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	pos, _ := db.SeatPositions(ctx, ev)
	a, b := pos["AUD-C-3"], pos["AUD-C-4"]
	if bit(t, rdb, ev, a) != 1 {
		t.Fatal("a free seat is not marked available")
	}
	h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "x", Request: core.HoldRequest{Seats: []string{"AUD-C-3", "AUD-C-4"}}})
	if err != nil {
		t.Fatal(err)
	}
	k.Flush()
	if bit(t, rdb, ev, a) != 0 || bit(t, rdb, ev, b) != 0 {
		t.Fatal("held seats still marked available")
	}
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "x"}); err != nil {
		t.Fatal(err)
	}
	k.Flush()
	if bit(t, rdb, ev, a) != 1 || bit(t, rdb, ev, b) != 1 {
		t.Fatal("released seats not marked available again")
	}
	h2, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "y", Request: core.HoldRequest{Seats: []string{"AUD-C-3"}}})
	if err != nil {
		t.Fatal(err)
	}
	k.Flush()
	if bit(t, rdb, ev, a) != 0 {
		t.Fatal("a held seat still marked available")
	}
	db.Pool().Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 s' WHERE id = $1`, h2.ID)
	db.Pool().Exec(ctx, `UPDATE seats SET hold_until = now() - interval '1 s' WHERE hold_id = $1`, h2.ID)
	// A lapsed hold's seat is free at the next rebuild (no sweep ends a
	// seated hold).
	if err := k.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if bit(t, rdb, ev, a) != 1 {
		t.Fatal("a lapsed hold's seat is not marked available at the next rebuild")
	}
	if r, err := db.Sweep(ctx); err != nil || r.Holds != 0 {
		t.Fatalf("sweep = %+v, %v; want no hold swept (a seated hold needs no sweep)", r, err)
	}
	// A missed update (here: the bitmap wiped) heals at the next rebuild.
	rdb.Set(ctx, sharedseatmap.Key(ev), []byte{0}, time.Minute)
	if err := k.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := rdb.BitCount(ctx, sharedseatmap.Key(ev), nil).Result()
	if n != 250 {
		t.Fatalf("after a rebuild %d seats marked available; want all 250", n)
	}
}

// firstReplaceOnly is the cache with every rebuild after the first one
// dropped: the bits then change only through Run taking per-seat changes
// off its queue, while Run still ticks and rebuilds on its short interval.
type firstReplaceOnly struct {
	seatmap.Cache
	mu       sync.Mutex
	replaces int
}

func (c *firstReplaceOnly) Replace(ctx context.Context, event int64, capacity int, free []int, ttl time.Duration) error {
	c.mu.Lock()
	c.replaces++
	n := c.replaces
	c.mu.Unlock()
	if n > 1 {
		return nil
	}
	return c.Cache.Replace(ctx, event, capacity, free, ttl)
}

func (c *firstReplaceOnly) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaces
}

// Run applies the per-seat changes the store queues: the bit of a held
// seat clears and that of a released seat sets, each within a deadline,
// with no test-only Flush and no rebuild to repair them.
func TestKeeperRun(t *testing.T) {
	var cache *firstReplaceOnly
	k, db, rdb, ev := newKeeper(t, func(c seatmap.Cache) seatmap.Cache {
		cache = &firstReplaceOnly{Cache: c}
		return cache
	})

	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		k.Run(runCtx, 20*time.Millisecond)
	}()
	defer func() {
		stop()
		select {
		case <-runDone:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}()

	pos, _ := db.SeatPositions(ctx, ev)
	a := pos["AUD-D-5"]
	waitBit := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for bit(t, rdb, ev, a) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: bit of AUD-D-5 not %d after 10 s", what, want)
			}
			time.Sleep(5 * time.Millisecond) // polling the cache for the change, not timing Run
		}
	}
	waitBit(1, "Run's first rebuild") // the map exists; every later bit flip is the queue's
	h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "x", Request: core.HoldRequest{Seats: []string{"AUD-D-5"}}})
	if err != nil {
		t.Fatal(err)
	}
	waitBit(0, "held seat")
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "x"}); err != nil {
		t.Fatal(err)
	}
	waitBit(1, "released seat")
	deadline := time.Now().Add(10 * time.Second)
	for cache.count() < 2 { // Run kept ticking while it took changes
		if time.Now().After(deadline) {
			t.Fatal("Run never rebuilt again on its interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
