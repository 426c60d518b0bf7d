package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// The vitals' statements, each read through an index: pending jobs through
// outbox_due (DEAD ones are few and the outbox small beside the holds),
// pending payments through bookings_pending, live shows by their times.
const (
	// Two reads, each through a partial index (outbox_due, outbox_dead):
	// the outbox keeps every job done, and grows with each sale.
	outboxVitalsSQL = `
WITH p AS (SELECT kind, count(*) AS n, extract(epoch FROM now() - min(created_at)) AS oldest
             FROM outbox WHERE status = 'PENDING' AND next_attempt_at > '-infinity' GROUP BY kind),
     d AS (SELECT kind, count(*) AS n FROM outbox WHERE status = 'DEAD' GROUP BY kind)
SELECT coalesce(p.kind, d.kind), coalesce(p.n, 0), coalesce(d.n, 0), coalesce(p.oldest, 0)
  FROM p FULL JOIN d ON d.kind = p.kind ORDER BY 1`
	paymentVitalsSQL = `
SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0) FROM bookings WHERE status = ` + sqlPending
	// A live show: published or closed, on sale within the hour, not
	// started more than six hours ago.
	liveEventsSQL = `
SELECT id, seated FROM events
 WHERE status IN ('published', 'closed') AND onsale_at < now() + interval '1 hour' AND starts_at > now() - interval '6 hours'
 ORDER BY id LIMIT 100`
	seatedHoldsSQL = `SELECT count(DISTINCT hold_id) FROM seats WHERE event_id = $1 AND status = 'HELD' AND hold_until > now()`
	gaHoldsSQL     = `SELECT count(*) FROM holds WHERE cardinality(seat_ids) = 0 AND expires_at > now() AND event_id = $1 AND status = 'ACTIVE'`
)

// Vitals implements core.VitalsReader.
func (db *DB) Vitals(ctx context.Context) (*core.Vitals, error) {
	v := &core.Vitals{}
	rows, err := db.reads.Query(ctx, outboxVitalsSQL)
	if err != nil {
		return nil, translate(err)
	}
	v.Outbox, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.OutboxVitals, error) {
		var o core.OutboxVitals
		var oldest float64
		err := r.Scan(&o.Kind, &o.Pending, &o.Dead, &oldest)
		o.OldestPending = time.Duration(oldest * float64(time.Second))
		return o, err
	})
	if err != nil {
		return nil, translate(err)
	}
	var oldest float64
	if err := db.reads.QueryRow(ctx, paymentVitalsSQL).Scan(&v.PaymentsPending, &oldest); err != nil {
		return nil, translate(err)
	}
	v.OldestPaymentPending = time.Duration(oldest * float64(time.Second))
	rows, err = db.reads.Query(ctx, liveEventsSQL)
	if err != nil {
		return nil, translate(err)
	}
	type live struct {
		id     int64
		seated bool
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (live, error) {
		var l live
		return l, r.Scan(&l.id, &l.seated)
	})
	if err != nil {
		return nil, translate(err)
	}
	for _, l := range events {
		c, err := db.Counts(ctx, l.id)
		if err != nil {
			return nil, err
		}
		e := core.EventVitals{ID: l.id, Capacity: c.Capacity, Available: c.Available, Held: c.Held, Sold: c.Sold}
		q := gaHoldsSQL
		if l.seated {
			q = seatedHoldsSQL
		}
		if err := db.reads.QueryRow(ctx, q, l.id).Scan(&e.HoldsActive); err != nil {
			return nil, translate(err)
		}
		v.Events = append(v.Events, e)
	}
	return v, nil
}
