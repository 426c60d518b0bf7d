package postgres_test

import (
	"errors"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

// A renewed key stays its request's past the first lease; a key whose
// request stopped renewing (it died, or its core is frozen) is handed to
// the retry once the lease runs out. A renewal never touches a stored
// response.
func TestIdempotencyKeyRenewal(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	fp := []byte("fingerprint")
	if r, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute); r != nil || err != nil {
		t.Fatalf("claim = %v, %v", r, err)
	}
	// The lease ran out, then the request renewed it: still in flight.
	db.Pool().Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE account = 'alice'`)
	if err := db.RenewKey(ctx, "alice", "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute); core.ErrorCode(err) != core.EIdemInFlight {
		t.Fatalf("claim of a renewed key = %v; want request_in_flight", err)
	}
	// Not renewed past its lease: the retry takes it over.
	db.Pool().Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE account = 'alice'`)
	if r, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute); r != nil || err != nil {
		t.Fatalf("claim after the lease = %v, %v; want the key handed over", r, err)
	}
	if err := db.SaveResponse(ctx, "alice", "k", core.StoredResponse{Status: 201, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := db.RenewKey(ctx, "alice", "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	if r, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute); err != nil || r == nil || r.Status != 201 {
		t.Fatalf("replay after a late renewal = %+v, %v; want the stored response", r, err)
	}
}

// A worker whose lease on a job ran out (frozen, then thawed) cannot
// record a failure over the worker that claimed the job since: the job
// stays leased to the new worker, and the new worker's outcome counts.
func TestOutboxStaleWorkerCannotReschedule(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	_, b := pending(t, db, ev, "alice", "AUD-K-1")
	if out, err := db.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: b.PaymentID, Succeeded: true}); err != nil || out != core.BookingConfirmed {
		t.Fatalf("settle = %s, %v", out, err)
	}
	jobs, err := db.ClaimJobs(ctx, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claimed %v, %v", jobs, err)
	}
	stale := jobs[0]
	db.Pool().Exec(ctx, `UPDATE outbox SET locked_until = now() - interval '1 second' WHERE id = $1`, stale.ID)
	fresh, err := db.ClaimJob(ctx, stale.ID, time.Minute)
	if err != nil || fresh == nil || fresh.Attempts != stale.Attempts+1 {
		t.Fatalf("second claim = %+v, %v", fresh, err)
	}
	if err := db.FailJob(ctx, stale, errors.New("thawed worker: provider timeout")); err != nil {
		t.Fatal(err)
	}
	var leased bool
	var lastErr *string
	db.Pool().QueryRow(ctx, `SELECT coalesce(locked_until > now(), false), last_error FROM outbox WHERE id = $1`, stale.ID).Scan(&leased, &lastErr)
	if !leased || lastErr != nil {
		t.Fatalf("after the stale worker's failure: leased %v, last error %v; want the new worker's lease untouched", leased, lastErr)
	}
	// The control: the same failure recorded without the lease guard (the
	// statement as it was) takes the job from the worker holding it.
	naive := `UPDATE outbox SET last_error = $2, locked_until = NULL WHERE id = $1 AND status = 'PENDING'`
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, naive, stale.ID, "thawed worker: provider timeout")
	tx.QueryRow(ctx, `SELECT coalesce(locked_until > now(), false) FROM outbox WHERE id = $1`, stale.ID).Scan(&leased)
	tx.Rollback(ctx)
	if leased {
		t.Fatal("control: the unguarded failure left the new worker's lease; the test cannot see the stale worker's write")
	}
	if err := db.FailJob(ctx, *fresh, errors.New("smtp down")); err != nil {
		t.Fatal(err)
	}
	db.Pool().QueryRow(ctx, `SELECT coalesce(locked_until > now(), false), last_error FROM outbox WHERE id = $1`, stale.ID).Scan(&leased, &lastErr)
	if leased || lastErr == nil || *lastErr != "smtp down" {
		t.Fatalf("after the lease holder's failure: leased %v, last error %v", leased, lastErr)
	}
}
