// Package seatmap keeps each live event's seat availability in Redis as a
// bitmap ({evt:<id>}:seatmap, one bit per seat position, set when the seat
// can be held): flipped per seat after every hold, release and sweep, and
// rebuilt from PostgreSQL every few seconds so a missed update heals itself.
// The gateway serves it, at most a second or two stale; PostgreSQL decides.
package seatmap

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/core/postgres"
)

// Key is the Redis key of an event's availability bitmap.
func Key(event int64) string { return "{evt:" + strconv.FormatInt(event, 10) + "}:seatmap" }

// ttl lets the bitmap of an event no longer maintained disappear.
const ttl = time.Minute

// Keeper maintains the bitmaps.
type Keeper struct {
	DB    *postgres.DB
	Redis goredis.UniversalClient
	Log   *slog.Logger

	mu  sync.Mutex
	pos map[int64]map[string]int // seat positions, per event (static)

	once    sync.Once
	changes chan change
}

type change struct {
	event     int64
	seats     []string
	available bool
}

// Changed queues a flip of the bits of seats that became available or
// not. It is the postgres.Options.OnSeats hook: it runs after commit and
// never blocks the hold path; Run applies the queue in pipelined batches.
// A change dropped because the queue is full only waits for the next
// rebuild, as does one Redis refused.
func (k *Keeper) Changed(event int64, seats []string, available bool) {
	k.once.Do(func() { k.changes = make(chan change, 16384) })
	select {
	case k.changes <- change{event, seats, available}:
	default:
	}
}

// apply flips the bits of one queued change.
func (k *Keeper) apply(c change) {
	event, seats, available := c.event, c.seats, c.available
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	pos, err := k.positions(ctx, event)
	if err != nil {
		return
	}
	bit := 0
	if available {
		bit = 1
	}
	key := Key(event)
	_, err = k.Redis.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, s := range seats {
			if i, ok := pos[s]; ok {
				p.SetBit(ctx, key, int64(i), bit)
			}
		}
		return nil
	})
	if err != nil {
		k.Log.Debug("seat map update failed; the next rebuild heals it", "event", event, "err", err)
	}
}

func (k *Keeper) positions(ctx context.Context, event int64) (map[string]int, error) {
	k.mu.Lock()
	p, ok := k.pos[event]
	k.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := k.DB.SeatPositions(ctx, event)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.pos == nil {
		k.pos = map[int64]map[string]int{}
	}
	k.pos[event] = p
	k.mu.Unlock()
	return p, nil
}

// Rebuild writes every live event's bitmap from the database.
func (k *Keeper) Rebuild(ctx context.Context) error {
	events, err := k.DB.LiveSeatedEvents(ctx)
	if err != nil {
		return err
	}
	for ev, capacity := range events {
		bits, err := k.DB.Availability(ctx, ev, capacity)
		if err != nil {
			return err
		}
		if err := k.Redis.Set(ctx, Key(ev), bits, ttl).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Run applies queued changes as they come and rebuilds every interval,
// until ctx ends.
func (k *Keeper) Run(ctx context.Context, interval time.Duration) {
	k.once.Do(func() { k.changes = make(chan change, 16384) })
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := k.Rebuild(ctx); err != nil && ctx.Err() == nil {
			k.Log.Warn("seat map rebuild failed", "err", err)
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case c := <-k.changes:
				k.apply(c)
			case <-t.C:
				waiting = false
			}
		}
	}
}
