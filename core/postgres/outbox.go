package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// Job is one outbox entry: something to do at the provider or for the fan
// after the transaction that decided it committed.
type Job struct {
	ID        int64
	Kind      string // refund, void, capture, email, sms
	BookingID int64
	Attempts  int // including this one
}

// MaxAttempts is how often a job is tried before it is left DEAD (for a
// person to look at; counted in metrics). With the backoff below that is
// about a day.
const MaxAttempts = 30

// claimSQL leases due jobs: SKIP LOCKED lets several workers (and several
// cores) share the table, and the lease hands a job whose worker died to
// another after it runs out.
const claimSQL = `
UPDATE outbox SET attempts = attempts + 1, locked_until = now() + make_interval(secs => $2)
 WHERE id IN (SELECT id FROM outbox
               WHERE status = 'PENDING' AND next_attempt_at <= now()
                 AND (locked_until IS NULL OR locked_until < now())
                 AND ($3::bigint = 0 OR id = $3)
               ORDER BY next_attempt_at
               LIMIT $1
               FOR UPDATE SKIP LOCKED)
RETURNING id, kind, booking_id, attempts`

// ClaimJobs leases up to n due jobs for lease.
func (db *DB) ClaimJobs(ctx context.Context, n int, lease time.Duration) ([]Job, error) {
	return db.claim(ctx, n, lease, 0)
}

// ClaimJob leases one job by id if it is due and free: the request that
// queued a refund or a capture runs it at once after commit, and the
// workers are the retry.
func (db *DB) ClaimJob(ctx context.Context, id int64, lease time.Duration) (*Job, error) {
	jobs, err := db.claim(ctx, 1, lease, id)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return &jobs[0], nil
}

func (db *DB) claim(ctx context.Context, n int, lease time.Duration, id int64) ([]Job, error) {
	rows, err := db.pool.Query(ctx, claimSQL, n, lease.Seconds(), id)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var jobs []Job
	for rows.Next() {
		var j Job
		if err := rows.Scan(&j.ID, &j.Kind, &j.BookingID, &j.Attempts); err != nil {
			return nil, translate(err)
		}
		jobs = append(jobs, j)
	}
	return jobs, translate(rows.Err())
}

// JobFor returns the pending job of a kind for a booking, if any.
func (db *DB) JobFor(ctx context.Context, kind string, booking int64) (int64, error) {
	var id int64
	err := db.pool.QueryRow(ctx, `SELECT id FROM outbox WHERE kind = $1 AND booking_id = $2 AND status = 'PENDING'`, kind, booking).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, translate(err)
}

// JobStatus returns a job's status: PENDING, DONE or DEAD.
func (db *DB) JobStatus(ctx context.Context, id int64) (string, error) {
	var st string
	err := db.pool.QueryRow(ctx, `SELECT status FROM outbox WHERE id = $1`, id).Scan(&st)
	return st, translate(err)
}

// FinishJob marks a job done; a refund or void also moves its booking from
// REFUND_DUE to REFUNDED, in the same transaction.
func (db *DB) FinishJob(ctx context.Context, j Job) error {
	return translate(db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE outbox SET status = 'DONE', done_at = now(), locked_until = NULL, last_error = NULL
 WHERE id = $1 AND status = 'PENDING'`, j.ID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		switch j.Kind {
		case "refund", "void":
			_, err = tx.Exec(ctx, `UPDATE bookings SET status = 'REFUNDED', updated_at = now() WHERE id = $1 AND status = 'REFUND_DUE'`, j.BookingID)
		case "capture":
			// The money is taken: now the tickets go out.
			_, err = tx.Exec(ctx, `
WITH b AS (UPDATE bookings SET captured_at = now(), updated_at = now() WHERE id = $1 AND captured_at IS NULL RETURNING id)
INSERT INTO outbox (kind, booking_id) SELECT k, b.id FROM b, unnest(ARRAY['email', 'sms']) k ON CONFLICT (kind, booking_id) DO NOTHING`, j.BookingID)
		}
		return err
	}))
}

// AbandonJob closes a job that has nothing left to do, without its usual
// effect (a capture the provider refused for good, compensated elsewhere).
func (db *DB) AbandonJob(ctx context.Context, j Job, reason string) error {
	_, err := db.pool.Exec(ctx, `UPDATE outbox SET status = 'DONE', done_at = now(), locked_until = NULL, last_error = $2
 WHERE id = $1 AND status = 'PENDING'`, j.ID, reason)
	return translate(err)
}

// FailJob records a failed attempt and schedules the next one with
// exponential backoff (1 s doubling, capped at one hour). A ticket email or
// SMS is left DEAD after MaxAttempts; a job that moves money (refund, void,
// capture) is never given up: it keeps retrying hourly, and the metrics
// show it.
func (db *DB) FailJob(ctx context.Context, j Job, cause error) error {
	backoff := time.Second << min(j.Attempts-1, 12)
	backoff = min(backoff, time.Hour)
	_, err := db.pool.Exec(ctx, `UPDATE outbox
   SET last_error = $2, locked_until = NULL, next_attempt_at = now() + make_interval(secs => $3),
       status = CASE WHEN attempts >= $4 AND kind IN ('email', 'sms') THEN 'DEAD' ELSE status END
 WHERE id = $1 AND status = 'PENDING'`, j.ID, cause.Error(), backoff.Seconds(), MaxAttempts)
	return translate(err)
}

// OutboxCounts reports jobs by kind and status, for metrics.
func (db *DB) OutboxCounts(ctx context.Context) (map[[2]string]int, error) {
	rows, err := db.pool.Query(ctx, `SELECT kind, status, count(*) FROM outbox GROUP BY 1, 2`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := map[[2]string]int{}
	for rows.Next() {
		var k, s string
		var n int
		if err := rows.Scan(&k, &s, &n); err != nil {
			return nil, translate(err)
		}
		out[[2]string{k, s}] = n
	}
	return out, translate(rows.Err())
}

// PendingBookings takes up to limit bookings still PAYMENT_PENDING that were
// created more than age ago and are due for a look, and pushes their next
// look back by a quarter of age, so bookings the provider still calls
// pending rotate instead of starving the rest.
func (db *DB) PendingBookings(ctx context.Context, age time.Duration, limit int) ([]core.Booking, error) {
	rows, err := db.pool.Query(ctx, `WITH due AS (
    UPDATE bookings SET reconcile_at = now() + make_interval(secs => greatest($1 / 4, 1))
     WHERE id IN (SELECT id FROM bookings WHERE status = 'PAYMENT_PENDING' AND created_at < now() - make_interval(secs => $1)
                    AND reconcile_at <= now() ORDER BY reconcile_at LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id)
`+bookingColumns+` WHERE id IN (SELECT id FROM due) ORDER BY created_at`, age.Seconds(), limit)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var out []core.Booking
	for rows.Next() {
		b, err := scanBooking(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *b)
	}
	return out, translate(rows.Err())
}
