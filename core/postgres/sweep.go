package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// sweepSQL records expired GA holds, up to $1 at a time: it marks them
// EXPIRED and owed, and returns their tickets to the event's counter, in
// one statement. Every condition is re-checked on the rows it changes
// (status, expiry), so a hold extended or booked a moment earlier is
// skipped, never ended; SKIP LOCKED lets a hold being extended right now
// wait for the next sweep (sweepFastSQL, run first, waits for it a few
// milliseconds).
//
// It reads no seated hold: an expired seated hold needs no sweep
// (migration 00012). Its seats are free to every reader and writer the
// instant its hold_until passes (seatFree): a seat left HELD under a hold
// whose hold_until is past is free, exactly as an AVAILABLE one, and the
// next hold simply overwrites it; the seat-map keeper's rebuild, every
// second (core/seatmap.Interval), shows it free, and the core's memory of
// taken seats never refuses it (core/seatmap/taken.go). Its account's
// tickets come back at the account's next refusal over its limit (below).
// Every statement that books, extends or pays for a hold asks for an
// unexpired one, or, under the honour policy, for seats still held under
// it (bookSQL), and the core shows an ACTIVE hold past its expiry as
// EXPIRED (core.Hold.Effective; the view holds_now does the same for an
// operator). So the row stays ACTIVE until a release, a booking or a
// settle ends it. Rewriting it was all the sweep still did for it, and
// 4,000 such rewrites took longer than the seed's plain sweep of 4,000 seat
// rows (make bench).
//
// The rewrite of each GA hold is a HOT update: no index covers the columns
// it changes (migrations 00011, 00012). So the index the sweep searches,
// holds_ga_expiry, keeps every GA hold it ever swept, and the sweep reads
// it only from sweep_mark.mark on: no GA hold expiring before the mark is
// ACTIVE. The statement moves the mark up to the earliest expiry in its
// range that it leaves ACTIVE (a hold skipped as locked, or beyond the
// batch: a full batch's last expiry) or, when it leaves none, to the
// bound: no transaction that may still write a hold started before the
// bound (sweepBoundSQL, read by the statement before this one in its
// round trip, so before this statement's snapshot under READ COMMITTED,
// which every connection of the core uses: Open), and a hold the core
// writes expires after its statement's now(), so a hold this statement
// cannot see yet expires after the bound. A GA hold written with an
// expiry already past lowers the mark itself and bumps gen (the trigger
// of migrations 00011 and 00012); the statement leaves the mark alone when
// gen is not what it read. It never moves the mark down, and never waits
// for the mark's row (SKIP LOCKED: a trigger or another sweep holding it,
// the mark stays where it is for this sweep), so it cannot deadlock with a
// statement that lowers the mark while it writes holds.
//
// It writes no account row either: the limit is lazy. A swept hold's
// tickets stay in its account's counter, marked owed on the hold row in
// the same UPDATE (migration 00010), until the account's next hold is
// refused over its limit; the hold path then settles the account
// (settleQuotaSQL: owed holds, and expired holds still ACTIVE, seated or
// not) and asks again (retryOverLimit in hold.go). So an expired hold
// never counts against the limit when it matters, and the sweep does not
// rewrite one account row per swept hold, which was two thirds of its cost
// (4,000 holds: some 5,000 WAL records, 20-35 ms). The counter means:
// tickets of the account's ACTIVE (lapsed or not) and BOOKED holds plus
// those of its owed ones (the invariant checks read it so). Nothing else
// reads the counter but the limit's CHECK, which it only makes stricter,
// and the refusal's message, which is read after a settle.
var (
	sweepSQL     = sweepStatement(true, fullBatchBoundSQL)
	sweepFastSQL = sweepStatement(false, fullBatchBoundSQL)
)

// sweepBoundSetting is where the fast statement reads its bound (sweepSQL's
// $2): the statement before it in the same round trip sets it, local to
// their implicit transaction (sweepWith).
const sweepBoundSetting = "onsale.sweep_bound"

// sweepStatement builds sweepSQL (locked: the batch is locked first,
// SKIP LOCKED) or sweepFastSQL (the batch is rewritten at once; run with
// a short lock_timeout, sweepFastLockTimeout), with bound as the bound on
// the mark after a full batch (fullBatchBoundSQL; a test drops it).
//
// The fast statement skips the lock step (4,000 holds: 3 ms of a sweep of
// 18, and a WAL record a hold): it waits for a hold another transaction
// holds, which a sweep must not do for long (see above), so it runs with a
// lock_timeout of a few milliseconds and, when that fires, sweepSQL runs
// instead. A hold changed since the snapshot is re-checked by the UPDATE
// on its newest version: ended only if that version is still ACTIVE and
// past its expiry, what any sweep may end (the ctid match itself is not
// re-checked: PostgreSQL's EvalPlanQual passes a TID condition on the
// newest version, up to 17 at least). A hold confirmed or released
// meanwhile is left as it is. Nothing else differs: the same batch, the
// same conditions, the same mark.
func sweepStatement(locked bool, bound string) string {
	src := "c"
	lock := ""
	until := "current_setting('" + sweepBoundSetting + "')::timestamptz"
	if locked {
		until = "$2::timestamptz"
		src = "l"
		lock = `, l AS (
    -- A hold changed since the snapshot is re-checked as its newest
    -- version (status, expiry); one that still passes is locked, but h
    -- cannot see that version and leaves it for the next sweep (it stays
    -- in c, so the mark does not pass it).
    SELECT ctid AS t FROM holds
     WHERE ctid = ANY (ARRAY(SELECT t FROM c)) AND status = 'ACTIVE' AND expires_at < now()
       FOR UPDATE SKIP LOCKED
)`
	}
	return `
WITH m AS (
    -- No mark row (only by hand): read every hold, as the first sweep does.
    SELECT coalesce((SELECT mark FROM sweep_mark), '-infinity') AS mark, (SELECT gen FROM sweep_mark) AS gen
), c AS MATERIALIZED (
    -- The batch, read once: it is rewritten by ctid (no primary-key
    -- lookups), and the new mark is read from it.
    SELECT ctid AS t, id, expires_at FROM holds
     WHERE expires_at >= (SELECT mark FROM m) AND expires_at < now() AND status = 'ACTIVE'
       AND cardinality(seat_ids) = 0 -- holds_ga_expiry's predicate
     ORDER BY expires_at LIMIT $1
), cs AS (
    SELECT count(*) AS n, max(expires_at) AS last FROM c
)` + lock + `, h AS (
    UPDATE holds SET status = 'EXPIRED', version = version + 1, ended_at = now(), owed = true
     WHERE ctid = ANY (ARRAY(SELECT t FROM ` + src + `)) AND status = 'ACTIVE' AND expires_at < now()
    RETURNING id, event_id, seat_ids, quantity, expires_at
)` + gaReturnSQL + `, ended AS (
    SELECT count(*) AS holds, min(expires_at) AS oldest FROM h
), moved AS (
    UPDATE sweep_mark SET mark = x.mark
      FROM (SELECT least(` + until + `,
                         -- what it left of the batch (nothing, most often: then c is not read again)
                         (SELECT min(expires_at) FROM c
                           WHERE (SELECT holds FROM ended) < (SELECT n FROM cs) AND id NOT IN (SELECT id FROM h)),
                         -- a full batch: the holds after it expire at its last expiry or later
                         ` + bound + `) AS mark
             OFFSET 0) x
     WHERE sweep_mark.one IN (SELECT one FROM sweep_mark FOR UPDATE SKIP LOCKED)
       AND sweep_mark.gen = (SELECT gen FROM m) AND x.mark > sweep_mark.mark
)
SELECT e.holds, coalesce(extract(epoch FROM now() - e.oldest), 0)::float8 FROM ended e`
}

// sweepFastLockTimeout bounds how long sweepFastSQL waits for a row
// another transaction holds (a hold: a payment starting, an extension, a
// settle; or the GA counter, under a queue of GA holds: statements of a
// few milliseconds each) before sweepSQL runs instead, which waits for the
// GA counter as long as any statement does. It is far below
// deadlock_timeout (a second by default): a transaction that waits for a
// hold the sweep already rewrote, while the sweep waits for one of its
// own, is let go by this timeout before PostgreSQL looks for a deadlock.
const sweepFastLockTimeout = "50ms"

// fullBatchBoundSQL is sweepSQL's bound on the mark after a full batch:
// the holds after the batch expire at its last expiry or later, and the
// mark must not pass them.
const fullBatchBoundSQL = `(SELECT last FROM cs WHERE n = $1)`

// sweepBoundSQL is how far a sweep may move the mark when it leaves no
// hold ACTIVE behind: the start of the oldest transaction open now in this
// database, but for this session's (the sweep's own), or now. A
// transaction started later has a later now(), and so do the expiries it
// writes. It reads the other sessions' start times, which PostgreSQL shows
// to sessions of the same role: every core connects as the same role, and
// a session of another role must not write holds. A second off it covers
// a transaction that has begun but not yet shown its start.
// (The statistics functions, not the view pg_stat_activity, which joins
// catalogs and costs a few times more.)
const sweepBoundSQL = `
SELECT least(now(), min(pg_stat_get_backend_xact_start(b))) - interval '1 second'
  FROM pg_stat_get_backend_idset() b
 WHERE pg_stat_get_backend_dbid(b) = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND pg_stat_get_backend_pid(b) <> pg_backend_pid()`

// settleQuotaSQL gives one account ($1 event, $2 account) back the tickets of
// its holds that no longer count, exactly once, and reports them, the
// counter after it (NULL when it wrote nothing) and how many of the
// account's holds it found to settle but did not (another statement
// changed or locked it first: the sweep marked it owed, another settle
// returned it, a booking or release took it). It finds them by primary key through the account's list of
// holds (account_tickets.holds, migration 00010), not by an index on
// holds (event_id, account) that every hold and every swept hold would
// have to write:
//
//   - h: a listed hold that expired and is still ACTIVE (a seated hold,
//     which no sweep ends, or a GA hold not swept yet) is ended here,
//     conditionally on the hold row as the sweep does, and its tickets
//     returned in this statement. It lists no seat: they have been free
//     since the hold lapsed, and the seat-map keeper's rebuild shows them
//     so (some may be another hold's by now);
//   - owed: a listed hold the sweep ended has owed cleared, conditionally
//     on the hold row, and its tickets returned in this statement.
//
// The hold row is what makes a return happen once: a hold goes from
// ACTIVE (or owed) to EXPIRED and not owed once, whichever of a settle,
// the sweep, a release or a booking changes its row first; the others
// re-check the row, find it changed and return nothing for it. The
// statement runs after settleLockSQL in one transaction (settleQuota), so
// the rows it must change are already its own; it takes the account row
// (FOR UPDATE) and never waits for a hold row (SKIP LOCKED: a hold that
// became owed since the lock statement's snapshot and that another
// transaction holds is counted as missed). So it holds no account row
// while it waits for a hold row, and cannot deadlock with a release, which
// takes the hold row and then the account row, nor with another settle.
// The counter is
// decremented by exactly what the UPDATEs returned, relative to its
// current value (a hold appended to the list meanwhile is kept: only ids
// this statement saw are removed).
// Removed from the list are the holds returned here and those that need
// nothing more (booked: their tickets count for good; released or
// returned before: already given back). An ACTIVE or owed hold the
// statement did not change stays listed for the next settle. It writes
// nothing when it finds nothing to do.
const settleQuotaSQL = `
WITH listed AS (
    SELECT holds FROM account_tickets WHERE event_id = $1 AND account = $2 FOR UPDATE
), h AS (
    UPDATE holds SET status = 'EXPIRED', version = version + 1, ended_at = now()
     WHERE id IN (SELECT id FROM holds WHERE id = ANY ((SELECT holds FROM listed)::uuid[]) AND status = 'ACTIVE' AND expires_at < now()
                  FOR UPDATE SKIP LOCKED)
       AND status = 'ACTIVE' AND expires_at < now()
    RETURNING id, event_id, seat_ids, quantity, expires_at
), owed AS (
    UPDATE holds SET owed = false
     WHERE id IN (SELECT id FROM holds WHERE id = ANY ((SELECT holds FROM listed)::uuid[]) AND owed FOR UPDATE SKIP LOCKED)
       AND owed
    RETURNING id, quantity
), done AS (
    SELECT id FROM h UNION ALL SELECT id FROM owed
    UNION ALL
    -- Read in the statement's snapshot, which may predate holds listed
    -- since (listed is read locked, so current): only a hold seen here
    -- can be found to need nothing more.
    SELECT id FROM holds WHERE id = ANY ((SELECT holds FROM listed)::uuid[]) AND status <> 'ACTIVE' AND NOT owed
), returned AS (
    SELECT ((SELECT coalesce(sum(quantity), 0) FROM h) + (SELECT coalesce(sum(quantity), 0) FROM owed))::int AS n
), account AS (
    UPDATE account_tickets a
       SET tickets = a.tickets - (SELECT n FROM returned),
           holds = array(SELECT x FROM unnest(a.holds) x WHERE x <> ALL (array(SELECT id FROM done)))
     WHERE a.event_id = $1 AND a.account = $2 AND EXISTS (SELECT 1 FROM done)
    RETURNING a.tickets
)` + gaReturnSQL + `
SELECT (SELECT n FROM returned), (SELECT tickets FROM account),
       (SELECT count(*) FROM holds WHERE id = ANY ((SELECT holds FROM listed)::uuid[]) AND ((status = 'ACTIVE' AND expires_at < now()) OR owed))
         - (SELECT count(*) FROM h) - (SELECT count(*) FROM owed)`

// gaReturnSQL follows a CTE h of holds just ended: their GA tickets go
// back to their counter.
const gaReturnSQL = `, ga AS (
    UPDATE ga_inventory g SET remaining = g.remaining + x.n
      FROM (SELECT event_id, sum(quantity)::int AS n FROM h WHERE cardinality(seat_ids) = 0 GROUP BY 1) x
     WHERE g.event_id = x.event_id
)`

// sweepBatch bounds one sweep statement so a backlog is worked off in
// short transactions.
const sweepBatch = 5000

// Sweep records every expired GA hold as EXPIRED (owed: its account's
// tickets come back at the account's next refusal, settleQuotaSQL) and
// returns its tickets to the event's counter, in batches, and reports how
// many holds it ended and how late it was for the oldest. Expired seated
// holds need no sweep (sweepSQL).
func (db *DB) Sweep(ctx context.Context) (core.SweepResult, error) {
	var total core.SweepResult
	for {
		r, err := db.sweep(ctx, sweepBatch)
		if err != nil {
			return total, err
		}
		total.Holds += r.Holds
		total.Lag = max(total.Lag, r.Lag)
		if r.Holds < sweepBatch {
			return total, nil
		}
	}
}

func (db *DB) sweep(ctx context.Context, batch int) (core.SweepResult, error) {
	return db.sweepWith(ctx, sweepFastSQL, sweepSQL, batch, sweepBoundSQL)
}

// sweepWith runs one batch: fast (sweepFastSQL, or a test's variant of
// it) under sweepFastLockTimeout, in one round trip (a pipeline: one
// implicit transaction, so the settings hold for the statement and end
// with it), or, when it had to wait longer for a hold, locked (sweepSQL).
// The bound (boundSQL: sweepBoundSQL, or a test's) is read by the first
// statement of the round trip, so before the sweep statement's snapshot,
// and handed to it in a setting (sweepBoundSetting; as JSON's ISO 8601
// text, exact to the microsecond whatever the session's DateStyle) and to
// sweepSQL as $2.
func (db *DB) sweepWith(ctx context.Context, fast, locked string, batch int, boundSQL string) (core.SweepResult, error) {
	var r core.SweepResult
	var lag float64
	var bound time.Time
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('lock_timeout', '` + sweepFastLockTimeout + `', true), set_config('` + sweepBoundSetting + `', to_json(x.b) #>> '{}', true), x.b
  FROM (` + boundSQL + `) x (b)`).QueryRow(func(row pgx.Row) error {
		var lt, setting string
		return row.Scan(&lt, &setting, &bound)
	})
	b.Queue(fast, batch).QueryRow(func(row pgx.Row) error {
		return row.Scan(&r.Holds, &lag)
	})
	err := db.pool.SendBatch(ctx, b).Close()
	if code := sqlState(err); code == "55P03" || code == "40P01" {
		err = db.pool.QueryRow(ctx, locked, batch, bound).Scan(&r.Holds, &lag)
	}
	if err != nil {
		return r, translate(err)
	}
	r.Lag = time.Duration(lag * float64(time.Second))
	return r, nil
}

// settleQuota settles one account and returns the tickets it gave back
// and the account's counter after it. One round trip, one implicit
// transaction (a pipeline): settleLockSQL first locks, in id order, every
// listed hold that may owe tickets, waiting for whoever holds one (a
// sweep's batch, a booking, another settle of the account); then
// settleQuotaSQL, whose SKIP LOCKED never skips a row its own transaction
// holds, settles them all. So locks held by others cannot make it miss a
// hold, however many settles of the account run at once. (Waiting for the
// rows in a statement of their own and settling in the next let each of
// nine settles of one account skip the rows another's wait held at that
// instant, three runs in a row: a hold over the limit was refused while an
// expired hold's ticket still counted. Experiment 8, under load.)
// The lock order, the account's hold rows then its account row, is the
// one a release and a refused capture take, so no deadlock with them nor
// with another settle. Both statements judge expiry at one instant (now(),
// the transaction's start), so the second can miss only a hold that was
// not owing at the first's snapshot and became owed (a sweep committed it)
// before the second's, and that someone else holds at that moment (a
// settle's lock statement, a payment): it runs again, with a new instant,
// a few times at most. When the last run wrote nothing the counter is
// read again, in a statement of its own: the run may have waited for another settle (a
// concurrent hold of the same account) to commit, and read the counter as
// it was before that one returned anything. A deadlock (a GA hold of the
// same account, which takes the GA row before the account row) is asked
// again once PostgreSQL has found it (deadlock_timeout, a second by
// default), as a hold is.
func (db *DB) settleQuota(ctx context.Context, event int64, account string) (returned, have int, err error) {
	var after *int
	for try := 1; ; try++ {
		var n, missed int
		err = db.retry(ctx, holdRetry, "settle", func() error {
			b := &pgx.Batch{}
			if db.settleLock != "" {
				b.Queue(db.settleLock, event, account)
			}
			b.Queue(settleQuotaSQL, event, account).QueryRow(func(row pgx.Row) error {
				return row.Scan(&n, &after, &missed)
			})
			return db.pool.SendBatch(ctx, b).Close()
		}, "event", event)
		if err != nil {
			return returned, 0, translate(err)
		}
		returned += n
		if missed == 0 || try == settleTries {
			break
		}
	}
	if after != nil {
		return returned, *after, nil
	}
	err = db.pool.QueryRow(ctx, accountTicketsSQL, event, account).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return returned, 0, translate(err)
	}
	return returned, have, nil
}

// settleLockSQL locks the account's listed holds that may owe tickets, in
// id order, for the settleQuotaSQL after it in the same transaction
// (settleQuota). It takes no account row. $1 event, $2 account.
const settleLockSQL = `
SELECT count(*) FROM (
    SELECT 1 FROM holds
     WHERE id = ANY ((SELECT holds FROM account_tickets WHERE event_id = $1 AND account = $2)::uuid[])
       AND (owed OR (status = 'ACTIVE' AND expires_at < now()))
     ORDER BY id FOR UPDATE) locked`

// settleTries bounds the runs of one settle: a run after the first is
// needed only when one of the account's holds became owed between its two
// statements' snapshots and another transaction held it.
const settleTries = 3
