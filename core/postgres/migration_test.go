package postgres_test

import (
	"testing"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

// Migration 00010 (the lazy limit) and back: its Down gives back what
// swept holds still owe, so the counters mean what the code before it
// reads (active and booked holds); its Up lists every active hold on its
// account, so a settle can find it once it lapses.
func TestMigrationLazyQuota(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	// GA: only a swept hold is owed (an expired seated hold is not swept:
	// migration 00012).
	ev := newEvent(t, db, "amphitheatre", 6)
	if _, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 4}); err != nil {
		t.Fatal(err)
	}
	expireAccount(t, db, ev, "alice")
	if _, err := db.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	bob, err := hold(db, ev, "bob", core.HoldRequest{Quantity: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := counter(t, db, ev, "alice"); n != 4 {
		t.Fatalf("alice's counter %d before the Down; want 4 (owed)", n)
	}

	if err := db.MigrateDownTo(ctx, 9); err != nil {
		t.Fatalf("down to 00009: %v", err)
	}
	var alice, cols int
	err = db.Pool().QueryRow(ctx, `SELECT (SELECT tickets FROM account_tickets WHERE event_id = $1 AND account = 'alice'),
       (SELECT count(*) FROM information_schema.columns WHERE (table_name, column_name) IN (('holds', 'owed'), ('account_tickets', 'holds')))`, ev).
		Scan(&alice, &cols)
	if err != nil || alice != 0 || cols != 0 {
		t.Fatalf("after the Down: alice's counter %d, %d new columns left, %v; want 0, 0", alice, cols, err)
	}

	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if _, ids := counter(t, db, ev, "bob"); len(ids) != 1 || ids[0] != bob.ID {
		t.Fatalf("bob's list after the Up: %v; want his active hold %s", ids, bob.ID)
	}
	checkInvariants(t, db)
	if _, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 6}); err != nil {
		t.Fatalf("alice's 6 tickets after the round trip: %v", err)
	}
	checkInvariants(t, db)
}
