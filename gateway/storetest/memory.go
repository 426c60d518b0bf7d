// Package storetest is an in-memory gateway.Store for tests of the room and
// the HTTP edge that need no Redis. It keeps the store's contract (states,
// outcomes, ErrNoEvent, ErrUnavailable), not its admission bucket: a test
// sets how far the line is served with Serve.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/onsale/onsale/gateway"
)

// Memory is an in-memory store; the zero value is not usable, see New.
type Memory struct {
	mu      sync.Mutex
	events  map[int64]*event
	seatmap map[int64][]byte
	down    bool
}

type event struct {
	dials   gateway.Dials
	pre     []string          // the pre-queue, in join order (drawn FIFO)
	frozen  bool              // the pre-queue has been drawn
	places  map[string]string // identity: "pre", a place, or "done"
	seq     int64
	serving int64
	active  map[string]time.Time
	expires time.Time // Expire's (the memory store never deletes by it)
	retired bool      // out of Events (Retire)
	// The tick lease: its holder, when it lapses, and the holder's last
	// tick (which lapses with it).
	holder     string
	leaseUntil time.Time
	last       gateway.Tick
}

var _ gateway.Store = (*Memory)(nil)

// New returns an empty store.
func New() *Memory {
	return &Memory{events: map[int64]*event{}, seatmap: map[int64][]byte{}}
}

// SetDown makes every call fail with ErrUnavailable (Redis down) or not.
func (m *Memory) SetDown(down bool) {
	m.mu.Lock()
	m.down = down
	m.mu.Unlock()
}

// Serve offers every place up to n.
func (m *Memory) Serve(ev int64, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.events[ev]; e != nil {
		e.serving = n
	}
}

// SetSeatmap stores an event's availability bitmap.
func (m *Memory) SetSeatmap(ev int64, b []byte) {
	m.mu.Lock()
	m.seatmap[ev] = b
	m.mu.Unlock()
}

// up reports ErrUnavailable when the store is down; m.mu is held.
func (m *Memory) up() error {
	if m.down {
		return fmt.Errorf("%w: storetest: down", gateway.ErrUnavailable)
	}
	return nil
}

// event finds ev, or ErrNoEvent, or ErrUnavailable; m.mu is held.
func (m *Memory) event(ev int64) (*event, error) {
	if err := m.up(); err != nil {
		return nil, err
	}
	e := m.events[ev]
	if e == nil {
		return nil, gateway.ErrNoEvent
	}
	return e, nil
}

// freeze draws the pre-queue once onsale has passed.
func (e *event) freeze(now time.Time) {
	if e.frozen || now.Before(e.dials.OnsaleAt) {
		return
	}
	e.frozen = true
	for i, id := range e.pre {
		e.places[id] = strconv.Itoa(i + 1)
	}
	e.seq = int64(len(e.pre))
}

func (e *event) place(id string) int64 {
	n, _ := strconv.ParseInt(e.places[id], 10, 64)
	return n
}

// Join implements gateway.Store.
func (m *Memory) Join(_ context.Context, ev int64, id string) (gateway.JoinResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if err != nil {
		return gateway.JoinResult{}, err
	}
	now := time.Now()
	e.freeze(now)
	d := e.dials
	switch have := e.places[id]; {
	case have == "done":
		return gateway.JoinResult{State: gateway.StateEnded}, nil
	case have == "pre":
		return gateway.JoinResult{State: gateway.StatePrequeue, At: d.OnsaleAt}, nil
	case have != "":
		return gateway.JoinResult{State: gateway.StateWaiting, Position: e.place(id)}, nil
	case !d.ClosesAt.IsZero() && !now.Before(d.ClosesAt):
		return gateway.JoinResult{State: gateway.StateClosed, At: d.ClosesAt}, nil
	case now.Before(d.PrequeueAt):
		return gateway.JoinResult{State: gateway.StateNotOpen, At: d.PrequeueAt}, nil
	case !e.frozen:
		e.pre = append(e.pre, id)
		e.places[id] = "pre"
		return gateway.JoinResult{State: gateway.StatePrequeue, At: d.OnsaleAt}, nil
	}
	e.seq++
	e.places[id] = strconv.FormatInt(e.seq, 10)
	return gateway.JoinResult{State: gateway.StateWaiting, Position: e.seq}, nil
}

// Position implements gateway.Store.
func (m *Memory) Position(_ context.Context, ev int64, id string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if err != nil {
		return 0, err
	}
	e.freeze(time.Now())
	if !e.frozen {
		return 0, nil
	}
	switch e.places[id] {
	case "":
		return 0, gateway.ErrNoEvent
	case "done": // left, or had its session, as position.lua answers
		return 0, gateway.ErrEnded
	}
	return e.place(id), nil
}

// Claim implements gateway.Store.
func (m *Memory) Claim(_ context.Context, ev int64, id string, position int64) (gateway.ClaimOutcome, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if err != nil {
		return "", 0, err
	}
	now := time.Now()
	if exp, ok := e.active[id]; ok && exp.After(now) {
		return gateway.ClaimAdmitted, exp.UnixMilli(), nil
	}
	switch have := e.places[id]; {
	case have == "":
		return gateway.ClaimUnknown, 0, nil
	case have == "done":
		return gateway.ClaimEnded, 0, nil
	case have == "pre":
		return gateway.ClaimWaiting, 0, nil
	case e.place(id) != position:
		return gateway.ClaimMoved, e.place(id), nil
	case e.dials.Paused:
		return gateway.ClaimPaused, 0, nil
	case position > e.serving:
		return gateway.ClaimWaiting, 0, nil
	}
	exp := now.Add(time.Duration(e.dials.SessionSeconds) * time.Second)
	e.active[id] = exp
	e.places[id] = "done"
	return gateway.ClaimAdmitted, exp.UnixMilli(), nil
}

// Lose forgets identity's place, as a Redis failover that lost its join
// does (the join's seq increment is lost too when it was the last one).
func (m *Memory) Lose(ev int64, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.events[ev]; e != nil {
		if e.place(id) == e.seq && e.seq > 0 {
			e.seq--
		}
		delete(e.places, id)
		delete(e.active, id)
	}
}

// Restore implements gateway.Store as restore.lua does, but for a
// pre-queue fan after the draw, who goes to the next place to offer.
func (m *Memory) Restore(_ context.Context, ev int64, id string, held gateway.Held) (gateway.RestoreOutcome, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return gateway.RestoreRejoin, 0, nil
	case err != nil:
		return "", 0, err
	case held.Epoch != e.dials.Epoch:
		return gateway.RestoreRejoin, 0, nil
	}
	now := time.Now()
	e.freeze(now)
	have := e.places[id]
	if held.Admitted > 0 {
		if have != "done" { // 'done' kept: a session missing from active was left
			e.places[id] = "done"
			if exp := time.UnixMilli(held.Admitted); exp.After(now) {
				if _, ok := e.active[id]; !ok {
					e.active[id] = exp
				}
			}
		}
		return gateway.RestoreEnded, 0, nil
	}
	switch {
	case have == "done":
		return gateway.RestoreEnded, 0, nil
	case have == "pre":
		return gateway.RestoreKept, 0, nil
	case have != "" && e.place(id) >= held.Position:
		return gateway.RestoreKept, e.place(id), nil
	case held.Position == 0 && !e.frozen:
		e.pre = append(e.pre, id)
		e.places[id] = "pre"
		return gateway.RestorePrequeue, 0, nil
	}
	p := held.Position
	if p == 0 {
		p = e.serving + 1
	}
	e.places[id] = strconv.FormatInt(p, 10)
	e.seq = max(e.seq, p)
	return gateway.RestoreRestored, p, nil
}

// Leave implements gateway.Store.
func (m *Memory) Leave(_ context.Context, ev int64, id string) (gateway.LeaveOutcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return gateway.LeaveNone, nil
	case err != nil:
		return "", err
	}
	if exp, ok := e.active[id]; ok {
		delete(e.active, id)
		if exp.After(time.Now()) {
			return gateway.LeaveEnded, nil
		}
		return gateway.LeaveNone, nil
	}
	switch have := e.places[id]; have {
	case "", "done":
		return gateway.LeaveNone, nil
	case "pre":
		if !e.frozen {
			e.pre = slices.DeleteFunc(e.pre, func(s string) bool { return s == id })
		}
	}
	e.places[id] = "done"
	return gateway.LeaveLeft, nil
}

// Tick implements gateway.Store: it reports (the rate as the dial times
// factor, clamped to [0, 1] as the Redis bucket does), and offers nothing
// by itself. The tick lease is kept as the Redis bucket keeps it: a
// holder's tick renews it, another gateway's is told the holder's last.
func (m *Memory) Tick(_ context.Context, ev int64, factor float64, lease gateway.Lease) (gateway.Tick, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return gateway.Tick{}, err
	}
	now := time.Now()
	e := m.events[ev]
	if e == nil {
		return gateway.Tick{DialsVersion: -1, Now: now}, nil
	}
	if lease.Holder != "" && e.holder != "" && e.holder != lease.Holder && now.Before(e.leaseUntil) {
		return e.last, nil
	}
	e.freeze(now)
	active := 0
	for _, exp := range e.active {
		if exp.After(now) {
			active++
		}
	}
	factor = min(1, max(0, factor))
	tk := gateway.Tick{Serving: e.serving, Queue: e.seq, Active: int64(active), DialsVersion: e.dials.Version, Now: now,
		Factor: factor, Rate: float64(e.dials.NewUsersPerMinute) * factor, Ticker: lease.Holder}
	d := lease.For
	if d <= 0 {
		d = time.Second
	}
	// As the script: a tick with no holder stores a tick anyone may take
	// over (no lease).
	e.holder = lease.Holder
	e.last, e.leaseUntil = tk, now.Add(d)
	return tk, nil
}

// Release implements gateway.Store.
func (m *Memory) Release(_ context.Context, ev int64, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return err
	}
	if e := m.events[ev]; e != nil && e.holder == holder {
		e.leaseUntil = time.Time{}
	}
	return nil
}

// LastTick implements gateway.Store.
func (m *Memory) LastTick(_ context.Context, ev int64) (gateway.Tick, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return gateway.Tick{}, false, err
	}
	e := m.events[ev]
	now := time.Now()
	if e == nil || !now.Before(e.leaseUntil) {
		return gateway.Tick{}, false, nil
	}
	tk := e.last
	tk.LeaseLeft = e.leaseUntil.Sub(now)
	return tk, true, nil
}

// Events implements gateway.Store.
func (m *Memory) Events(context.Context) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return nil, err
	}
	var out []int64
	for id, e := range m.events {
		if !e.retired {
			out = append(out, id)
		}
	}
	return out, nil
}

// Expire implements gateway.Store: it records the expiry (ExpiresAt)
// without acting on it.
func (m *Memory) Expire(_ context.Context, ev int64, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if errors.Is(err, gateway.ErrNoEvent) {
		return nil // as PEXPIREAT on no key
	}
	if err != nil {
		return err
	}
	e.expires = at
	return nil
}

// ExpiresAt is the expiry Expire last set for the event's room.
func (m *Memory) ExpiresAt(ev int64) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.events[ev]; e != nil {
		return e.expires
	}
	return time.Time{}
}

// Retire implements gateway.Store.
func (m *Memory) Retire(_ context.Context, ev int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return err
	}
	if e := m.events[ev]; e != nil {
		e.retired = true
	}
	return nil
}

// Dials implements gateway.Store.
func (m *Memory) Dials(_ context.Context, ev int64) (gateway.Dials, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if err != nil {
		return gateway.Dials{}, err
	}
	return e.dials, nil
}

// InitDials implements gateway.Store; an event's dials are set once.
func (m *Memory) InitDials(_ context.Context, ev int64, d gateway.Dials) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return err
	}
	if m.events[ev] == nil {
		d.Epoch = strconv.FormatInt(time.Now().UnixNano(), 36)
		m.events[ev] = &event{dials: d, places: map[string]string{}, active: map[string]time.Time{}}
	}
	m.events[ev].retired = false
	return nil
}

// PatchDials implements gateway.Store.
func (m *Memory) PatchDials(_ context.Context, ev int64, d gateway.Dials, changed []string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	if err != nil {
		return 0, err
	}
	for _, dl := range gateway.DialList {
		if slices.Contains(changed, dl.Name) {
			b, _ := json.Marshal(dl.Field(&d))
			json.Unmarshal(b, dl.Field(&e.dials))
		}
	}
	e.dials.Version++
	return e.dials.Version, nil
}

// Frozen implements gateway.Store. It only reports, as the Redis store
// does: the draw is made by the first join, position, claim or tick after
// onsale, never by asking whether it has been.
func (m *Memory) Frozen(_ context.Context, ev int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, err := m.event(ev)
	switch {
	case errors.Is(err, gateway.ErrNoEvent):
		return false, nil
	case err != nil:
		return false, err
	}
	return e.frozen, nil
}

// Seatmap implements gateway.Store.
func (m *Memory) Seatmap(_ context.Context, ev int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.up(); err != nil {
		return nil, err
	}
	return m.seatmap[ev], nil
}
