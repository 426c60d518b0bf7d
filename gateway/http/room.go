package http

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
)

// view is what a gateway knows of an event between ticks: the dials and the
// last tick. Polls read it; only the ticker writes it.
type view struct {
	dials   gateway.Dials
	tick    gateway.Tick
	fetched time.Time // of the last successful tick
	// offerRate is how fast the serving counter moved over the last
	// minute, per minute: the ETA's measure (claims lag behind offers).
	offerRate float64
	history   []servingAt
}

type servingAt struct {
	at      time.Time
	serving int64
}

// Room caches every known event's view, refreshed by one ticker: each tick
// advances the admission bucket in Redis and reads back the serving
// counter, so a poll costs no round trip, and a dial change (a new version)
// is read within one tick.
type Room struct {
	Store   *redis.Store
	CoreURL string // for an unknown event's onsale and show times
	Log     *slog.Logger

	mu     sync.RWMutex
	events map[int64]*view
	ok     bool // the last tick reached Redis
}

// NewRoom returns a room over store.
func NewRoom(store *redis.Store, coreURL string, log *slog.Logger) *Room {
	return &Room{Store: store, CoreURL: coreURL, Log: log, events: make(map[int64]*view)}
}

// View returns a copy of an event's view, false when unknown.
func (r *Room) View(event int64) (view, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	v, ok := r.events[event]
	if !ok {
		return view{}, false
	}
	return *v, true
}

// Healthy reports whether the last tick reached Redis.
func (r *Room) Healthy() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.ok
}

// Run ticks every interval until ctx ends.
func (r *Room) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastList time.Time
	for {
		if time.Since(lastList) > time.Second {
			if ids, err := r.Store.Events(ctx); err == nil {
				r.mu.Lock()
				for _, id := range ids {
					if _, ok := r.events[id]; !ok {
						r.events[id] = &view{}
					}
				}
				r.mu.Unlock()
				lastList = time.Now()
			}
		}
		r.tickAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Room) tickAll(ctx context.Context) {
	r.mu.RLock()
	ids := make([]int64, 0, len(r.events))
	for id := range r.events {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	ok := true
	for _, id := range ids {
		if err := r.refresh(ctx, id); err != nil {
			ok = false
			if ctx.Err() == nil {
				r.Log.Warn("tick failed; serving from cache, admission paused", "event", id, "err", err)
			}
		}
	}
	r.mu.Lock()
	r.ok = ok
	r.mu.Unlock()
}

// refresh ticks one event and re-reads its dials when their version moved.
func (r *Room) refresh(ctx context.Context, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	tk, err := r.Store.Tick(ctx, id)
	if err != nil {
		return err
	}
	if tk.DialsVersion < 0 {
		// The event's room is gone from Redis (removed, or Redis lost
		// it): forget it; the next join sets it up again.
		r.Forget(id)
		return nil
	}
	r.mu.RLock()
	prev, ok := r.events[id]
	if !ok {
		r.mu.RUnlock()
		return nil
	}
	cur := *prev
	r.mu.RUnlock()
	if cur.fetched.IsZero() || tk.DialsVersion != cur.dials.Version {
		d, err := r.Store.Dials(ctx, id)
		if err != nil {
			return err
		}
		cur.dials = d
	}
	now := time.Now()
	if tk.Now.Before(cur.tick.Now) {
		return nil // a concurrent refresh stored a newer tick: never go back
	}
	cur.tick, cur.fetched = tk, now
	cur.history = append(slices.Clip(cur.history), servingAt{now, tk.Serving})
	for len(cur.history) > 1 && now.Sub(cur.history[0].at) > time.Minute {
		cur.history = cur.history[1:]
	}
	if h := cur.history[0]; now.Sub(h.at) > 5*time.Second {
		cur.offerRate = float64(tk.Serving-h.serving) / now.Sub(h.at).Minutes()
	}
	r.mu.Lock()
	r.events[id] = &cur
	r.mu.Unlock()
	return nil
}

// Forget drops an event's view.
func (r *Room) Forget(id int64) {
	r.mu.Lock()
	delete(r.events, id)
	r.mu.Unlock()
}

// Ensure makes an event known: its dials are initialised (only where unset)
// from the core's onsale and show times, then read once.
func (r *Room) Ensure(ctx context.Context, id int64) (view, error) {
	if v, ok := r.View(id); ok && !v.fetched.IsZero() {
		return v, nil
	}
	if _, err := r.Store.Dials(ctx, id); err == gateway.ErrNoEvent {
		ev, err := r.coreEvent(ctx, id)
		if err != nil {
			return view{}, err
		}
		if err := r.Store.InitDials(ctx, id, gateway.DefaultDials(ev.OnsaleAt, ev.StartsAt)); err != nil {
			return view{}, err
		}
	} else if err != nil {
		return view{}, err
	}
	r.mu.Lock()
	if _, ok := r.events[id]; !ok {
		r.events[id] = &view{}
	}
	r.mu.Unlock()
	if err := r.refresh(ctx, id); err != nil {
		return view{}, err
	}
	v, _ := r.View(id)
	return v, nil
}

type coreEvent struct {
	OnsaleAt time.Time `json:"onsale_at"`
	StartsAt time.Time `json:"starts_at"`
}

func (r *Room) coreEvent(ctx context.Context, id int64) (*coreEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/events/%d", r.CoreURL, id), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: core: %v", gateway.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, gateway.ErrNoEvent
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: core answered %s", gateway.ErrUnavailable, resp.Status)
	}
	var ev coreEvent
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		return nil, err
	}
	return &ev, nil
}
