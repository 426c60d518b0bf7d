package redis_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	coreredis "github.com/onsale/onsale/core/redis"
	"github.com/onsale/onsale/shared/seatmap"
	"github.com/onsale/onsale/shared/servicetest"
)

// Replace marks exactly the free positions inside the capacity: a position
// past it (the last byte's padding) stays clear, as the database's old
// Availability left it.
func TestReplaceWithinCapacity(t *testing.T) {
	ctx := context.Background()
	maps, err := coreredis.Open(ctx, servicetest.Env(t, "REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { maps.Close() })
	ev := 1_000_000 + rand.Int64N(1<<40) // keys are per event id; other tests share the server
	const capacity = 10                  // two bytes, positions 10..15 padding
	if err := maps.Replace(ctx, ev, capacity, []int{0, 9, 10, 15, 16}, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { maps.Del(ctx, ev) })
	got, err := maps.Bitmap(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || seatmap.Count(got) != 2 || !seatmap.Available(got, 0) || !seatmap.Available(got, 9) {
		t.Fatalf("Replace(capacity %d, free 0 9 10 15 16) = %08b (%d set); want positions 0 and 9 only", capacity, got, seatmap.Count(got))
	}
}
