// Package seatmap keeps each live event's seat availability in the
// seat-map cache (shared/seatmap's format: one bit per seat position, set
// when the seat can be held):
// flipped per seat after every hold and release, and rebuilt from
// PostgreSQL every second, which frees the seats of holds that lapsed and
// heals a missed update. The gateway
// serves it, at most a second or two stale; PostgreSQL decides. The same
// rebuild feeds Taken (taken.go), the core's memory of the seats a hold
// cannot win, which refuses such holds without a database statement.
package seatmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/onsale/onsale/shared/seatmap"
)

// Store is what the keeper reads of the database (core/postgres).
type Store interface {
	// LiveSeatedEvents maps the events whose maps are kept to their capacity.
	LiveSeatedEvents(ctx context.Context) (map[int64]int, error)
	// TakenSeats lists the seats that cannot be held now: booked, or held
	// with the time left on the hold by the database's clock.
	TakenSeats(ctx context.Context, event int64) ([]TakenSeat, error)
	// SeatPositions maps seat ids to positions (static per event).
	SeatPositions(ctx context.Context, event int64) (map[string]int, error)
	// SeatBands maps band codes to their seat ids (static per event).
	SeatBands(ctx context.Context, event int64) (map[string][]string, error)
}

// TakenSeat is a seat that cannot be held now, as the database sees it.
type TakenSeat struct {
	Pos    int
	Booked bool
	Left   time.Duration // held: the time left on its hold
}

// Cache is where the maps are kept (core/redis).
type Cache interface {
	// Mark sets the seats at positions available or not.
	Mark(ctx context.Context, event int64, positions []int, available bool) error
	// Replace writes an event's whole map, expiring after ttl.
	Replace(ctx context.Context, event int64, capacity int, free []int, ttl time.Duration) error
}

// Keeper maintains the maps: the bitmaps in Cache (when set) and the
// snapshots of Taken (when set).
type Keeper struct {
	DB    Store
	Cache Cache
	Taken *Taken
	Log   *slog.Logger

	mu  sync.Mutex
	pos map[int64]map[string]int // seat positions, per event (static)
	ids map[int64]map[int]string // the same, position to seat id
	lay map[int64]*Layout        // the same with bands, for Taken

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
	if k.Cache == nil {
		return
	}
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
	p, _, _, err := k.layout(ctx, event)
	return p, err
}

// layout returns an event's seat positions both ways, and (with Taken) its
// Layout; static, so read once.
func (k *Keeper) layout(ctx context.Context, event int64) (map[string]int, map[int]string, *Layout, error) {
	k.mu.Lock()
	p, ok := k.pos[event]
	ids, lay := k.ids[event], k.lay[event]
	k.mu.Unlock()
	if ok {
		return p, ids, lay, nil
	}
	p, err := k.DB.SeatPositions(ctx, event)
	if err != nil {
		return nil, nil, nil, err
	}
	ids = make(map[int]string, len(p))
	for id, i := range p {
		ids[i] = id
	}
	if k.Taken != nil {
		bands, err := k.DB.SeatBands(ctx, event)
		if err != nil {
			return nil, nil, nil, err
		}
		lay = &Layout{Seats: p, Bands: bands}
	}
	k.mu.Lock()
	if k.pos == nil {
		k.pos, k.ids, k.lay = map[int64]map[string]int{}, map[int64]map[int]string{}, map[int64]*Layout{}
	}
	k.pos[event], k.ids[event], k.lay[event] = p, ids, lay
	k.mu.Unlock()
	return p, ids, lay, nil
}

// Rebuild writes every live event's map, and gives Taken its snapshot,
// from one read of the event's taken seats. An event that fails (its
// read, or Redis) does not stop the others': the errors are joined.
// Events no longer live are forgotten (their layouts too).
func (k *Keeper) Rebuild(ctx context.Context) error {
	events, err := k.DB.LiveSeatedEvents(ctx)
	if err != nil {
		return err
	}
	if k.Taken != nil {
		k.Taken.Retain(events)
	}
	k.mu.Lock()
	for ev := range k.pos {
		if _, ok := events[ev]; !ok {
			delete(k.pos, ev)
			delete(k.ids, ev)
			delete(k.lay, ev)
		}
	}
	k.mu.Unlock()
	var errs []error
	for ev, capacity := range events {
		if err := k.rebuild(ctx, ev, capacity); err != nil {
			errs = append(errs, fmt.Errorf("event %d: %w", ev, err))
		}
	}
	return errors.Join(errs...)
}

// rebuild is Rebuild's work for one event.
func (k *Keeper) rebuild(ctx context.Context, ev int64, capacity int) error {
	pos, ids, lay, err := k.layout(ctx, ev)
	if err != nil {
		return err
	}
	// Before the query: the database reads its clock later, so each
	// hold's deadline below is no later than its lapse (Taken).
	sent := time.Now()
	taken, err := k.DB.TakenSeats(ctx, ev)
	if err != nil {
		return err
	}
	if k.Taken != nil {
		states := make(map[string]SeatState, len(taken))
		for _, s := range taken {
			if id, ok := ids[s.Pos]; ok {
				states[id] = SeatState{Booked: s.Booked, Until: sent.Add(s.Left)}
			}
		}
		k.Taken.Replace(ev, lay, states, sent)
	}
	if k.Cache == nil {
		return nil
	}
	notFree := make(map[int]bool, len(taken))
	for _, s := range taken {
		notFree[s.Pos] = true
	}
	free := make([]int, 0, max(0, len(pos)-len(taken)))
	for _, i := range pos {
		if !notFree[i] {
			free = append(free, i)
		}
	}
	slices.Sort(free)
	return k.Cache.Replace(ctx, ev, capacity, free, seatmap.TTL)
}

// Interval is how often cmd/core's keeper rebuilds: the fans' map and
// Taken's snapshot are then at most about a second behind another core's
// changes.
const Interval = time.Second

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
