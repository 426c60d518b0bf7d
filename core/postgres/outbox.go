package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// claimSQL leases due jobs: SKIP LOCKED lets several workers (and several
// cores) share the table, and the lease hands a job whose worker died to
// another after it runs out. $1 how many, $2 lease seconds, $3 one job's id
// (0: any).
const claimSQL = `
UPDATE outbox SET attempts = attempts + 1, locked_until = now() + make_interval(secs => $2)
 WHERE id IN (SELECT id FROM outbox
               WHERE status = ` + sqlJobPending + ` AND next_attempt_at <= now()
                 AND (locked_until IS NULL OR locked_until < now())
                 AND ($3::bigint = 0 OR id = $3)
               ORDER BY next_attempt_at
               LIMIT $1
               FOR UPDATE SKIP LOCKED)
RETURNING id, kind, booking_id, round, attempts, coalesce(payment_id, '')`

// ClaimJobs leases up to n due jobs for lease.
func (db *DB) ClaimJobs(ctx context.Context, n int, lease time.Duration) ([]core.Job, error) {
	return db.claim(ctx, n, lease, 0)
}

// ClaimJob leases one job by id if it is due and free: the request that
// queued a refund or a capture runs it at once after commit, and the
// workers are the retry.
func (db *DB) ClaimJob(ctx context.Context, id int64, lease time.Duration) (*core.Job, error) {
	jobs, err := db.claim(ctx, 1, lease, id)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return &jobs[0], nil
}

func (db *DB) claim(ctx context.Context, n int, lease time.Duration, id int64) ([]core.Job, error) {
	rows, err := db.pool.Query(ctx, claimSQL, n, lease.Seconds(), id)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var jobs []core.Job
	for rows.Next() {
		var j core.Job
		if err := rows.Scan(&j.ID, &j.Kind, &j.BookingID, &j.Round, &j.Attempts, &j.PaymentID); err != nil {
			return nil, translate(err)
		}
		jobs = append(jobs, j)
	}
	return jobs, translate(rows.Err())
}

// pendingJobSQL finds the pending job of a kind for a booking. $1 kind,
// $2 booking.
const pendingJobSQL = `SELECT id FROM outbox WHERE kind = $1 AND booking_id = $2 AND status = ` + sqlJobPending

// JobFor returns the pending job of a kind for a booking, if any.
func (db *DB) JobFor(ctx context.Context, kind core.JobKind, booking int64) (int64, error) {
	var id int64
	err := db.pool.QueryRow(ctx, pendingJobSQL, kind, booking).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, translate(err)
}

// jobStatusSQL reads a job's status. $1 job.
const jobStatusSQL = `SELECT status FROM outbox WHERE id = $1`

// JobStatus returns a job's status.
func (db *DB) JobStatus(ctx context.Context, id int64) (core.JobStatus, error) {
	var st core.JobStatus
	err := db.pool.QueryRow(ctx, jobStatusSQL, id).Scan(&st)
	return st, translate(err)
}

// finishJobSQL closes a pending job, with a reason (NULL: done as asked;
// otherwise why it was closed without its effect). The status guard makes a
// second finish (a worker whose lease ran out finishing after the one that
// took over) change nothing. $1 job, $2 reason.
const finishJobSQL = `UPDATE outbox SET status = ` + sqlJobDone + `, done_at = now(), locked_until = NULL, last_error = $2
 WHERE id = $1 AND status = ` + sqlJobPending

// lockJobBookingSQL locks the booking a finished job moves (scanLocked).
// $1 booking.
const lockJobBookingSQL = lockedColumns + ` WHERE id = $1 FOR UPDATE`

// FinishJob marks a job done and, for a job that moves money, applies its
// outcome to the booking in the same transaction (core.Transition): a
// refund or void moves REFUND_DUE to REFUNDED; a capture marks a card
// booking captured and queues its tickets.
func (db *DB) FinishJob(ctx context.Context, j core.Job) error {
	return translate(db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, finishJobSQL, j.ID, nil)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		o, ok := j.Kind.Outcome()
		if !ok {
			return nil
		}
		b, err := scanLocked(tx.QueryRow(ctx, lockJobBookingSQL, j.BookingID))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, _, err = advance(ctx, tx, b, o, "")
		return err
	}))
}

// AbandonJob closes a job that has nothing left to do, without its usual
// effect (a capture the provider refused for good, compensated elsewhere).
func (db *DB) AbandonJob(ctx context.Context, j core.Job, reason string) error {
	_, err := db.pool.Exec(ctx, finishJobSQL, j.ID, reason)
	return translate(err)
}

// failJobSQL records a failed attempt and schedules the next; a job that
// may be given up is left DEAD once it has had its attempts. Only the
// lease's holder records it: each claim counts an attempt, so the attempt
// number the worker claimed is its lease, and a worker whose lease ran out
// (frozen, then thawed: see DefaultIdleInTxTimeout) changes nothing of a
// job another worker has claimed since. $1 job, $2 error, $3 backoff
// seconds, $4 attempts allowed, $5 true when the job may be given up,
// $6 the attempt the worker claimed.
const failJobSQL = `UPDATE outbox
   SET last_error = $2, locked_until = NULL, next_attempt_at = now() + make_interval(secs => $3),
       status = CASE WHEN attempts >= $4 AND $5 THEN ` + sqlJobDead + ` ELSE status END
 WHERE id = $1 AND status = ` + sqlJobPending + ` AND attempts = $6`

// FailJob records a failed attempt and schedules the next one after
// core.JobBackoff. A ticket email or SMS is left DEAD after
// core.MaxJobAttempts; a job that moves money (refund, void, capture) is
// never given up: it keeps retrying hourly, and the metrics show it.
func (db *DB) FailJob(ctx context.Context, j core.Job, cause error) error {
	_, err := db.pool.Exec(ctx, failJobSQL, j.ID, cause.Error(), core.JobBackoff(j.Attempts).Seconds(), core.MaxJobAttempts, !j.Kind.MovesMoney(), j.Attempts)
	return translate(err)
}

// outboxCountsSQL counts jobs by kind and status, for metrics.
const outboxCountsSQL = `SELECT kind, status, count(*) FROM outbox GROUP BY 1, 2`

// OutboxCounts reports jobs by kind and status, for metrics.
func (db *DB) OutboxCounts(ctx context.Context) (map[[2]string]int, error) {
	rows, err := db.pool.Query(ctx, outboxCountsSQL)
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

// pendingBookingsSQL takes the stale pending bookings due for a look and
// pushes their next look back by a quarter of the age (scanBooking).
// The literal status lets the planner use bookings_pending. $1 age
// seconds, $2 limit.
const pendingBookingsSQL = `WITH due AS (
    UPDATE bookings SET reconcile_at = now() + make_interval(secs => greatest($1 / 4, 1))
     WHERE id IN (SELECT id FROM bookings WHERE status = ` + sqlPending + ` AND created_at < now() - make_interval(secs => $1)
                    AND reconcile_at <= now() ORDER BY reconcile_at LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id)
` + bookingColumns + ` WHERE id IN (SELECT id FROM due) ORDER BY created_at`

// PendingBookings takes up to limit bookings still PAYMENT_PENDING that were
// created more than age ago and are due for a look, and pushes their next
// look back by a quarter of age, so bookings the provider still calls
// pending rotate instead of starving the rest.
func (db *DB) PendingBookings(ctx context.Context, age time.Duration, limit int) ([]core.Booking, error) {
	rows, err := db.pool.Query(ctx, pendingBookingsSQL, age.Seconds(), limit)
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
