package postgres

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// IdempotencyTTL is how long a key and its response are kept.
const IdempotencyTTL = 24 * time.Hour

// Key states: IN_FLIGHT while the first request runs (under a lease), DONE
// once its response is stored for replay.
const (
	keyInFlight = "IN_FLIGHT"
	keyDone     = "DONE"

	sqlKeyInFlight = "'" + keyInFlight + "'"
	sqlKeyDone     = "'" + keyDone + "'"
)

// ClaimKey claims (account, key) for a request with the given fingerprint.
// It returns nil, nil when the caller now owns the key and must run the
// request; a stored response to replay when the same request already
// completed; or EIdemReused (another request under this key) or
// EIdemInFlight (the first is still running; its lease has not run out).
func (db *DB) ClaimKey(ctx context.Context, account, key string, fingerprint []byte, lease time.Duration) (*core.StoredResponse, error) {
	for try := 0; ; try++ {
		resp, err := db.claimKey(ctx, account, key, fingerprint, lease)
		if errors.Is(err, errKeyVanished) && try < 3 {
			continue // released or purged between our insert and our read: claim again
		}
		return resp, err
	}
}

var errKeyVanished = errors.New("idempotency key vanished")

// claimNewKeySQL claims a key nobody holds: one statement, so two
// requests with one key cannot both insert it. $1 account, $2 key,
// $3 fingerprint, $4 lease seconds, $5 retention seconds.
const claimNewKeySQL = `INSERT INTO idempotency_keys (account, key, fingerprint, state, locked_until, expires_at)
VALUES ($1, $2, $3, ` + sqlKeyInFlight + `, now() + make_interval(secs => $4), now() + make_interval(secs => $5))
ON CONFLICT (account, key) DO NOTHING`

// lockKeySQL reads a held key under its row lock, with whether its lease
// and its retention are over. $1 account, $2 key.
const lockKeySQL = `SELECT fingerprint, state, status, body, coalesce(locked_until < now(), true), expires_at < now()
  FROM idempotency_keys WHERE account = $1 AND key = $2 FOR UPDATE`

// reclaimKeySQL hands a key past retention, or one whose request died
// holding it, to this request. Same parameters as claimNewKeySQL.
const reclaimKeySQL = `UPDATE idempotency_keys SET fingerprint = $3, state = ` + sqlKeyInFlight + `, status = NULL, body = NULL,
       locked_until = now() + make_interval(secs => $4), created_at = now(), expires_at = now() + make_interval(secs => $5)
 WHERE account = $1 AND key = $2`

func (db *DB) claimKey(ctx context.Context, account, key string, fingerprint []byte, lease time.Duration) (*core.StoredResponse, error) {
	var resp *core.StoredResponse
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		resp = nil // inTx may run fn again: nothing from an aborted try
		tag, err := tx.Exec(ctx, claimNewKeySQL, account, key, fingerprint, lease.Seconds(), IdempotencyTTL.Seconds())
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var fp, body []byte
		var state string
		var status *int
		var leaseOver, expired bool
		err = tx.QueryRow(ctx, lockKeySQL, account, key).Scan(&fp, &state, &status, &body, &leaseOver, &expired)
		if errors.Is(err, pgx.ErrNoRows) {
			return errKeyVanished
		}
		if err != nil {
			return err
		}
		switch {
		case expired || (state == keyInFlight && leaseOver && bytes.Equal(fp, fingerprint)):
			// A key past retention starts afresh; a request that died
			// holding the key hands it to this retry.
			_, err = tx.Exec(ctx, reclaimKeySQL, account, key, fingerprint, lease.Seconds(), IdempotencyTTL.Seconds())
			return err
		case !bytes.Equal(fp, fingerprint):
			return core.Errorf(core.EIdemReused, "this Idempotency-Key was used for another request")
		case state == keyInFlight:
			return core.Errorf(core.EIdemInFlight, "a request with this Idempotency-Key is still being processed")
		}
		resp = &core.StoredResponse{Status: *status, Body: body}
		return nil
	})
	if errors.Is(err, errKeyVanished) {
		return nil, err
	}
	if err != nil {
		return nil, translate(err)
	}
	return resp, nil
}

// saveResponseSQL stores a claimed key's response for replay. $1 account,
// $2 key, $3 status, $4 body.
const saveResponseSQL = `UPDATE idempotency_keys SET state = ` + sqlKeyDone + `, status = $3, body = $4, locked_until = NULL
 WHERE account = $1 AND key = $2`

// SaveResponse stores the response of a claimed key for replay.
func (db *DB) SaveResponse(ctx context.Context, account, key string, r core.StoredResponse) error {
	_, err := db.pool.Exec(ctx, saveResponseSQL, account, key, r.Status, r.Body)
	return translate(err)
}

// releaseKeySQL forgets a key still in flight (never a stored response).
// $1 account, $2 key.
const releaseKeySQL = `DELETE FROM idempotency_keys WHERE account = $1 AND key = $2 AND state = ` + sqlKeyInFlight

// ReleaseKey forgets a claimed key whose request failed in a way worth
// retrying (the database or provider was unreachable): the retry runs anew.
func (db *DB) ReleaseKey(ctx context.Context, account, key string) error {
	_, err := db.pool.Exec(ctx, releaseKeySQL, account, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return translate(err)
}

// renewKeySQL extends the lease of a key still in flight. $1 account,
// $2 key, $3 lease seconds.
const renewKeySQL = `UPDATE idempotency_keys SET locked_until = now() + make_interval(secs => $3)
 WHERE account = $1 AND key = $2 AND state = ` + sqlKeyInFlight

// RenewKey extends the lease of a claimed key whose request is still
// running.
func (db *DB) RenewKey(ctx context.Context, account, key string, lease time.Duration) error {
	_, err := db.pool.Exec(ctx, renewKeySQL, account, key, lease.Seconds())
	return translate(err)
}

// purgeKeysSQL deletes keys past their retention.
const purgeKeysSQL = `DELETE FROM idempotency_keys WHERE expires_at < now()`

// PurgeKeys deletes keys past their retention; it returns how many.
func (db *DB) PurgeKeys(ctx context.Context) (int64, error) {
	tag, err := db.pool.Exec(ctx, purgeKeysSQL)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}
