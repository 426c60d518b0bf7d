package postgres_test

import (
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

// The sweep reads holds_ga_expiry only from sweep_mark's mark on (sweepSQL):
// each way a GA hold can be ACTIVE below a mark a sweep would set is ended by
// a later sweep all the same, and each control, the mark moved past the
// hold as a sweep without that rule would move it, leaves the hold ACTIVE
// (what the test would see if the rule broke).
func TestSweepMark(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run leaves one GA hold ACTIVE and past its expiry, with the sweeps
		// of the case done (control: the broken variant); it returns its id.
		run     func(t *testing.T, db *postgres.DB, ev int64, control bool) string
		control string
	}{{
		name:    "a hold written with its expiry already past",
		control: "without the trigger that lowers the mark",
		run: func(t *testing.T, db *postgres.DB, ev int64, control bool) string {
			sweep(t, db) // the mark moves up to about now
			h, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 1})
			if err != nil {
				t.Fatal(err)
			}
			if control {
				exec(t, db, `DROP TRIGGER holds_past_expiry ON holds`)
			}
			exec(t, db, `UPDATE holds SET expires_at = now() - interval '1 hour' WHERE id = $1`, h.ID)
			return h.ID
		},
	}, {
		name:    "a hold whose transaction began before a sweep and committed after it",
		control: "a sweep that moves the mark past the start of open transactions",
		run: func(t *testing.T, db *postgres.DB, ev int64, control bool) string {
			tx, err := db.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			// Written as the core writes a hold: expiring after its
			// transaction's now(), so the trigger does not see it.
			var id string
			if err := tx.QueryRow(ctx, `
WITH g AS (UPDATE ga_inventory SET remaining = remaining - 1 WHERE event_id = $1)
INSERT INTO holds (id, event_id, account, quantity, claimed, expires_at)
VALUES (gen_random_uuid(), $1, 'bob', 1, 1, now() + interval '200 ms') RETURNING id::text`, ev).Scan(&id); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the hold has expired; its transaction is still open
			if control {
				if _, err := db.SweepIgnoringOpenTransactions(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				sweep(t, db)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			return id
		},
	}, {
		name:    "a hold a sweep skipped as locked",
		control: "a mark moved past the skipped hold",
		run: func(t *testing.T, db *postgres.DB, ev int64, control bool) string {
			h, err := hold(db, ev, "carol", core.HoldRequest{Quantity: 1})
			if err != nil {
				t.Fatal(err)
			}
			expireAccount(t, db, ev, "carol")
			tx, err := db.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT 1 FROM holds WHERE id = $1 FOR UPDATE`, h.ID); err != nil {
				t.Fatal(err)
			}
			if r := sweep(t, db); r.Holds != 0 {
				t.Fatalf("a sweep ended %d holds; want 0 (the one hold is locked)", r.Holds)
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if control {
				exec(t, db, `UPDATE sweep_mark SET mark = now()`)
			}
			return h.ID
		},
	}, {
		name:    "holds left after a full batch",
		control: "a full batch that moves the mark as if it had swept everything",
		run: func(t *testing.T, db *postgres.DB, ev int64, control bool) string {
			// Five holds that expired a minute apart, an hour ago; a batch
			// of two ends the first two. The other three expired after the
			// batch's last expiry, and long before the bound (a second ago):
			// the mark must stop at the batch.
			var last string
			for i, a := range []string{"dan", "erin", "fay", "gus", "hal"} {
				h, err := hold(db, ev, a, core.HoldRequest{Quantity: 1})
				if err != nil {
					t.Fatal(err)
				}
				exec(t, db, `UPDATE holds SET expires_at = now() - make_interval(mins => 60 - $2) WHERE id = $1`, h.ID, i)
				last = h.ID
			}
			if r, err := db.SweepOneBatch(ctx, 2, control); err != nil || r.Holds != 2 {
				t.Fatalf("one batch of 2: ended %d holds, %v; want 2", r.Holds, err)
			}
			return last
		},
	}} {
		for _, control := range []bool{false, true} {
			name := tc.name
			if control {
				name = "control: " + tc.control
			}
			t.Run(name, func(t *testing.T) {
				db := postgrestest.NewDB(t, postgres.Options{})
				ev := newEvent(t, db, "amphitheatre", 6)
				id := tc.run(t, db, ev, control)
				sweep(t, db)
				var status string
				if err := db.Pool().QueryRow(ctx, `SELECT status FROM holds WHERE id = $1`, id).Scan(&status); err != nil {
					t.Fatal(err)
				}
				switch {
				case !control && status != core.HoldExpired:
					t.Fatalf("%s: hold %s after the next sweep; want %s", tc.name, status, core.HoldExpired)
				case control && status != core.HoldActive:
					t.Fatalf("%s: hold %s after the next sweep; want it left %s: the harness cannot see a mark past an active hold",
						tc.control, status, core.HoldActive)
				}
			})
		}
	}
}

func sweep(tb testing.TB, db *postgres.DB) core.SweepResult {
	tb.Helper()
	r, err := db.Sweep(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func exec(tb testing.TB, db *postgres.DB, sql string, args ...any) {
	tb.Helper()
	if _, err := db.Pool().Exec(ctx, sql, args...); err != nil {
		tb.Fatal(err)
	}
}
