package postgres

import (
	"context"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/seatmap"
)

// layoutSQL reads an event's seats in position order, from which Layout
// folds sections and rows.
const layoutSQL = `SELECT section, row_label, band, pos, number FROM seats WHERE event_id = $1 ORDER BY pos`

// Layout returns a seated event's layout (ENotFound for none or GA).
func (db *DB) Layout(ctx context.Context, event int64) (*core.SeatLayout, error) {
	e, err := db.Event(ctx, event)
	if err != nil {
		return nil, err
	}
	if !e.Seated {
		return nil, core.Errorf(core.ENotFound, "event %d is general admission: it has no seat map", event)
	}
	rows, err := db.reads.Query(ctx, layoutSQL, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	l := &core.SeatLayout{EventID: event, Capacity: e.Capacity, Bands: e.Bands}
	for rows.Next() {
		var sec, row, band string
		var pos, number int
		if err := rows.Scan(&sec, &row, &band, &pos, &number); err != nil {
			return nil, translate(err)
		}
		if n := len(l.Sections); n == 0 || l.Sections[n-1].Code != sec {
			l.Sections = append(l.Sections, core.LayoutSection{Code: sec})
		}
		s := &l.Sections[len(l.Sections)-1]
		if n := len(s.Rows); n == 0 || s.Rows[n-1].Label != row || s.Rows[n-1].Band != band ||
			s.Rows[n-1].Pos+len(s.Rows[n-1].Numbers) != pos {
			s.Rows = append(s.Rows, core.LayoutRow{Label: row, Band: band, Pos: pos})
		}
		r := &s.Rows[len(s.Rows)-1]
		r.Numbers = append(r.Numbers, number)
	}
	return l, translate(rows.Err())
}

// seatStatesSQL lists the positions of an event's seats that cannot be
// held now (NOT seatFree: the seat map's clear bits), whether each is
// booked, and the seconds left on each held seat's hold by the database's
// clock (a duration, so the core's own clock's offset does not matter).
const seatStatesSQL = `
SELECT pos, status = 'BOOKED', coalesce(extract(epoch FROM hold_until - now()), 0)::float8
  FROM seats WHERE event_id = $1 AND NOT ` + seatFree

// TakenSeats returns the event's seats that cannot be held now: booked, or
// held by a hold that has not lapsed, with the time its hold has left. It
// is the seat-map keeper's one read per rebuild (seatmap.Store): the
// map's free bits are every other seat.
func (db *DB) TakenSeats(ctx context.Context, event int64) ([]seatmap.TakenSeat, error) {
	rows, err := db.reads.Query(ctx, seatStatesSQL, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []seatmap.TakenSeat
	for rows.Next() {
		var s seatmap.TakenSeat
		var left float64
		if err := rows.Scan(&s.Pos, &s.Booked, &left); err != nil {
			return nil, translate(err)
		}
		s.Left = time.Duration(left * float64(time.Second))
		out = append(out, s)
	}
	return out, translate(rows.Err())
}

// seatPositionsSQL maps seat ids to positions (static per event).
const seatPositionsSQL = `SELECT seat_id, pos FROM seats WHERE event_id = $1`

// SeatPositions maps an event's seat ids to their positions.
func (db *DB) SeatPositions(ctx context.Context, event int64) (map[string]int, error) {
	rows, err := db.reads.Query(ctx, seatPositionsSQL, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	m := make(map[string]int)
	for rows.Next() {
		var id string
		var pos int
		if err := rows.Scan(&id, &pos); err != nil {
			return nil, translate(err)
		}
		m[id] = pos
	}
	return m, translate(rows.Err())
}

// seatBandsSQL lists each band's seats (static per event).
const seatBandsSQL = `SELECT band, array_agg(seat_id) FROM seats WHERE event_id = $1 GROUP BY band`

// SeatBands maps an event's band codes to their seat ids.
func (db *DB) SeatBands(ctx context.Context, event int64) (map[string][]string, error) {
	rows, err := db.reads.Query(ctx, seatBandsSQL, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	m := map[string][]string{}
	for rows.Next() {
		var band string
		var ids []string
		if err := rows.Scan(&band, &ids); err != nil {
			return nil, translate(err)
		}
		m[band] = ids
	}
	return m, translate(rows.Err())
}

// liveSeatedEventsSQL names the seated events whose seat maps are kept:
// on sale or within the hour of it, and not yet started.
const liveSeatedEventsSQL = `
SELECT id, capacity FROM events
 WHERE seated AND onsale_at < now() + interval '1 hour' AND starts_at > now()`

// LiveSeatedEvents lists seated events on sale or about to be (onsale
// within the hour, not yet started) with their capacity: the ones whose
// seat maps are kept.
func (db *DB) LiveSeatedEvents(ctx context.Context) (map[int64]int, error) {
	rows, err := db.reads.Query(ctx, liveSeatedEventsSQL)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var c int
		if err := rows.Scan(&id, &c); err != nil {
			return nil, translate(err)
		}
		out[id] = c
	}
	return out, translate(rows.Err())
}

// seatCountsSQL counts a seated event's seats by what a fan sees: free
// (seatFree, so an expired hold's seats count as available), held by a
// running hold, sold.
const seatCountsSQL = `
SELECT count(*) FILTER (WHERE ` + seatFree + `),
       count(*) FILTER (WHERE status = 'HELD' AND hold_until >= now()),
       count(*) FILTER (WHERE status = 'BOOKED')
  FROM seats WHERE event_id = $1`

// gaCountsSQL counts a GA event's tickets: the counter's remaining, and
// the quantities of active and booked holds, in one read of the holds (no
// index leads to an event's holds; none to the active ones either since
// migration 00011).
const gaCountsSQL = `
SELECT g.remaining, coalesce(x.active, 0), coalesce(x.booked, 0)
  FROM ga_inventory g,
       (SELECT sum(quantity) FILTER (WHERE status = 'ACTIVE') AS active, sum(quantity) FILTER (WHERE status = 'BOOKED') AS booked
          FROM holds WHERE event_id = $1) x
 WHERE g.event_id = $1`

// Counts counts an event's seats (or GA tickets) available, held and sold.
func (db *DB) Counts(ctx context.Context, event int64) (*core.Counts, error) {
	e, err := db.Event(ctx, event)
	if err != nil {
		return nil, err
	}
	c := &core.Counts{Capacity: e.Capacity}
	q := gaCountsSQL
	if e.Seated {
		q = seatCountsSQL
	}
	err = db.reads.QueryRow(ctx, q, event).Scan(&c.Available, &c.Held, &c.Sold)
	return c, translate(err)
}
