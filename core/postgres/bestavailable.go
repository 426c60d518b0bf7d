package postgres

import (
	"context"
	"math/rand/v2"

	"github.com/onsale/onsale/core"
)

// freeSeatsSQL lists free seats of a band in order of preference: rows
// nearest the stage first, then section, then seat number. It reads without
// locks; the hold statement decides.
const freeSeatsSQL = `
SELECT seat_id, section, row_no, number
  FROM seats
 WHERE event_id = $1 AND band = $2
   AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now()))
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

// holdBestAvailable picks count seats in a band, together in one row where
// it can, and holds them with the product hold statement; when a concurrent
// fan takes them first it looks again, a few times.
func (db *DB) holdBestAvailable(ctx context.Context, p core.HoldParams, ev eventInfo, limit int) (*core.Hold, error) {
	ba := p.Request.BestAvailable
	var lastErr error
	for range bestAttempts {
		free, err := db.freeSeats(ctx, p.EventID, ba.Band)
		if err != nil {
			return nil, err
		}
		seats := pickBlock(free, ba.Count, rand.IntN)
		if seats == nil {
			return nil, db.bandSoldOut(ctx, p.EventID, ba.Band, ba.Count)
		}
		h, err := db.retryOverLimit(ctx, p, func() (*core.Hold, error) { return db.holdSeats(ctx, p, ev, limit, seats) })
		if core.ErrorCode(err) != core.ESeatsTaken {
			return h, err
		}
		lastErr = err
	}
	return nil, lastErr
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

func (db *DB) bandSoldOut(ctx context.Context, event int64, band string, count int) error {
	var known bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM price_bands WHERE event_id = $1 AND code = $2)`, event, band).Scan(&known); err != nil {
		return translate(err)
	}
	if !known {
		return core.Errorf(core.EInvalid, "event %d has no price band %q", event, band)
	}
	return core.Errorf(core.ESoldOut, "fewer than %d seats left in %s", count, band).With("band", band)
}
