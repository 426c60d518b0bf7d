package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/onsale/onsale/core"
)

// freeSeatsSQL lists free seats of a band in order of preference: rows
// nearest the stage first, then section, then seat number. It reads without
// locks; the hold statement decides.
const freeSeatsSQL = `
SELECT seat_id, section, row_no, number
  FROM seats
 WHERE event_id = $1 AND band = $2
   AND ` + seatFree + `
 ORDER BY row_no, section, number
 LIMIT $3`

// bestWindow is how many free seats best-available looks at; bestSpread is
// among how many of the best blocks it picks at random, so that concurrent
// fans asking for the same band do not all race for the same block.
const (
	bestWindow   = 300
	bestSpread   = 8
	bestAttempts = 5
)

type freeSeat struct {
	id      string
	section string
	row     int
	number  int
}

// freeMaxAge is how long a band's free-seat list is reused. In a rush,
// every best-available request of a band within it shares one query (late
// in a sale that query walks past thousands of taken seats); a seat the
// list still shows free but is not just loses one conditional UPDATE, and
// the seats this core process holds or tries are struck off the list at
// once. PostgreSQL still decides every hold.
const freeMaxAge = 250 * time.Millisecond

// freeLists caches free-seat lists per event and band. Reads of one band
// that would run at once share one statement (reads): at a band's last
// seats every fan's best-available misses the list together, and each
// read walks past every taken seat of the band.
type freeLists struct {
	mu    sync.Mutex
	m     map[bandKey]*freeList
	reads singleflight.Group
}

type bandKey struct {
	event int64
	band  string
}

type freeList struct {
	seats []freeSeat
	at    time.Time
	gone  map[string]bool // held or tried since the list was read
}

// freeSeatsCached is freeSeats through the cache (fresh forces a read
// begun after the call: a fan about to be told sold out is told so from
// the band as it was when the fan asked, not from a read already under
// way).
func (db *DB) freeSeatsCached(ctx context.Context, event int64, band string, fresh bool) ([]freeSeat, error) {
	k := bandKey{event, band}
	asked := time.Now()
	db.free.mu.Lock()
	l := db.free.m[k]
	if !fresh && l != nil && time.Since(l.at) < freeMaxAge {
		out := make([]freeSeat, 0, len(l.seats))
		for _, s := range l.seats {
			if !l.gone[s.id] {
				out = append(out, s)
			}
		}
		db.free.mu.Unlock()
		return out, nil
	}
	db.free.mu.Unlock()
	for {
		l, err := db.readFree(ctx, k)
		if err != nil {
			return nil, err
		}
		// A read begun before this call (joined under way) is fresh enough
		// unless fresh was asked for; the next one begins after it ended,
		// so after this call.
		if !fresh || !l.at.Before(asked) {
			return l.seats, nil // shared, read only (pickBlock)
		}
	}
}

// readFree reads a band's free seats into the cache, sharing the read with
// every caller asking at once. The read is not cut short when the caller
// that began it goes (its own deadline, freeReadTimeout); each caller
// stops waiting at its own deadline.
func (db *DB) readFree(ctx context.Context, k bandKey) (*freeList, error) {
	ch := db.free.reads.DoChan(fmt.Sprint(k.event, "/", k.band), func() (any, error) {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), freeReadTimeout)
		defer cancel()
		at := time.Now() // before the statement's snapshot
		seats, err := db.freeSeats(c, k.event, k.band)
		if err != nil {
			return nil, err
		}
		l := &freeList{seats: seats, at: at, gone: map[string]bool{}}
		db.free.mu.Lock()
		if db.free.m == nil || len(db.free.m) > 1024 {
			db.free.m = map[bandKey]*freeList{}
		}
		db.free.m[k] = l
		db.free.mu.Unlock()
		return l, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*freeList), nil
	case <-ctx.Done():
		return nil, translate(ctx.Err())
	}
}

// freeReadTimeout bounds a shared read of a band's free seats.
const freeReadTimeout = 3 * time.Second

// strike marks seats as no longer free in the cached list of their band.
func (db *DB) strike(event int64, band string, ids []string) {
	db.free.mu.Lock()
	if l := db.free.m[bandKey{event, band}]; l != nil {
		for _, id := range ids {
			l.gone[id] = true
		}
	}
	db.free.mu.Unlock()
}

// holdBestAvailable picks count seats in a band, together in one row where
// it can, and holds them with the product hold statement; when a concurrent
// fan takes them first it looks again, a few times.
func (db *DB) holdBestAvailable(ctx context.Context, p core.HoldParams, ev eventInfo, limit int) (*core.Hold, error) {
	ba := p.Request.BestAvailable
	if err := db.refuseBand(p.EventID, ba.Band, ba.Count); err != nil { // refuse.go: a hold that cannot win costs no statement
		return nil, err
	}
	var lastErr error
	for try := range bestAttempts {
		free, err := db.freeSeatsCached(ctx, p.EventID, ba.Band, try == bestAttempts-1)
		if err != nil {
			return nil, err
		}
		seats := pickBlock(free, ba.Count, rand.IntN)
		if seats == nil && len(free) < bestWindow {
			// The list may be stale: read the band afresh before saying so.
			if free, err = db.freeSeatsCached(ctx, p.EventID, ba.Band, true); err != nil {
				return nil, err
			}
			seats = pickBlock(free, ba.Count, rand.IntN)
		}
		if seats == nil {
			return nil, db.bandSoldOut(ctx, p.EventID, ba.Band, ba.Count)
		}
		db.strike(p.EventID, ba.Band, seats) // held now, or taken by someone else
		h, err := db.retryOverLimit(ctx, p, len(seats), limit, func() (*core.Hold, error) { return db.holdSeats(ctx, p, ev, limit, seats, false) })
		if core.ErrorCode(err) != core.ESeatsTaken {
			return h, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// errPickedTaken is best-available's refusal when every block it picked
// went to other fans between its read of the free seats and its hold: the
// band may well have seats left, so it is not sold out; the fan asks again.
// (It names no seats: the fan named none, and naming them would cost a
// statement per lost attempt, at the moment a band's last seats draw the
// most attempts.)
func errPickedTaken() error {
	return core.Errorf(core.ESeatsTaken, "the seats picked for you went to other fans as they were held: ask again")
}

func (db *DB) freeSeats(ctx context.Context, event int64, band string) ([]freeSeat, error) {
	rows, err := db.pool.Query(ctx, freeSeatsSQL, event, band, bestWindow)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var free []freeSeat
	for rows.Next() {
		var s freeSeat
		if err := rows.Scan(&s.id, &s.section, &s.row, &s.number); err != nil {
			return nil, translate(err)
		}
		free = append(free, s)
	}
	return free, translate(rows.Err())
}

// pickBlock chooses count seats from free (in preference order). It prefers
// a run of adjacent seats in one row, picking at random among the first
// bestSpread such runs and at a random place inside a longer run; without
// one it takes the first count seats of one row, then of the whole list.
// It returns nil when free has fewer than count seats.
func pickBlock(free []freeSeat, count int, intn func(int) int) []string {
	if len(free) < count {
		return nil
	}
	type run struct{ start, n int }
	var runs []run
	for i := 0; i < len(free) && len(runs) < bestSpread; {
		j := i + 1
		for j < len(free) && free[j].section == free[i].section && free[j].row == free[i].row &&
			free[j].number == free[j-1].number+1 {
			j++
		}
		if j-i >= count {
			runs = append(runs, run{i, j - i})
		}
		i = j
	}
	ids := func(from int, n int) []string {
		out := make([]string, n)
		for k := range n {
			out[k] = free[from+k].id
		}
		return out
	}
	if len(runs) > 0 {
		r := runs[intn(len(runs))]
		return ids(r.start+intn(r.n-count+1), count)
	}
	// No adjacent run: the first row with enough free seats, else the best seats anywhere.
	for i := 0; i < len(free); {
		j := i + 1
		for j < len(free) && free[j].section == free[i].section && free[j].row == free[i].row {
			j++
		}
		if j-i >= count {
			return ids(i, count)
		}
		i = j
	}
	return ids(0, count)
}

// bandExistsSQL tells a sold-out band from one the event does not have.
const bandExistsSQL = `SELECT EXISTS (SELECT 1 FROM price_bands WHERE event_id = $1 AND code = $2)`

func (db *DB) bandSoldOut(ctx context.Context, event int64, band string, count int) error {
	var known bool
	if err := db.pool.QueryRow(ctx, bandExistsSQL, event, band).Scan(&known); err != nil {
		return translate(err)
	}
	if !known {
		return core.Errorf(core.EInvalid, "event %d has no price band %q", event, band)
	}
	return core.Errorf(core.ESoldOut, "fewer than %d seats left in %s", count, band).With("band", band)
}
