package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// The sign-in store. The rules are core's (core/account.go, "How the
// limits count"); here they are counted so that several cores sharing the
// database count together and a refused request keeps no count: the
// phone's limits on its code row, in the statement that stores or uses the
// code, and the address limits on one counter row per (scope, address,
// hour). The address row is hot (a carrier's NAT puts thousands of fans
// behind one address), so it is counted first, in a statement of its own
// that commits at once: its lock is held for that statement only, not for
// the round trips of a transaction around it. A request the address passes
// but the phone refuses (or that fails) gives its count back (uncountAddr).

// storeCodeSQL keeps a phone's one live code, replacing an earlier one
// (its attempts start again; the sends per phone bound that), unless the
// last send was under $5 seconds ago, or $6 sends are in the window of $4
// seconds, or $8 of them were asked for from address key $7: then it
// changes nothing and returns no row. The sends in the window are kept in
// order in the parallel arrays sent_at and sent_from. The conflicting row
// is locked, so concurrent sends to one phone are checked one at a time.
// $1 phone, $2 hash, $3 ttl seconds.
const storeCodeSQL = `INSERT INTO signin_codes AS c (phone, code_hash, expires_at, created_at, sent_at, sent_from)
SELECT $1, $2, t + make_interval(secs => $3), t, ARRAY[t], ARRAY[$7::text] FROM (SELECT clock_timestamp() AS t) now
ON CONFLICT (phone) DO UPDATE
   SET code_hash = EXCLUDED.code_hash, attempts = 0, wrong_from = '{}', expires_at = EXCLUDED.expires_at, used_at = NULL,
       created_at = EXCLUDED.created_at,
       sent_at = ARRAY(SELECT s.at FROM unnest(c.sent_at, c.sent_from) WITH ORDINALITY s(at, addr, i)
                        WHERE s.at > EXCLUDED.created_at - make_interval(secs => $4) ORDER BY s.i) || EXCLUDED.created_at,
       sent_from = ARRAY(SELECT s.addr FROM unnest(c.sent_at, c.sent_from) WITH ORDINALITY s(at, addr, i)
                          WHERE s.at > EXCLUDED.created_at - make_interval(secs => $4) ORDER BY s.i) || $7::text
 WHERE c.created_at <= EXCLUDED.created_at - make_interval(secs => $5)
   AND (SELECT count(*) FROM unnest(c.sent_at) s WHERE s > EXCLUDED.created_at - make_interval(secs => $4)) < $6
   AND (SELECT count(*) FROM unnest(c.sent_at, c.sent_from) s(at, addr)
         WHERE s.at > EXCLUDED.created_at - make_interval(secs => $4) AND s.addr = $7::text) < $8
RETURNING true`

// phoneWaitSQL says why storeCodeSQL refused a phone: seconds until the
// resend wait ends; sends in the window, seconds until the oldest leaves
// it; the same for address key $4's sends. $1 phone, $2 window seconds,
// $3 resend seconds.
const phoneWaitSQL = `SELECT greatest(0, ceil(extract(epoch FROM created_at + make_interval(secs => $3) - clock_timestamp())))::int,
       (SELECT count(*) FROM unnest(sent_at) s WHERE s > clock_timestamp() - make_interval(secs => $2))::int,
       coalesce((SELECT greatest(1, ceil(extract(epoch FROM min(s) + make_interval(secs => $2) - clock_timestamp())))
          FROM unnest(sent_at) s WHERE s > clock_timestamp() - make_interval(secs => $2))::int, 1),
       (SELECT count(*) FROM unnest(sent_at, sent_from) s(at, addr) WHERE s.at > clock_timestamp() - make_interval(secs => $2) AND s.addr = $4)::int,
       coalesce((SELECT greatest(1, ceil(extract(epoch FROM min(s.at) + make_interval(secs => $2) - clock_timestamp())))
          FROM unnest(sent_at, sent_from) s(at, addr) WHERE s.at > clock_timestamp() - make_interval(secs => $2) AND s.addr = $4)::int, 1)
  FROM signin_codes WHERE phone = $1`

// dropCodeSQL undoes a send whose SMS failed, if the phone's live code is
// still that one: the code dies (expires now; the row stays, so the
// phone's other sends keep counting) and its send leaves sent_at and
// sent_from; created_at, the resend wait's start, goes back to the send
// before (or -infinity), so a resend works at once. $1 phone, $2 hash.
const dropCodeSQL = `UPDATE signin_codes
   SET expires_at = clock_timestamp(),
       created_at = coalesce((SELECT max(s) FROM unnest(sent_at) s WHERE s <> created_at), '-infinity'),
       sent_at = ARRAY(SELECT s.at FROM unnest(sent_at, sent_from) WITH ORDINALITY s(at, addr, i) WHERE s.at <> created_at ORDER BY s.i),
       sent_from = ARRAY(SELECT s.addr FROM unnest(sent_at, sent_from) WITH ORDINALITY s(at, addr, i) WHERE s.at <> created_at ORDER BY s.i)
 WHERE phone = $1 AND code_hash = $2 AND used_at IS NULL AND expires_at > clock_timestamp()`

// addrBucketSQL is the current bucket of an address counter: the clock
// hour (window) now falls in, by the database's clock; a fragment of the
// statements below, whose $3 is the window in seconds.
const addrBucketSQL = `SELECT t, date_bin(make_interval(secs => $3), t, timestamptz 'epoch') AS bucket FROM (SELECT clock_timestamp() AS t) now`

// addrCountSQL counts one request against an address's limit, unless the
// estimate (core.AddrLimitWait's: this bucket's count plus last bucket's
// weighted by the part of it still in the window) has reached the limit:
// then it changes nothing and returns no row. One statement, no lock but
// the counter row's; concurrent upserts of one row apply one at a time,
// each re-checking the WHERE against the newest count. $1 scope, $2 key,
// $3 window seconds, $4 limit.
//
// It commits asynchronously (synchronous_commit off for its own
// transaction, set by the statement itself): the row's lock is held until
// the commit, and a commit that waited for its WAL flush would hold it for
// a disk flush, so one address could pass only one request per flush
// (about 300 sign-ins a second here, every one waiting in line on that
// row). The row is still the arbiter, so the limit stays exact; what a
// crash (or a failover) can lose is the last fraction of a second's
// counts, which lets an address that many requests more in its hour.
const addrCountSQL = `WITH w AS (
  SELECT b.bucket, floor(coalesce((SELECT p.n FROM signin_counts p
                                    WHERE p.scope = $1 AND p.key = $2 AND p.bucket = b.bucket - make_interval(secs => $3)), 0)
                         * (1 - extract(epoch FROM b.t - b.bucket) / $3))::int AS carried,
         set_config('synchronous_commit', 'off', true) AS async
    FROM (` + addrBucketSQL + `) b
)
INSERT INTO signin_counts AS c (scope, key, bucket, n)
SELECT $1, $2, w.bucket, 1 FROM w WHERE w.carried < $4
ON CONFLICT (scope, key, bucket) DO UPDATE SET n = c.n + 1
 WHERE c.n + (SELECT carried FROM w) < $4
RETURNING c.bucket`

// uncountAddrSQL gives back one count that addrCountSQL took in bucket
// $3, for a request refused or failed after it: a count of 1 goes with its
// row (the table's CHECK keeps n > 0), a larger one drops by one.
// Asynchronous like the count, for the same hot row. Should the count move
// under it meanwhile (a concurrent request's), neither branch matches and
// the count stays: it errs towards refusing. $1 scope, $2 key.
const uncountAddrSQL = `WITH async AS (SELECT set_config('synchronous_commit', 'off', true)),
gone AS (
  DELETE FROM signin_counts WHERE scope = $1 AND key = $2 AND bucket = $3 AND n = 1 RETURNING 1
)
UPDATE signin_counts SET n = n - 1 FROM async
 WHERE scope = $1 AND key = $2 AND bucket = $3 AND n > 1`

// addrWaitSQL reads an address counter after a refusal: this bucket's
// count, last bucket's, seconds since this bucket began. $1 scope, $2 key,
// $3 window seconds.
const addrWaitSQL = `SELECT coalesce(max(c.n) FILTER (WHERE c.bucket = b.bucket), 0),
       coalesce(max(c.n) FILTER (WHERE c.bucket = b.bucket - make_interval(secs => $3)), 0),
       extract(epoch FROM b.t - b.bucket)::float8
  FROM (` + addrBucketSQL + `) b
  LEFT JOIN signin_counts c ON c.scope = $1 AND c.key = $2 AND c.bucket IN (b.bucket, b.bucket - make_interval(secs => $3))
 GROUP BY b.t, b.bucket`

// useCodeSQL is the one rule of a code's use: it counts an attempt on a
// code live for address key $4 (unused, unexpired, fewer than $3 wrong
// attempts in all and fewer than $5 from $4) and, when the hash matches,
// marks it used, else records the wrong attempt's address, in one
// conditional UPDATE. Two concurrent verifies of one code serialize on its
// row; the second re-evaluates the WHERE against the first's used_at and
// matches nothing, so a code signs in at most once. $1 phone, $2 hash.
const useCodeSQL = `UPDATE signin_codes
   SET attempts = attempts + 1, used_at = CASE WHEN code_hash = $2 THEN clock_timestamp() END,
       wrong_from = CASE WHEN code_hash = $2 THEN wrong_from ELSE wrong_from || $4::text END
 WHERE phone = $1 AND used_at IS NULL AND expires_at > clock_timestamp() AND attempts < $3
   AND cardinality(array_positions(wrong_from, $4::text)) < $5
RETURNING used_at IS NOT NULL`

// signInSQL returns the phone's account, creating it at the first sign-in.
// $1 phone.
const signInSQL = `INSERT INTO accounts (phone) VALUES ($1)
ON CONFLICT (phone) DO UPDATE SET last_signin_at = now()
RETURNING id, phone, coalesce(email, ''), created_at`

// accountSQL reads an account. $1 id.
const accountSQL = `SELECT id, phone, coalesce(email, ''), created_at FROM accounts WHERE id = $1`

// setEmailSQL sets or removes an account's email. $1 id, $2 email (” removes).
const setEmailSQL = `UPDATE accounts SET email = nullif($2, '') WHERE id = $1
RETURNING id, phone, coalesce(email, ''), created_at`

// countAddr counts one request against an address's limit, in a statement
// of its own that commits at once, or returns ERateLimited. It returns the
// bucket counted in, for uncountAddr.
func (db *DB) countAddr(ctx context.Context, scope, addr string, limit int) (time.Time, error) {
	window := core.LimitWindow.Seconds()
	var bucket time.Time
	err := db.pool.QueryRow(ctx, addrCountSQL, scope, addr, window, limit).Scan(&bucket)
	if !errors.Is(err, pgx.ErrNoRows) {
		return bucket, err
	}
	var cur, prev int
	var elapsed float64
	if err := db.pool.QueryRow(ctx, addrWaitSQL, scope, addr, window).Scan(&cur, &prev, &elapsed); err != nil {
		return bucket, err
	}
	wait := core.AddrLimitWait(limit, cur, prev, time.Duration(elapsed*float64(time.Second)), core.LimitWindow)
	return bucket, rateLimited(scope, int(wait/time.Second))
}

// uncountAddr gives back a count countAddr took, for a request refused or
// failed after it. It is best effort: if it fails, the address keeps one
// count too many for the hour, which errs towards refusing.
func (db *DB) uncountAddr(scope, addr string, bucket time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := db.pool.Exec(ctx, uncountAddrSQL, scope, addr, bucket); err != nil {
		db.log.Warn("sign-in: an address's count not given back (it stays counted this hour)", "scope", scope, "err", err)
	}
}

func rateLimited(scope string, retry int) error {
	what := map[string]string{
		core.ScopeSendPhone:     "too many codes were sent to this number",
		core.ScopeSendPhoneAddr: "too many codes for this number were asked for from this address",
		core.ScopeSendAddr:      "too many codes were asked for from this address",
		core.ScopeVerifyAddr:    "too many sign-in attempts from this address",
		"resend":                "a code was sent to this number moments ago",
	}[scope]
	return core.Errorf(core.ERateLimited, "%s: try again in %d seconds", what, retry).With("retry_after_seconds", retry)
}

// StoreCode counts a send against the address and the phone and keeps the
// code's hash as the phone's live code. See core.Accounts.
func (db *DB) StoreCode(ctx context.Context, r core.CodeRequest, l core.SignInLimits) error {
	l = l.WithDefaults()
	bucket, err := db.countAddr(ctx, core.ScopeSendAddr, r.Addr, l.SendsPerAddr)
	if err != nil {
		return translate(err)
	}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, storeCodeSQL, r.Phone, r.Hash, core.CodeTTL.Seconds(),
			core.LimitWindow.Seconds(), core.ResendAfter.Seconds(), l.SendsPerPhone, r.Addr, l.SendsPerPhoneAddr).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return phoneLimited(ctx, tx, r.Phone, r.Addr, l)
		}
		return err
	})
	if err != nil {
		db.uncountAddr(core.ScopeSendAddr, r.Addr, bucket)
	}
	return translate(err)
}

// DropCode undoes a send whose SMS failed. See core.Accounts.
func (db *DB) DropCode(ctx context.Context, phone string, hash []byte) error {
	_, err := db.pool.Exec(ctx, dropCodeSQL, phone, hash)
	return translate(err)
}

// phoneLimited says which per-phone rule refused a send.
func phoneLimited(ctx context.Context, tx pgx.Tx, phone, addr string, l core.SignInLimits) error {
	var resend, sent, retry, sentAddr, retryAddr int
	if err := tx.QueryRow(ctx, phoneWaitSQL, phone, core.LimitWindow.Seconds(), core.ResendAfter.Seconds(), addr).
		Scan(&resend, &sent, &retry, &sentAddr, &retryAddr); err != nil {
		return err
	}
	switch {
	case resend > 0:
		return rateLimited("resend", resend)
	case sentAddr >= l.SendsPerPhoneAddr:
		return rateLimited(core.ScopeSendPhoneAddr, retryAddr)
	case sent >= l.SendsPerPhone:
		return rateLimited(core.ScopeSendPhone, retry)
	}
	return rateLimited("resend", 1) // the wait ended between the two statements
}

// VerifyCode uses the phone's live code when hash matches and counts a
// verify against the address. See core.Accounts. A wrong code's attempt is
// committed before ECodeInvalid is returned; a verify the address limit
// refuses changes nothing.
func (db *DB) VerifyCode(ctx context.Context, phone, addr string, hash []byte, l core.SignInLimits) (*core.Account, error) {
	l = l.WithDefaults()
	bucket, err := db.countAddr(ctx, core.ScopeVerifyAddr, addr, l.VerifiesPerAddr)
	if err != nil {
		return nil, translate(err)
	}
	var a *core.Account
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		a = nil // inTx may run fn again
		var used bool
		err := tx.QueryRow(ctx, useCodeSQL, phone, hash, core.CodeAttempts, addr, core.CodeWrongPerAddr).Scan(&used)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || (err == nil && !used):
			return nil // no live code, or a wrong one: the attempt is counted
		case err != nil:
			return err
		}
		a, err = scanAccount(tx.QueryRow(ctx, signInSQL, phone))
		return err
	})
	if err != nil {
		db.uncountAddr(core.ScopeVerifyAddr, addr, bucket)
		return nil, translate(err)
	}
	if a == nil {
		return nil, core.Errorf(core.ECodeInvalid, "the code is wrong, expired or used: ask for a new one")
	}
	return a, nil
}

func scanAccount(row pgx.Row) (*core.Account, error) {
	var a core.Account
	if err := row.Scan(&a.ID, &a.Phone, &a.Email, &a.CreatedAt); err != nil {
		return nil, err
	}
	return &a, nil
}

// Account returns an account, or ENotFound.
func (db *DB) Account(ctx context.Context, id int64) (*core.Account, error) {
	a, err := scanAccount(db.pool.QueryRow(ctx, accountSQL, id))
	if err != nil {
		return nil, translate(err)
	}
	return a, nil
}

// UpdateAccount applies a fan's change to an account (normalized: the
// email trimmed), or EInvalid or ENotFound.
func (db *DB) UpdateAccount(ctx context.Context, id int64, p core.AccountPatch) (*core.Account, error) {
	if err := p.Normalize(); err != nil {
		return nil, err
	}
	if p.Email == nil {
		return db.Account(ctx, id)
	}
	a, err := scanAccount(db.pool.QueryRow(ctx, setEmailSQL, id, *p.Email))
	if err != nil {
		return nil, translate(err)
	}
	return a, nil
}

// maxAccountBookings bounds "My tickets".
const maxAccountBookings = 200

// accountBookingsSQL lists an identity's bookings but FAILED ones: shows
// to come first, soonest first, then past shows, latest first (scanBooking).
// $1 identity, $2 limit.
const accountBookingsSQL = bookingColumns + ` WHERE account = $1 AND status <> ` + sqlFailed + `
 ORDER BY ev.ev_starts_at >= now() DESC,
          CASE WHEN ev.ev_starts_at >= now() THEN ev.ev_starts_at END ASC,
          ev.ev_starts_at DESC, id DESC
 LIMIT $2`

// bookingsTicketsSQL lists the tickets of several bookings. $1 bookings.
const bookingsTicketsSQL = `SELECT booking_id, id::text, event_id, coalesce(seat_id, ''), n FROM tickets
 WHERE booking_id = ANY ($1) ORDER BY booking_id, n`

// AccountBookings lists an identity's bookings with their tickets
// (unsigned). See core.Accounts.
func (db *DB) AccountBookings(ctx context.Context, identity string) ([]core.Booking, error) {
	rows, err := db.pool.Query(ctx, accountBookingsSQL, identity, maxAccountBookings)
	if err != nil {
		return nil, translate(err)
	}
	out := []core.Booking{}
	for rows.Next() {
		b, err := scanBooking(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, *b)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]int64, len(out))
	at := make(map[int64]int, len(out))
	for i, b := range out {
		ids[i], at[b.ID] = b.ID, i
	}
	rows, err = db.pool.Query(ctx, bookingsTicketsSQL, ids)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var booking int64
		var t core.Ticket
		if err := rows.Scan(&booking, &t.ID, &t.EventID, &t.Seat, &t.N); err != nil {
			return nil, translate(err)
		}
		out[at[booking]].Tickets = append(out[at[booking]].Tickets, t)
	}
	return out, translate(rows.Err())
}

// Sign-in rows are kept for core.SignInRetention, then purged: a code's
// sends are all older than the window by then, and a counter bucket that
// began two windows ago no longer counts, not even as the last bucket.
const (
	purgeCodesSQL  = `DELETE FROM signin_codes WHERE expires_at < now() - make_interval(secs => $1)`
	purgeCountsSQL = `DELETE FROM signin_counts WHERE bucket < now() - make_interval(secs => $1)`
)

// PurgeSignIn deletes codes and limit counters past core.SignInRetention;
// it returns how many rows.
func (db *DB) PurgeSignIn(ctx context.Context) (int64, error) {
	var n int64
	for _, q := range []string{purgeCodesSQL, purgeCountsSQL} {
		tag, err := db.pool.Exec(ctx, q, core.SignInRetention.Seconds())
		if err != nil {
			return n, translate(err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
