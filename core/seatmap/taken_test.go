package seatmap_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core/seatmap"
)

// clock is a hand-moved time source for Taken.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

const ev = 7

// layout is a small event's seats: A1..A9, band X the first four, Y the rest.
var layout = func() *seatmap.Layout {
	l := &seatmap.Layout{Seats: map[string]int{}, Bands: map[string][]string{}}
	for i := range 9 {
		id, band := fmt.Sprintf("A%d", i+1), "X"
		if i >= 4 {
			band = "Y"
		}
		l.Seats[id] = i
		l.Bands[band] = append(l.Bands[band], id)
	}
	return l
}()

func newTaken() (*seatmap.Taken, *clock) {
	c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	return &seatmap.Taken{MaxAge: 2 * time.Second, Clock: c.now}, c
}

// snapshot installs the database's view, read with a query sent at sent.
func snapshot(t *seatmap.Taken, sent time.Time, seats map[string]seatmap.SeatState) {
	t.Replace(ev, layout, seats, sent)
}

func wantRefused(tb testing.TB, t *seatmap.Taken, seats []string, want []string) {
	tb.Helper()
	if got := t.Refuse(ev, seats); !slices.Equal(got, want) {
		tb.Errorf("Refuse(%q) = %q; want %q", seats, got, want)
	}
}

// The rules of refusal, one case each.
func TestTakenRefuses(t *testing.T) {
	tk, c := newTaken()
	now := c.now()
	snapshot(tk, now, map[string]seatmap.SeatState{
		"A1": {Booked: true},
		"A2": {Until: now.Add(10 * time.Second)},
		"A3": {Until: now.Add(time.Second)},
	})
	wantRefused(t, tk, []string{"A4"}, nil)                              // free: the database decides
	wantRefused(t, tk, []string{"A1", "A2", "A4"}, []string{"A1", "A2"}) // the known-taken ones, in order
	wantRefused(t, tk, []string{"A3"}, []string{"A3"})                   // held, its expiry ahead
	wantRefused(t, tk, []string{"A2", "Z9"}, nil)                        // an unknown seat: the database names it
	if got := tk.Refuse(ev+1, []string{"A1"}); got != nil {              // an event never read
		t.Errorf("Refuse(another event) = %q; want nil", got)
	}
	refused, passed := tk.Decisions()
	if refused != 2 || passed != 3 {
		t.Errorf("Decisions() = %d, %d; want 2 refused, 3 passed", refused, passed)
	}
}

// A best-available request is refused sold out when fewer of its band's
// seats than asked are not refused, by the same rules as Refuse.
func TestTakenSoldOut(t *testing.T) {
	tk, c := newTaken()
	now := c.now()
	snapshot(tk, now, map[string]seatmap.SeatState{
		"A1": {Booked: true},
		"A2": {Until: now.Add(10 * time.Second)},
		"A3": {Until: now.Add(time.Second)},
	})
	for _, tc := range []struct {
		band  string
		count int
		want  bool
	}{
		{"X", 1, false}, // A4 is free
		{"X", 2, true},  // only A4
		{"Y", 5, false}, // all five free
		{"Y", 6, true},
		{"Z", 1, false}, // a band the layout lacks: the database says so
	} {
		if got := tk.SoldOut(ev, tc.band, tc.count); got != tc.want {
			t.Errorf("SoldOut(%s, %d) = %v; want %v", tc.band, tc.count, got, tc.want)
		}
	}
	c.add(time.Second) // A3's hold lapses: X has two seats again
	if tk.SoldOut(ev, "X", 2) {
		t.Error("SoldOut(X, 2) after A3's hold lapsed = true; want false")
	}
	c.add(2 * time.Second) // the snapshot is too old: nothing is refused
	if tk.SoldOut(ev, "X", 4) {
		t.Error("SoldOut(X, 4) with a stale snapshot = true; want false")
	}
}

// A lapsed hold's seat is never refused: not at its deadline, not after,
// however fresh the snapshot that showed it held.
func TestTakenNeverRefusesLapsed(t *testing.T) {
	tk, c := newTaken()
	now := c.now()
	snapshot(tk, now, map[string]seatmap.SeatState{"A2": {Until: now.Add(500 * time.Millisecond)}})
	wantRefused(t, tk, []string{"A2"}, []string{"A2"})
	c.add(499 * time.Millisecond)
	wantRefused(t, tk, []string{"A2"}, []string{"A2"})
	c.add(time.Millisecond) // the deadline itself: lapsed
	wantRefused(t, tk, []string{"A2"}, nil)
	c.add(time.Hour)
	wantRefused(t, tk, []string{"A2"}, nil)

	// The same for this core's own hold.
	tk, c = newTaken()
	snapshot(tk, c.now(), nil)
	tk.Held(ev, []string{"A5"}, c.now().Add(time.Second))
	wantRefused(t, tk, []string{"A5"}, []string{"A5"})
	c.add(time.Second)
	wantRefused(t, tk, []string{"A5"}, nil)
}

// This core's own release clears at once, and stays cleared over a
// snapshot whose query was sent before the release (it could not see it);
// a snapshot sent after it is believed (another core took the seat since).
func TestTakenOwnReleaseClears(t *testing.T) {
	tk, c := newTaken()
	before := c.now()
	held := map[string]seatmap.SeatState{"A2": {Until: before.Add(time.Minute)}}
	snapshot(tk, before, held)
	wantRefused(t, tk, []string{"A2"}, []string{"A2"})
	c.add(100 * time.Millisecond)
	tk.Freed(ev, []string{"A2"})
	wantRefused(t, tk, []string{"A2"}, nil)

	// A snapshot sent before the release, installed after it.
	snapshot(tk, before.Add(50*time.Millisecond), held)
	wantRefused(t, tk, []string{"A2"}, nil)

	// A snapshot sent after the release shows the seat held again: another
	// core's hold, believed.
	after := c.add(100 * time.Millisecond)
	snapshot(tk, after, map[string]seatmap.SeatState{"A2": {Until: after.Add(time.Minute)}})
	wantRefused(t, tk, []string{"A2"}, []string{"A2"})
}

// This core's own hold is refused at once, survives a snapshot sent before
// it, and gives way to a later snapshot showing the seat free (another core
// released the hold).
func TestTakenOwnHold(t *testing.T) {
	tk, c := newTaken()
	before := c.now()
	snapshot(tk, before, nil)
	c.add(100 * time.Millisecond)
	tk.Held(ev, []string{"A3", "A4"}, c.now().Add(time.Minute))
	wantRefused(t, tk, []string{"A4"}, []string{"A4"})
	snapshot(tk, before.Add(50*time.Millisecond), nil) // sent before the hold
	wantRefused(t, tk, []string{"A3", "A4"}, []string{"A3", "A4"})
	snapshot(tk, c.add(100*time.Millisecond), nil) // sent after: released elsewhere
	wantRefused(t, tk, []string{"A3", "A4"}, nil)
}

// Another core's release, which only a snapshot shows, is refused until the
// next snapshot shows it, and never longer than MaxAge after the last
// snapshot's query was sent.
func TestTakenStaleOtherCoreRelease(t *testing.T) {
	tk, c := newTaken()
	sent := c.now()
	snapshot(tk, sent, map[string]seatmap.SeatState{"A6": {Until: sent.Add(time.Hour)}, "A7": {Booked: true}})
	// Another core releases A6 now; this core does not know.
	c.add(time.Second)
	wantRefused(t, tk, []string{"A6"}, []string{"A6"}) // stale, within a snapshot's age
	snapshot(tk, c.now(), map[string]seatmap.SeatState{"A7": {Booked: true}})
	wantRefused(t, tk, []string{"A6"}, nil) // the next snapshot clears it
	wantRefused(t, tk, []string{"A7"}, []string{"A7"})

	// No snapshot for longer than MaxAge: nothing is refused, not even a
	// booked seat (it may have been freed by another core's undone booking).
	c.add(2*time.Second + time.Millisecond)
	wantRefused(t, tk, []string{"A7"}, nil)
	// A late snapshot whose query was sent long ago stays untrusted.
	snapshot(tk, c.now().Add(-3*time.Second), map[string]seatmap.SeatState{"A7": {Booked: true}})
	wantRefused(t, tk, []string{"A7"}, nil)
	snapshot(tk, c.now(), map[string]seatmap.SeatState{"A7": {Booked: true}})
	wantRefused(t, tk, []string{"A7"}, []string{"A7"})
}

// A snapshot older than the one installed is ignored, and events no longer
// live are forgotten.
func TestTakenOrderAndRetain(t *testing.T) {
	tk, c := newTaken()
	now := c.now()
	snapshot(tk, now, map[string]seatmap.SeatState{"A1": {Booked: true}})
	snapshot(tk, now.Add(-time.Millisecond), nil)
	wantRefused(t, tk, []string{"A1"}, []string{"A1"})
	tk.Retain(map[int64]int{ev + 1: 10})
	wantRefused(t, tk, []string{"A1"}, nil)
}

// Concurrent use: refusals, own changes and snapshots. A race-detector
// test (make test runs -race): it asserts nothing else.
func TestTakenConcurrent(t *testing.T) {
	tk := &seatmap.Taken{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				seat := fmt.Sprintf("A%d", 1+(g+i)%9)
				switch i % 4 {
				case 0:
					tk.Held(ev, []string{seat}, time.Now().Add(time.Second))
				case 1:
					tk.Freed(ev, []string{seat})
				case 2:
					tk.Refuse(ev, []string{seat, "A1"})
				case 3:
					if g == 0 {
						tk.Replace(ev, layout, map[string]seatmap.SeatState{seat: {Booked: true}}, time.Now())
					}
				}
			}
		})
	}
	wg.Wait()
}
