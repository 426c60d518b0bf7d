package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// The sign-in store. The rules are core's (core/account.go); here they are
// counted exactly: every limit is a sliding window over signin_log taken
// under an advisory lock per (scope, key), in the transaction that acts, so
// several cores sharing the database count together.

// limitLockSQL serializes the counted actions of one (scope, key) until the
// transaction ends. $1 scope, $2 key.
const limitLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $2, 0))`

// limitCountSQL counts a key's actions in the window and says when the
// oldest leaves it (whole seconds, at least 1). $1 scope, $2 key, $3 window
// seconds.
const limitCountSQL = `SELECT count(*)::int,
       greatest(1, ceil(extract(epoch FROM coalesce(min(at), now()) + make_interval(secs => $3) - clock_timestamp())))::int
  FROM signin_log WHERE scope = $1 AND key = $2 AND at > clock_timestamp() - make_interval(secs => $3)`

// limitLogSQL records one counted action. $1 scope, $2 key.
const limitLogSQL = `INSERT INTO signin_log (scope, key, at) VALUES ($1, $2, clock_timestamp())`

// resendSQL says how long until a phone may get another code (0: now).
// $1 phone, $2 resend seconds.
const resendSQL = `SELECT coalesce(max(greatest(0, ceil(extract(epoch FROM created_at + make_interval(secs => $2) - clock_timestamp())))), 0)::int
  FROM signin_codes WHERE phone = $1`

// storeCodeSQL keeps a phone's one live code, replacing an earlier one
// (its attempts start again; the sends per phone bound that). $1 phone,
// $2 hash, $3 ttl seconds.
const storeCodeSQL = `INSERT INTO signin_codes (phone, code_hash, expires_at, created_at)
VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3), clock_timestamp())
ON CONFLICT (phone) DO UPDATE
   SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at, used_at = NULL, created_at = EXCLUDED.created_at`

// useCodeSQL is the one rule of a code's use: it counts an attempt on a
// live code (unused, unexpired, attempts left) and, when the hash matches,
// marks it used, in one conditional UPDATE. Two concurrent verifies of one
// code serialize on its row; the second re-evaluates the WHERE against the
// first's used_at and matches nothing, so a code signs in at most once.
// $1 phone, $2 hash, $3 attempts allowed.
const useCodeSQL = `UPDATE signin_codes
   SET attempts = attempts + 1, used_at = CASE WHEN code_hash = $2 THEN clock_timestamp() END
 WHERE phone = $1 AND used_at IS NULL AND expires_at > clock_timestamp() AND attempts < $3
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

// count checks one limit and records the action, under the key's lock: a
// refused action is not recorded (the transaction is rolled back).
func count(ctx context.Context, tx pgx.Tx, scope, key string, limit int) error {
	if _, err := tx.Exec(ctx, limitLockSQL, scope, key); err != nil {
		return err
	}
	var n, retry int
	if err := tx.QueryRow(ctx, limitCountSQL, scope, key, core.LimitWindow.Seconds()).Scan(&n, &retry); err != nil {
		return err
	}
	if n >= limit {
		return rateLimited(scope, retry)
	}
	_, err := tx.Exec(ctx, limitLogSQL, scope, key)
	return err
}

func rateLimited(scope string, retry int) error {
	what := map[string]string{
		core.ScopeSendPhone:  "too many codes were sent to this number",
		core.ScopeSendAddr:   "too many codes were asked for from this address",
		core.ScopeVerifyAddr: "too many sign-in attempts from this address",
		"resend":             "a code was sent to this number moments ago",
	}[scope]
	return core.Errorf(core.ERateLimited, "%s: try again in %d seconds", what, retry).With("retry_after_seconds", retry)
}

// StoreCode counts a send against the address and the phone and keeps the
// code's hash as the phone's live code. See core.Accounts.
func (db *DB) StoreCode(ctx context.Context, r core.CodeRequest, l core.SignInLimits) error {
	l = l.WithDefaults()
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		// Always address, then phone: concurrent sends lock in one order.
		if err := count(ctx, tx, core.ScopeSendAddr, r.Addr, l.SendsPerAddr); err != nil {
			return err
		}
		if err := count(ctx, tx, core.ScopeSendPhone, r.Phone, l.SendsPerPhone); err != nil {
			return err
		}
		var wait int
		if err := tx.QueryRow(ctx, resendSQL, r.Phone, core.ResendAfter.Seconds()).Scan(&wait); err != nil {
			return err
		}
		if wait > 0 {
			return rateLimited("resend", wait)
		}
		_, err := tx.Exec(ctx, storeCodeSQL, r.Phone, r.Hash, core.CodeTTL.Seconds())
		return err
	})
	return translate(err)
}

// VerifyCode counts a verify against the address and uses the phone's live
// code when hash matches. See core.Accounts. A wrong code's attempt is
// committed before ECodeInvalid is returned.
func (db *DB) VerifyCode(ctx context.Context, phone, addr string, hash []byte, l core.SignInLimits) (*core.Account, error) {
	l = l.WithDefaults()
	var a *core.Account
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		a = nil // inTx may run fn again
		if err := count(ctx, tx, core.ScopeVerifyAddr, addr, l.VerifiesPerAddr); err != nil {
			return err
		}
		var used bool
		err := tx.QueryRow(ctx, useCodeSQL, phone, hash, core.CodeAttempts).Scan(&used)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !used) {
			return nil // no live code, or a wrong one: the attempt is counted
		}
		if err != nil {
			return err
		}
		a, err = scanAccount(tx.QueryRow(ctx, signInSQL, phone))
		return err
	})
	if err != nil {
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

// UpdateAccount applies a fan's change to an account, or ENotFound.
func (db *DB) UpdateAccount(ctx context.Context, id int64, p core.AccountPatch) (*core.Account, error) {
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

// Sign-in rows are kept for core.SignInRetention, then purged.
const (
	purgeCodesSQL = `DELETE FROM signin_codes WHERE expires_at < now() - make_interval(secs => $1)`
	purgeLogSQL   = `DELETE FROM signin_log WHERE at < now() - make_interval(secs => $1)`
)

// PurgeSignIn deletes codes and limit records past core.SignInRetention;
// it returns how many rows.
func (db *DB) PurgeSignIn(ctx context.Context) (int64, error) {
	var n int64
	for _, q := range []string{purgeCodesSQL, purgeLogSQL} {
		tag, err := db.pool.Exec(ctx, q, core.SignInRetention.Seconds())
		if err != nil {
			return n, translate(err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
