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

// StoredResponse is a response kept for replay under an idempotency key.
type StoredResponse struct {
	Status int
	Body   []byte
}

// ClaimKey claims (account, key) for a request with the given fingerprint.
// It returns nil, nil when the caller now owns the key and must run the
// request; a stored response to replay when the same request already
// completed; or EIdemReused (another request under this key) or
// EIdemInFlight (the first is still running; its lease has not run out).
func (db *DB) ClaimKey(ctx context.Context, account, key string, fingerprint []byte, lease time.Duration) (*StoredResponse, error) {
	for try := 0; ; try++ {
		resp, err := db.claimKey(ctx, account, key, fingerprint, lease)
		if errors.Is(err, errKeyVanished) && try < 3 {
			continue // released or purged between our insert and our read: claim again
		}
		return resp, err
	}
}

var errKeyVanished = errors.New("idempotency key vanished")

func (db *DB) claimKey(ctx context.Context, account, key string, fingerprint []byte, lease time.Duration) (*StoredResponse, error) {
	var resp *StoredResponse
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO idempotency_keys (account, key, fingerprint, state, locked_until, expires_at)
VALUES ($1, $2, $3, 'IN_FLIGHT', now() + make_interval(secs => $4), now() + make_interval(secs => $5))
ON CONFLICT (account, key) DO NOTHING`, account, key, fingerprint, lease.Seconds(), IdempotencyTTL.Seconds())
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var fp, body []byte
		var state string
		var status *int
		var leaseOver, expired bool
		err = tx.QueryRow(ctx, `SELECT fingerprint, state, status, body, coalesce(locked_until < now(), true), expires_at < now()
  FROM idempotency_keys WHERE account = $1 AND key = $2 FOR UPDATE`, account, key).Scan(&fp, &state, &status, &body, &leaseOver, &expired)
		if errors.Is(err, pgx.ErrNoRows) {
			return errKeyVanished
		}
		if err != nil {
			return err
		}
		switch {
		case expired || (state == "IN_FLIGHT" && leaseOver && bytes.Equal(fp, fingerprint)):
			// A key past retention starts afresh; a request that died
			// holding the key hands it to this retry.
			_, err = tx.Exec(ctx, `UPDATE idempotency_keys SET fingerprint = $3, state = 'IN_FLIGHT', status = NULL, body = NULL,
       locked_until = now() + make_interval(secs => $4), created_at = now(), expires_at = now() + make_interval(secs => $5)
 WHERE account = $1 AND key = $2`, account, key, fingerprint, lease.Seconds(), IdempotencyTTL.Seconds())
			return err
		case !bytes.Equal(fp, fingerprint):
			return core.Errorf(core.EIdemReused, "this Idempotency-Key was used for another request")
		case state == "IN_FLIGHT":
			return core.Errorf(core.EIdemInFlight, "a request with this Idempotency-Key is still being processed")
		}
		resp = &StoredResponse{Status: *status, Body: body}
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

// SaveResponse stores the response of a claimed key for replay.
func (db *DB) SaveResponse(ctx context.Context, account, key string, r StoredResponse) error {
	_, err := db.pool.Exec(ctx, `UPDATE idempotency_keys SET state = 'DONE', status = $3, body = $4, locked_until = NULL
 WHERE account = $1 AND key = $2`, account, key, r.Status, r.Body)
	return translate(err)
}

// ReleaseKey forgets a claimed key whose request failed in a way worth
// retrying (the database or provider was unreachable): the retry runs anew.
func (db *DB) ReleaseKey(ctx context.Context, account, key string) error {
	_, err := db.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE account = $1 AND key = $2 AND state = 'IN_FLIGHT'`, account, key)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return translate(err)
}

// PurgeKeys deletes keys past their retention; it returns how many.
func (db *DB) PurgeKeys(ctx context.Context) (int64, error) {
	tag, err := db.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE expires_at < now()`)
	if err != nil {
		return 0, translate(err)
	}
	return tag.RowsAffected(), nil
}
