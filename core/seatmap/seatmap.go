// Package seatmap keeps each live event's seat availability in the
// seat-map cache (shared/seatmap's format: one bit per seat position, set
// when the seat can be held):
// flipped per seat after every hold, release and sweep, and rebuilt from
// PostgreSQL every few seconds so a missed update heals itself. The gateway
// serves it, at most a second or two stale; PostgreSQL decides.
package seatmap

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/onsale/onsale/shared/seatmap"
)

// Store is what the keeper reads of the database (core/postgres).
type Store interface {
	// LiveSeatedEvents maps the events whose maps are kept to their capacity.
	LiveSeatedEvents(ctx context.Context) (map[int64]int, error)
	// FreePositions lists the positions of the seats that can be held now.
	FreePositions(ctx context.Context, event int64) ([]int, error)
	// SeatPositions maps seat ids to positions (static per event).
	SeatPositions(ctx context.Context, event int64) (map[string]int, error)
}

// Cache is where the maps are kept (core/redis).
type Cache interface {
	// Mark sets the seats at positions available or not.
	Mark(ctx context.Context, event int64, positions []int, available bool) error
	// Replace writes an event's whole map, expiring after ttl.
	Replace(ctx context.Context, event int64, capacity int, free []int, ttl time.Duration) error
}

// Keeper maintains the maps.
type Keeper struct {
	DB    Store
	Cache Cache
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

func (k *Keeper) queue() chan change {
	k.once.Do(func() { k.changes = make(chan change, 16384) })
	return k.changes
}

// Changed queues a flip of the bits of seats that became available or
// not. It is the postgres.Options.OnSeats hook: it runs after commit and
// never blocks the hold path; Run applies the queue. A change dropped
// because the queue is full only waits for the next rebuild, as does one
// the cache refused.
func (k *Keeper) Changed(event int64, seats []string, available bool) {
	select {
	case k.queue() <- change{event, seats, available}:
	default:
	}
}

// apply flips the bits of one queued change.
func (k *Keeper) apply(c change) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	pos, err := k.positions(ctx, c.event)
	if err != nil {
		return
	}
	at := make([]int, 0, len(c.seats))
	for _, s := range c.seats {
		if i, ok := pos[s]; ok {
			at = append(at, i)
		}
	}
	if err := k.Cache.Mark(ctx, c.event, at, c.available); err != nil {
		k.Log.Debug("seat map update failed; the next rebuild heals it", "event", c.event, "err", err)
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

// Rebuild writes every live event's map from the database.
func (k *Keeper) Rebuild(ctx context.Context) error {
	events, err := k.DB.LiveSeatedEvents(ctx)
	if err != nil {
		return err
	}
	for ev, capacity := range events {
		free, err := k.DB.FreePositions(ctx, ev)
		if err != nil {
			return err
		}
		if err := k.Cache.Replace(ctx, ev, capacity, free, seatmap.TTL); err != nil {
			return err
		}
	}
	return nil
}

// Run applies queued changes as they come and rebuilds every interval,
// until ctx ends.
func (k *Keeper) Run(ctx context.Context, interval time.Duration) {
	changes := k.queue()
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
			case c := <-changes:
				k.apply(c)
			case <-t.C:
				waiting = false
			}
		}
	}
}
