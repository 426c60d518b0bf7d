package postgres

import (
	"context"

	"github.com/onsale/onsale/core"
)

// SeatLayout is an event's seats as the seat map draws them: sections of
// rows; seat i of a row has position Pos+i and number Numbers[i]. It never
// changes once the event exists.
type SeatLayout struct {
	EventID  int64            `json:"event_id"`
	Capacity int              `json:"capacity"`
	Bands    []core.PriceBand `json:"price_bands"`
	Sections []LayoutSection  `json:"sections"`
}

// LayoutSection is one block of rows.
type LayoutSection struct {
	Code string      `json:"code"`
	Rows []LayoutRow `json:"rows"`
}

// LayoutRow is one row: its label, band, first position and seat numbers.
type LayoutRow struct {
	Label   string `json:"label"`
	Band    string `json:"band"`
	Pos     int    `json:"pos"`
	Numbers []int  `json:"numbers"`
}

// Layout returns a seated event's layout (ENotFound for none or GA).
func (db *DB) Layout(ctx context.Context, event int64) (*SeatLayout, error) {
	e, err := db.Event(ctx, event)
	if err != nil {
		return nil, err
	}
	if !e.Seated {
		return nil, core.Errorf(core.ENotFound, "event %d is general admission: it has no seat map", event)
	}
	rows, err := db.pool.Query(ctx, `SELECT section, row_label, band, pos, number FROM seats WHERE event_id = $1 ORDER BY pos`, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	l := &SeatLayout{EventID: event, Capacity: e.Capacity, Bands: e.Bands}
	for rows.Next() {
		var sec, row, band string
		var pos, number int
		if err := rows.Scan(&sec, &row, &band, &pos, &number); err != nil {
			return nil, translate(err)
		}
		if n := len(l.Sections); n == 0 || l.Sections[n-1].Code != sec {
			l.Sections = append(l.Sections, LayoutSection{Code: sec})
		}
		s := &l.Sections[len(l.Sections)-1]
		if n := len(s.Rows); n == 0 || s.Rows[n-1].Label != row || s.Rows[n-1].Band != band ||
			s.Rows[n-1].Pos+len(s.Rows[n-1].Numbers) != pos {
			s.Rows = append(s.Rows, LayoutRow{Label: row, Band: band, Pos: pos})
		}
		r := &s.Rows[len(s.Rows)-1]
		r.Numbers = append(r.Numbers, number)
	}
	return l, translate(rows.Err())
}

// Availability returns a bitmap of the event's seats, bit pos set (most
// significant bit first, as Redis SETBIT numbers them) when the seat can be
// held now: free, or held by an expired hold.
func (db *DB) Availability(ctx context.Context, event int64, capacity int) ([]byte, error) {
	rows, err := db.pool.Query(ctx, `SELECT pos FROM seats WHERE event_id = $1
   AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now()))`, event)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	bits := make([]byte, (capacity+7)/8)
	for rows.Next() {
		var pos int
		if err := rows.Scan(&pos); err != nil {
			return nil, translate(err)
		}
		if pos < capacity {
			bits[pos/8] |= 0x80 >> (pos % 8)
		}
	}
	return bits, translate(rows.Err())
}

// SeatPositions maps an event's seat ids to their positions.
func (db *DB) SeatPositions(ctx context.Context, event int64) (map[string]int, error) {
	rows, err := db.pool.Query(ctx, `SELECT seat_id, pos FROM seats WHERE event_id = $1`, event)
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

// LiveSeatedEvents lists seated events on sale or about to be (onsale
// within the hour, not yet started): the ones whose seat maps are kept.
func (db *DB) LiveSeatedEvents(ctx context.Context) (map[int64]int, error) {
	rows, err := db.pool.Query(ctx, `SELECT id, capacity FROM events
 WHERE seated AND onsale_at < now() + interval '1 hour' AND starts_at > now()`)
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

// Counts are an event's tickets by state, for the operators' console.
type Counts struct {
	Capacity  int `json:"capacity"`
	Available int `json:"available"`
	Held      int `json:"held"`
	Sold      int `json:"sold"`
}

// Counts counts an event's seats (or GA tickets) available, held and sold.
func (db *DB) Counts(ctx context.Context, event int64) (*Counts, error) {
	e, err := db.Event(ctx, event)
	if err != nil {
		return nil, err
	}
	c := &Counts{Capacity: e.Capacity}
	if e.Seated {
		err = db.pool.QueryRow(ctx, `SELECT
  count(*) FILTER (WHERE status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now())),
  count(*) FILTER (WHERE status = 'HELD' AND hold_until >= now()),
  count(*) FILTER (WHERE status = 'BOOKED')
  FROM seats WHERE event_id = $1`, event).Scan(&c.Available, &c.Held, &c.Sold)
	} else {
		err = db.pool.QueryRow(ctx, `SELECT g.remaining,
  coalesce((SELECT sum(quantity) FROM holds WHERE event_id = $1 AND status = 'ACTIVE'), 0),
  coalesce((SELECT sum(quantity) FROM holds WHERE event_id = $1 AND status = 'BOOKED'), 0)
  FROM ga_inventory g WHERE g.event_id = $1`, event).Scan(&c.Available, &c.Held, &c.Sold)
	}
	return c, translate(err)
}
