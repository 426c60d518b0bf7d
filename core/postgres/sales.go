package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// salesSQL reads a show's figures per band: capacity (seats of the band,
// or the GA counter's), tickets sold (confirmed bookings) and refunded
// (bookings whose money goes back), seats held under holds still running
// (GA: the tickets of running GA holds). $1 event.
const salesSQL = `
WITH t AS (
  SELECT coalesce(s.band, g.band) AS band, bk.status
    FROM tickets t
    JOIN bookings bk ON bk.id = t.booking_id
    LEFT JOIN seats s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
    LEFT JOIN ga_inventory g ON g.event_id = t.event_id AND t.seat_id IS NULL
   WHERE t.event_id = $1
)
SELECT pb.code, pb.name, pb.price_paise,
       (SELECT count(*) FROM seats WHERE event_id = $1 AND band = pb.code)
         + coalesce((SELECT capacity FROM ga_inventory WHERE event_id = $1 AND band = pb.code), 0),
       (SELECT count(*) FROM t WHERE band = pb.code AND status = 'CONFIRMED'),
       (SELECT count(*) FROM t WHERE band = pb.code AND status IN ('REFUND_DUE', 'REFUNDED')),
       (SELECT count(*) FROM seats x JOIN holds h ON h.id = x.hold_id
         WHERE x.event_id = $1 AND x.band = pb.code AND x.status = 'HELD' AND x.hold_until > now() AND h.status = 'ACTIVE')
         + CASE WHEN EXISTS (SELECT 1 FROM ga_inventory WHERE event_id = $1 AND band = pb.code)
                THEN (SELECT coalesce(sum(quantity), 0) FROM holds
                       WHERE event_id = $1 AND status = 'ACTIVE' AND expires_at > now() AND cardinality(seat_ids) = 0)
                ELSE 0 END,
       now()
  FROM price_bands pb
 WHERE pb.event_id = $1
 ORDER BY pb.price_paise DESC, pb.code`

// Sales reads a show's figures (core.Sales), or ENotFound.
func (db *DB) Sales(ctx context.Context, id int64) (*core.Sales, error) {
	if _, err := db.Event(ctx, id); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, salesSQL, id)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	s := &core.Sales{EventID: id, Bands: []core.BandSales{}}
	for rows.Next() {
		var b core.BandSales
		var at time.Time
		if err := rows.Scan(&b.Code, &b.Name, &b.PricePaise, &b.Capacity, &b.Sold, &b.Refunded, &b.Held, &at); err != nil {
			return nil, translate(err)
		}
		s.AsOf = at
		b.Available = max(0, b.Capacity-b.Sold-b.Held)
		b.RevenuePaise = int64(b.Sold) * b.PricePaise
		b.RefundedPaise = int64(b.Refunded) * b.PricePaise
		s.Bands = append(s.Bands, b)
		t := &s.Total
		t.Capacity, t.Sold, t.Held, t.Available = t.Capacity+b.Capacity, t.Sold+b.Sold, t.Held+b.Held, t.Available+b.Available
		t.RevenuePaise, t.Refunded, t.RefundedPaise = t.RevenuePaise+b.RevenuePaise, t.Refunded+b.Refunded, t.RefundedPaise+b.RefundedPaise
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if s.AsOf.IsZero() {
		s.AsOf = time.Now()
	}
	return s, nil
}

// attendeesSQL lists a show's valid tickets (confirmed, captured
// bookings) with their holder's contact and check-in, by booking and
// ticket. $1 event.
const attendeesSQL = `
SELECT t.booking_id, t.n, coalesce(t.seat_id, ''), coalesce(s.band, g.band, ''),
       coalesce(b.phone, ''), coalesce(b.email, ''), c.scanned_at, coalesce(c.gate, '')
  FROM tickets t
  JOIN bookings b ON b.id = t.booking_id AND b.status = 'CONFIRMED' AND b.captured_at IS NOT NULL
  LEFT JOIN seats s ON s.event_id = t.event_id AND s.seat_id = t.seat_id
  LEFT JOIN ga_inventory g ON g.event_id = t.event_id AND t.seat_id IS NULL
  LEFT JOIN checkins c ON c.booking_id = t.booking_id AND c.n = t.n
 WHERE t.event_id = $1
 ORDER BY t.booking_id, t.n`

// Attendees lists a show's valid tickets (core.Attendee), or ENotFound.
func (db *DB) Attendees(ctx context.Context, id int64) ([]core.Attendee, error) {
	if _, err := db.Event(ctx, id); err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, attendeesSQL, id)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.Attendee, error) {
		var a core.Attendee
		var n int
		err := r.Scan(&a.Booking, &n, &a.Seat, &a.Band, &a.Phone, &a.Email, &a.CheckedInAt, &a.Gate)
		a.Ticket = core.TicketRef(a.Booking, n)
		return a, err
	})
	if errors.Is(err, pgx.ErrNoRows) || out == nil {
		out = []core.Attendee{}
	}
	return out, translate(err)
}
