package postgres

import (
	"context"
	"time"

	"github.com/onsale/onsale/core"
)

// sweepSQL records expired holds, up to $1 at a time: it marks them
// EXPIRED, gives the accounts their tickets back and returns GA tickets to
// the counter, all in one statement. Every condition is re-checked on the
// rows it changes (status, expiry), so a hold extended or booked a moment
// earlier is skipped, never ended; SKIP LOCKED lets a hold being extended
// right now wait for the next sweep. The hold row's status is what makes
// the quota come back exactly once.
//
// It writes no seat row. Lazy expiry (seatFree) already made every seat of
// an expired hold free to every reader and writer the instant its
// hold_until passed: a seat left HELD under an ended hold with hold_until
// in the past is free, exactly as an AVAILABLE one, and the next hold
// simply overwrites it; no statement of the core tells the two apart.
// Rewriting those rows to AVAILABLE was most of the sweep's cost. The
// sweep only reads which of its holds' seats are still under their id (a
// seat a new hold took by lazy expiry names the new hold and is left out)
// to tell the seat-map keeper, whose change feed gets them as available.
const sweepSQL = `
WITH h AS (
    UPDATE holds SET status = 'EXPIRED', version = version + 1, ended_at = now()
     WHERE id IN (SELECT id FROM holds
                   WHERE status = 'ACTIVE' AND expires_at < now()
                   ORDER BY expires_at LIMIT $1
                   FOR UPDATE SKIP LOCKED)
       AND status = 'ACTIVE' AND expires_at < now()
    RETURNING id, event_id, account, seat_ids, quantity, expires_at
)` + sweepTail

// sweepAccountSQL is sweepSQL for one account's expired holds on one event
// ($1 event, $2 account): the hold path runs it when an account's unswept
// expired holds would count against its limit.
const sweepAccountSQL = `
WITH h AS (
    UPDATE holds SET status = 'EXPIRED', version = version + 1, ended_at = now()
     WHERE status = 'ACTIVE' AND expires_at < now() AND event_id = $1 AND account = $2
    RETURNING id, event_id, account, seat_ids, quantity, expires_at
)` + sweepTail

const sweepTail = `, account AS (
    UPDATE account_tickets a SET tickets = a.tickets - x.n
      FROM (SELECT event_id, account, sum(quantity)::int AS n FROM h GROUP BY 1, 2) x
     WHERE a.event_id = x.event_id AND a.account = x.account
), ga AS (
    UPDATE ga_inventory g SET remaining = g.remaining + x.n
      FROM (SELECT event_id, sum(quantity)::int AS n FROM h WHERE cardinality(seat_ids) = 0 GROUP BY 1) x
     WHERE g.event_id = x.event_id
), lapsed AS (
    -- OFFSET 0 keeps the subquery a per-hold lookup of its own seats by
    -- primary key: pulled up into a join, the planner may scan every seat
    -- of every event instead.
    SELECT h.event_id, s.seat_id
      FROM h CROSS JOIN LATERAL (
           SELECT s.seat_id FROM seats s
            WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids) AND s.hold_id = h.id AND s.status = 'HELD'
           OFFSET 0) s
)
SELECT count(*), coalesce(extract(epoch FROM now() - min(expires_at)), 0)::float8, (SELECT count(*) FROM lapsed),
       coalesce((SELECT array_agg(event_id) FROM lapsed), '{}'), coalesce((SELECT array_agg(seat_id) FROM lapsed), '{}')
  FROM h`

// sweepBatch bounds one sweep statement so a backlog is worked off in
// short transactions.
const sweepBatch = 5000

// Sweep records every expired hold as EXPIRED and returns its tickets, in
// batches, and reports how many holds it ended, how many of their seats
// were still under them (free since the hold lapsed; the seat-map keeper
// hears of them as available) and how late it was for the oldest.
func (db *DB) Sweep(ctx context.Context) (core.SweepResult, error) {
	var total core.SweepResult
	for {
		r, err := db.sweep(ctx, sweepSQL, sweepBatch)
		if err != nil {
			return total, err
		}
		total.Holds += r.Holds
		total.Seats += r.Seats
		total.Lag = max(total.Lag, r.Lag)
		if r.Holds < sweepBatch {
			return total, nil
		}
	}
}

func (db *DB) sweep(ctx context.Context, sql string, args ...any) (core.SweepResult, error) {
	var r core.SweepResult
	var lag float64
	var events []int64
	var seats []string
	if err := db.pool.QueryRow(ctx, sql, args...).Scan(&r.Holds, &lag, &r.Seats, &events, &seats); err != nil {
		return r, translate(err)
	}
	byEvent := map[int64][]string{}
	for i, e := range events {
		byEvent[e] = append(byEvent[e], seats[i])
	}
	for e, ss := range byEvent {
		db.seatsChanged(e, ss, true)
	}
	r.Lag = time.Duration(lag * float64(time.Second))
	return r, nil
}
