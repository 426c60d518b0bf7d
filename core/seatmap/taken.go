package seatmap

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxAge is Taken.MaxAge's default: twice the keeper's one-second
// rebuild, so one slow or failed rebuild does not switch refusals off,
// while another core's release is still missed for at most about a
// second or two.
const DefaultMaxAge = 2 * time.Second

// Taken is the core's memory of which seats cannot be held now, so that a
// hold that cannot win is refused without a database statement. It only
// ever refuses: a hold it does not refuse goes to PostgreSQL, which
// decides, so a wrong memory can cost a fan a refusal, never a double
// sale. Its rules, all here:
//
//   - A seat is refused only while it is booked, or held by a hold whose
//     expiry is still ahead. An expiry is kept as a deadline on this
//     process's monotonic clock: the moment before the database read its
//     own clock (when the hold statement, or the snapshot's query, was
//     sent) plus the time the database said the hold has. The database's
//     clock reads later than that moment, so the deadline comes no later
//     than the hold's real lapse, whatever the two clocks' offset: a seat
//     whose hold has lapsed (the seat fans pounce on when it comes back)
//     is never refused.
//   - Only seats of the event's layout are answered: a request naming any
//     other seat goes to the database, which names it unknown. Likewise a
//     best-available request is refused sold out (SoldOut) only for a band
//     of the layout, when fewer of its seats than asked are not refused.
//   - The database's view arrives as snapshots (Replace, from the keeper's
//     rebuild, about once a second). This core's own holds and releases
//     apply at once (Held, Freed) and are applied again over a snapshot
//     whose query was sent before them, which could not have seen them.
//   - An event whose newest snapshot's query was sent more than MaxAge ago
//     refuses nothing: another core's release (which only a snapshot shows)
//     is missed for at most MaxAge, and a retry after it is decided by the
//     database.
//
// The zero value is ready; its methods are safe for concurrent use.
type Taken struct {
	// MaxAge is how long a snapshot is trusted (0: DefaultMaxAge).
	MaxAge time.Duration
	// Clock is the time source (nil: time.Now); tests set it.
	Clock func() time.Time

	mu     sync.RWMutex
	events map[int64]*takenEvent

	refused, passed atomic.Int64
}

// SeatState is what a snapshot knows of one seat that cannot be held.
type SeatState struct {
	Booked bool
	// Until is when the seat's hold lapses, on this process's clock (see
	// Taken: no later than the database's hold_until); unused when Booked.
	Until time.Time
}

// takenAt reports whether the seat cannot be held at now.
func (s SeatState) takenAt(now time.Time) bool { return s.Booked || now.Before(s.Until) }

// Layout is an event's seats as Taken answers for them (static per event;
// Taken never changes it).
type Layout struct {
	Seats map[string]int      // seat id to position
	Bands map[string][]string // band code to its seat ids
}

type takenEvent struct {
	known *Layout
	seats map[string]SeatState // the seats that cannot be held, as last known
	at    time.Time            // when the newest snapshot's query was sent; zero: none yet
	own   []ownChange          // this core's changes not older than that snapshot, oldest first
}

// ownChange is one hold (state) or release (free) by this core.
type ownChange struct {
	at    time.Time
	seats []string
	state SeatState
	free  bool
}

func (e *takenEvent) apply(c ownChange) {
	for _, s := range c.seats {
		if c.free {
			delete(e.seats, s)
		} else {
			e.seats[s] = c.state
		}
	}
}

func (t *Taken) now() time.Time {
	if t.Clock != nil {
		return t.Clock()
	}
	return time.Now()
}

func (t *Taken) maxAge() time.Duration {
	if t.MaxAge > 0 {
		return t.MaxAge
	}
	return DefaultMaxAge
}

// Refuse returns the seats of a hold request (in the request's order) that
// the core knows cannot be held now, or nil when the request must go to the
// database: nothing known taken, a seat the event's layout does not have,
// or no snapshot of the event within MaxAge.
func (t *Taken) Refuse(event int64, seats []string) []string {
	now := t.now()
	var taken []string
	t.mu.RLock()
	if e := t.trusted(event, now); e != nil {
		for _, s := range seats {
			if _, ok := e.known.Seats[s]; !ok {
				taken = nil
				break
			}
			if st, ok := e.seats[s]; ok && st.takenAt(now) {
				taken = append(taken, s)
			}
		}
	}
	t.mu.RUnlock()
	if len(taken) > 0 {
		t.refused.Add(1)
	} else {
		t.passed.Add(1)
	}
	return taken
}

// trusted returns the event's entry when its newest snapshot is within
// MaxAge of now (t.mu held), else nil.
func (t *Taken) trusted(event int64, now time.Time) *takenEvent {
	if e := t.events[event]; e != nil && !e.at.IsZero() && now.Sub(e.at) <= t.maxAge() {
		return e
	}
	return nil
}

// SoldOut reports whether a best-available request for count seats of
// band cannot win: fewer than count of the band's seats are free of what
// Refuse refuses. False (ask the database) for a band the layout lacks or
// without a snapshot within MaxAge, as for Refuse.
func (t *Taken) SoldOut(event int64, band string, count int) bool {
	now := t.now()
	soldOut := false
	t.mu.RLock()
	if e := t.trusted(event, now); e != nil {
		if seats, ok := e.known.Bands[band]; ok {
			free := 0
			for _, s := range seats {
				if st, ok := e.seats[s]; !ok || !st.takenAt(now) {
					if free++; free >= count {
						break
					}
				}
			}
			soldOut = free < count
		}
	}
	t.mu.RUnlock()
	if soldOut {
		t.refused.Add(1)
	} else {
		t.passed.Add(1)
	}
	return soldOut
}

// Decisions counts the requests Refuse and SoldOut answered: refused from
// memory, and passed to the database to decide.
func (t *Taken) Decisions() (refused, passed int64) { return t.refused.Load(), t.passed.Load() }

// Held records seats this core has just held, until the given deadline
// (taken before the hold statement was sent, plus the hold's length).
func (t *Taken) Held(event int64, seats []string, until time.Time) {
	t.change(event, ownChange{seats: seats, state: SeatState{Until: until}})
}

// Freed records seats this core has just given back to sale (a release,
// a settle, an undone booking): they are refused no more, at once. (A
// lapsed hold's seats need no call: every entry here ends at its hold's
// expiry.)
func (t *Taken) Freed(event int64, seats []string) {
	t.change(event, ownChange{seats: seats, free: true})
}

func (t *Taken) change(event int64, c ownChange) {
	if len(c.seats) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Read under the lock, so e.own is in order of at. A later at is the
	// safe side: the change is applied again over more snapshots (one
	// that saw a hold shows it taken anyway; a release applied again can
	// only refuse less).
	c.at = t.now()
	e := t.event(event)
	e.apply(c)
	// Kept to be applied over a snapshot sent before it; a snapshot sent
	// more than MaxAge before now is never trusted, so older changes go.
	// They are the oldest, at the front: a hold looks only at those it
	// drops, not at every change since the last snapshot (thousands in a
	// second of a sale: that pass was 9% of the core's CPU at 3,800 holds
	// a second, under the write lock every hold and refusal waits for).
	i := 0
	for i < len(e.own) && c.at.Sub(e.own[i].at) > t.maxAge() {
		i++
	}
	e.own = append(e.own[i:], c)
}

// event returns the event's entry, made when missing (t.mu held).
func (t *Taken) event(event int64) *takenEvent {
	if t.events == nil {
		t.events = map[int64]*takenEvent{}
	}
	e := t.events[event]
	if e == nil {
		e = &takenEvent{seats: map[string]SeatState{}}
		t.events[event] = e
	}
	return e
}

// Replace installs a snapshot of an event read from the database: known
// is the event's layout, taken its seats that could not be held, and sent
// when the snapshot's query was sent. Taken keeps the map. A snapshot older than the one
// installed is ignored; this core's changes since sent are applied over it.
func (t *Taken) Replace(event int64, known *Layout, taken map[string]SeatState, sent time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.event(event)
	if !e.at.IsZero() && !sent.After(e.at) {
		return
	}
	if taken == nil {
		taken = map[string]SeatState{}
	}
	if known == nil {
		known = &Layout{}
	}
	e.known, e.seats, e.at = known, taken, sent
	keep := e.own[:0]
	for _, c := range e.own {
		if c.at.After(sent) {
			e.apply(c)
			keep = append(keep, c)
		}
	}
	e.own = keep
}

// Retain forgets every event but those given (the live ones).
func (t *Taken) Retain(live map[int64]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for ev := range t.events {
		if _, ok := live[ev]; !ok {
			delete(t.events, ev)
		}
	}
}
