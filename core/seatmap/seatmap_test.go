package seatmap_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seatmap"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

func redisClient(t *testing.T) goredis.UniversalClient {
	u := servicetest.Env(t, "REDIS_URL")
	o, err := goredis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// bit reads a seat's bit once it settles at want (changes are applied
// asynchronously), or after a second whatever it is.
func bit(t *testing.T, rdb goredis.UniversalClient, ev int64, pos int, want ...int64) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		v, err := rdb.GetBit(ctx, seatmap.Key(ev), int64(pos)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || v == want[0] || time.Now().After(deadline) {
			return v
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The bitmap follows holds, releases and sweeps seat by seat, and a
// rebuild from the database repairs whatever it missed.
func TestKeeper(t *testing.T) {
	rdb := redisClient(t)
	k := &seatmap.Keeper{Redis: rdb, Log: slog.New(slog.DiscardHandler)}
	db := postgrestest.NewDB(t, postgres.Options{OnSeats: k.Changed})
	k.DB = db
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go k.Run(rctx, time.Hour) // applies the queued per-seat changes; rebuilds only when asked below
	// Redis keys are per event id; other tests' databases also start at 1.
	if _, err := db.Pool().Exec(ctx, `SELECT setval('events_id_seq', $1)`, 1_000_000+rand.Int64N(1<<40)); err != nil {
		t.Fatal(err)
	}
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "map", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(ctx, seatmap.Key(ev)) })
	if err := k.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	pos, _ := db.SeatPositions(ctx, ev)
	a, b := pos["AUD-C-3"], pos["AUD-C-4"]
	if bit(t, rdb, ev, a, 1) != 1 {
		t.Fatal("a free seat is not marked available")
	}
	h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "x", Request: core.HoldRequest{Seats: []string{"AUD-C-3", "AUD-C-4"}}})
	if err != nil {
		t.Fatal(err)
	}
	if bit(t, rdb, ev, a, 0) != 0 || bit(t, rdb, ev, b, 0) != 0 {
		t.Fatal("held seats still marked available")
	}
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "x"}); err != nil {
		t.Fatal(err)
	}
	if bit(t, rdb, ev, a, 1) != 1 || bit(t, rdb, ev, b, 1) != 1 {
		t.Fatal("released seats not marked available again")
	}
	h2, _ := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "y", Request: core.HoldRequest{Seats: []string{"AUD-C-3"}}})
	db.Pool().Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 s' WHERE id = $1`, h2.ID)
	db.Pool().Exec(ctx, `UPDATE seats SET hold_until = now() - interval '1 s' WHERE hold_id = $1`, h2.ID)
	if r, err := db.Sweep(ctx); err != nil || r.Seats != 1 {
		t.Fatalf("sweep = %+v, %v", r, err)
	}
	if bit(t, rdb, ev, a, 1) != 1 {
		t.Fatal("a swept seat is not marked available again")
	}
	// A missed update (here: the bitmap wiped) heals at the next rebuild.
	rdb.Set(ctx, seatmap.Key(ev), []byte{0}, time.Minute)
	if err := k.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := rdb.BitCount(ctx, seatmap.Key(ev), nil).Result()
	if n != 250 {
		t.Fatalf("after a rebuild %d seats marked available; want all 250", n)
	}
}
