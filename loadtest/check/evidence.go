package check

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// evidenceOf is how much an invariant looked at: N rows, samples,
// admissions or confirmations, and what it means when there were none.
type evidenceOf struct {
	N    int
	None string // e.g. "no confirmed booking in the database"
}

// rule fails r when it rests on nothing. A rule that passes over an empty
// set proves only that the set was empty: a sampler that never answered, a
// crowd that recorded nothing or a sale that sold nothing must show as a
// failure, not as a clean sale.
func (e evidenceOf) rule(r Result) Result {
	if e.N > 0 {
		return r
	}
	r.Pass = false
	r.Detail = "no evidence (" + e.None + "): " + r.Detail
	return r
}

// saleEvidence is what the database holds of the sale, for the rules that
// read it: each rule names the rows it is about.
type saleEvidence struct {
	confirmed, bookings, holds, expired, counters evidenceOf
}

// evidenceSQL counts the event's confirmed bookings, bookings, holds,
// expired holds (ended by a sweep or a settle, or lapsed: an expired seated
// hold stays ACTIVE in its row) and account counters. $1 event.
const evidenceSQL = `
SELECT (SELECT count(*) FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED'),
       (SELECT count(*) FROM bookings WHERE event_id = $1),
       (SELECT count(*) FROM holds WHERE event_id = $1),
       (SELECT count(*) FROM holds WHERE event_id = $1 AND (status = 'EXPIRED' OR status = 'ACTIVE' AND expires_at < now())),
       (SELECT count(*) FROM account_tickets WHERE event_id = $1)`

func readEvidence(ctx context.Context, conn *pgx.Conn, event int64) (saleEvidence, error) {
	var e saleEvidence
	err := conn.QueryRow(ctx, evidenceSQL, event).Scan(&e.confirmed.N, &e.bookings.N, &e.holds.N, &e.expired.N, &e.counters.N)
	if err != nil {
		return e, fmt.Errorf("count the sale's rows: %w", err)
	}
	e.confirmed.None = "no confirmed booking of the event in the database"
	e.bookings.None = "no booking of the event in the database"
	e.holds.None = "no hold of the event in the database"
	e.expired.None = "no hold of the event expired"
	e.counters.None = "no account counter for the event"
	return e, nil
}
