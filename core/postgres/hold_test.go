package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
)

var ctx = context.Background()

// newEvent creates an event on a seed layout and returns its id.
func newEvent(tb testing.TB, db *postgres.DB, layout string, maxPerAccount int) int64 {
	tb.Helper()
	id, err := db.CreateEvent(ctx, seed.EventSpec{
		Name: "test " + layout, Kind: core.KindConcert, Layout: seed.MustLayout(layout),
		StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour), MaxPerAccount: maxPerAccount,
	})
	if err != nil {
		tb.Fatalf("CreateEvent(%s): %v", layout, err)
	}
	return id
}

func hold(db *postgres.DB, event int64, account string, r core.HoldRequest) (*core.Hold, error) {
	return db.CreateHold(ctx, core.HoldParams{EventID: event, Account: account, Request: r})
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := core.ErrorCode(err); err == nil || got != code {
		tb.Fatalf("error = %v (code %q); want code %q", err, got, code)
	}
}

func TestHoldSeats(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)

	h, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-J-5", "AUD-J-4", "AUD-J-5"}})
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	if !slices.Equal(h.Seats, []string{"AUD-J-4", "AUD-J-5"}) || h.Version != 1 || h.Quantity != 2 {
		t.Fatalf("hold = %+v; want seats J-4, J-5 (duplicate dropped), version 1", h)
	}
	if d := time.Until(h.ExpiresAt); d < 470*time.Second || d > 490*time.Second {
		t.Errorf("expires in %v; want about 480 s", d)
	}
	wantPriced(t, db, h)

	// Overlap: all or nothing, naming the taken seat.
	_, err = hold(db, ev, "bob", core.HoldRequest{Seats: []string{"AUD-J-5", "AUD-J-6"}})
	wantCode(t, err, core.ESeatsTaken)
	if got := err.(*core.Error).Detail["seats"]; !slices.Equal(got.([]string), []string{"AUD-J-5"}) {
		t.Errorf("taken seats = %v; want [AUD-J-5]", got)
	}
	if _, err := hold(db, ev, "carol", core.HoldRequest{Seats: []string{"AUD-J-6"}}); err != nil {
		t.Fatalf("J-6 should still be free after bob's failed group: %v", err)
	}

	// Unknown seats count as taken.
	_, err = hold(db, ev, "bob", core.HoldRequest{Seats: []string{"AUD-J-7", "AUD-Z-99"}})
	wantCode(t, err, core.ESeatsTaken)
	if got := err.(*core.Error).Detail["unknown_seats"]; !slices.Equal(got.([]string), []string{"AUD-Z-99"}) {
		t.Errorf("unknown seats = %v; want [AUD-Z-99]", got)
	}

	// Release returns seats and quota; a second release changes nothing.
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "bob", Version: 0}); core.ErrorCode(err) != core.EForbidden {
		t.Fatalf("release by non-owner = %v; want forbidden", err)
	}
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev + 1}); core.ErrorCode(err) != core.EWrongEvent {
		t.Fatalf("release naming another event = %v; want wrong_event", err)
	}
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: 7}); core.ErrorCode(err) != core.EVersionMismatch {
		t.Fatalf("release with stale version = %v; want version_mismatch", err)
	}
	r, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: 1})
	if err != nil || r.Status != core.HoldReleased || r.Version != 2 {
		t.Fatalf("release = %+v, %v", r, err)
	}
	_, err = db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: 0})
	wantCode(t, err, core.EHoldNotActive)
	if _, err := hold(db, ev, "bob", core.HoldRequest{Seats: []string{"AUD-J-4", "AUD-J-5"}}); err != nil {
		t.Fatalf("released seats should be free: %v", err)
	}

	// Limit: alice may hold 6.
	a, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-A-1", "AUD-A-2", "AUD-A-3", "AUD-A-4"}})
	if err != nil {
		t.Fatal(err)
	}
	wantPriced(t, db, a)
	_, err = hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-B-1", "AUD-B-2", "AUD-B-3"}})
	wantCode(t, err, core.ELimitExceeded)
	if _, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-B-1", "AUD-B-2"}}); err != nil {
		t.Fatalf("6th ticket: %v", err)
	}

	// GA requests on a seated event are refused.
	_, err = hold(db, ev, "dan", core.HoldRequest{Quantity: 2})
	wantCode(t, err, core.EInvalid)
	_, err = hold(db, 999999, "dan", core.HoldRequest{Seats: []string{"X"}})
	wantCode(t, err, core.ENotFound)
}

// wantPriced checks a new hold's total, which the core sums at its cached
// band prices, against the total the database joins from price_bands.
func wantPriced(tb testing.TB, db *postgres.DB, h *core.Hold) {
	tb.Helper()
	got, err := db.Hold(ctx, h.ID)
	if err != nil {
		tb.Fatalf("Hold(%q): %v", h.ID, err)
	}
	if h.AmountPaise <= 0 || h.AmountPaise != got.AmountPaise {
		tb.Errorf("hold of %v costs %d paise; want %d (the bands' prices)", h.Seats, h.AmountPaise, got.AmountPaise)
	}
}

func TestExtend(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-C-1", "AUD-C-2"}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := db.ExtendHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: h.Version})
	if err != nil {
		t.Fatalf("extend: %v", err)
	}
	if got := e.ExpiresAt.Sub(h.ExpiresAt); got != core.ExtendBy || e.Version != h.Version+1 || !e.Extended {
		t.Fatalf("extended by %v to version %d; want %v, %d", got, e.Version, core.ExtendBy, h.Version+1)
	}
	_, err = db.ExtendHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: 0})
	wantCode(t, err, core.EAlreadyExtended)
	var until time.Time
	if err := db.Pool().QueryRow(ctx, `SELECT max(hold_until) FROM seats WHERE hold_id = $1`, h.ID).Scan(&until); err != nil || !until.Equal(e.ExpiresAt) {
		t.Fatalf("seat hold_until = %v, %v; want %v", until, err, e.ExpiresAt)
	}
}

// failFirstCommit makes the first commit of a transaction that updated a
// row of table abort with a serialization failure (a deferred constraint
// trigger runs at commit; the sequence counts outside the transaction), so
// inTx runs its fn a second time after a try whose statements all worked.
func failFirstCommit(tb testing.TB, db *postgres.DB, table string) {
	tb.Helper()
	if _, err := db.Pool().Exec(ctx, `
CREATE SEQUENCE commit_tries;
CREATE FUNCTION fail_first_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF nextval('commit_tries') = 1 THEN RAISE EXCEPTION 'injected' USING ERRCODE = '40001'; END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER fail_first_commit AFTER UPDATE ON `+table+`
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_first_commit();`); err != nil {
		tb.Fatal(err)
	}
}

// A retried extension asks for the version the caller read, not one an
// aborted try scanned: the extension still happens, once.
func TestExtendRetried(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-C-3"}})
	if err != nil {
		t.Fatal(err)
	}
	failFirstCommit(t, db, "holds")
	e, err := db.ExtendHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: h.Version})
	if err != nil {
		t.Fatalf("extend after an aborted commit: %v", err)
	}
	if got := e.ExpiresAt.Sub(h.ExpiresAt); got != core.ExtendBy || e.Version != h.Version+1 || !e.Extended {
		t.Fatalf("extended by %v to version %d; want %v, %d", got, e.Version, core.ExtendBy, h.Version+1)
	}
}

func TestBestAvailable(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "stadium", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{BestAvailable: &core.BestAvailable{Band: "GOLD", Count: 4}})
	if err != nil {
		t.Fatal(err)
	}
	var rows, bands int
	if err := db.Pool().QueryRow(ctx, `SELECT count(DISTINCT (section, row_label)), count(DISTINCT band) FROM seats WHERE event_id = $1 AND hold_id = $2`,
		ev, h.ID).Scan(&rows, &bands); err != nil {
		t.Fatal(err)
	}
	if len(h.Seats) != 4 || rows != 1 || bands != 1 {
		t.Fatalf("best available = %v in %d rows; want 4 seats in one GOLD row", h.Seats, rows)
	}
	_, err = hold(db, ev, "bob", core.HoldRequest{BestAvailable: &core.BestAvailable{Band: "DIAMOND", Count: 2}})
	wantCode(t, err, core.EInvalid)
}

func TestGA(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "amphitheatre", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 4})
	if err != nil || h.Quantity != 4 {
		t.Fatalf("GA hold = %+v, %v", h, err)
	}
	_, err = hold(db, ev, "alice", core.HoldRequest{Seats: []string{"A-1"}})
	wantCode(t, err, core.EInvalid)
	if _, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", Version: 0}); err != nil {
		t.Fatal(err)
	}
	var remaining int
	if err := db.Pool().QueryRow(ctx, `SELECT remaining FROM ga_inventory WHERE event_id = $1`, ev).Scan(&remaining); err != nil || remaining != 2000 {
		t.Fatalf("remaining = %d, %v; want 2000 after release", remaining, err)
	}
}

// expireAccount moves every active hold of an account (and its seats) to
// just past its expiry.
func expireAccount(tb testing.TB, db *postgres.DB, event int64, account string) {
	tb.Helper()
	_, err := db.Pool().Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() - interval '1 ms' WHERE event_id = $1 AND account = $2 AND status = 'ACTIVE'
           RETURNING id, expires_at)
UPDATE seats s SET hold_until = h.expires_at FROM h WHERE s.hold_id = h.id`, event, account)
	if err != nil {
		tb.Fatal(err)
	}
}

// counter reads an account's counter and list of holds.
func counter(tb testing.TB, db *postgres.DB, event int64, account string) (int, []string) {
	tb.Helper()
	var n int
	var ids []string
	err := db.Pool().QueryRow(ctx, `SELECT tickets, holds::text[] FROM account_tickets WHERE event_id = $1 AND account = $2`, event, account).Scan(&n, &ids)
	if err != nil {
		tb.Fatal(err)
	}
	return n, ids
}

// The lazy limit: an expired seated hold (never swept: migration 00012)
// stays ACTIVE in its row and its tickets stay counted until the account's
// next refused hold settles it, which ends it and returns them; the hold
// goes through. (A swept GA hold's, marked owed: TestLazyLimitGA.)
func TestLazyLimit(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h1, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-A-1", "AUD-A-2", "AUD-A-3", "AUD-A-4"}})
	if err != nil {
		t.Fatal(err)
	}
	expireAccount(t, db, ev, "alice")
	if r, err := db.Sweep(ctx); err != nil || r.Holds != 0 {
		t.Fatalf("sweep = %+v, %v; want no hold (a seated hold needs no sweep)", r, err)
	}
	if n, ids := counter(t, db, ev, "alice"); n != 4 || !slices.Equal(ids, []string{h1.ID}) {
		t.Fatalf("after the sweep: counter %d, list %v; want 4 (still counted), [%s]", n, ids, h1.ID)
	}
	if got, err := db.Hold(ctx, h1.ID); err != nil || got.Status != core.HoldActive || got.Effective(time.Now()) != core.HoldExpired {
		t.Fatalf("lapsed hold = %+v, %v; want ACTIVE in its row, EXPIRED as shown", got, err)
	}
	checkInvariants(t, db)

	// Refused at 4 + 4 > 6, settled (the lapsed hold's 4 back), asked again.
	h2, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-B-1", "AUD-B-2", "AUD-B-3", "AUD-B-4"}})
	if err != nil {
		t.Fatalf("hold over owed tickets: %v", err)
	}
	if n, ids := counter(t, db, ev, "alice"); n != 4 || !slices.Equal(ids, []string{h2.ID}) {
		t.Fatalf("after the settle: counter %d, list %v; want 4, [%s]", n, ids, h2.ID)
	}
	if got, err := db.Hold(ctx, h1.ID); err != nil || got.Status != core.HoldExpired {
		t.Fatalf("settled hold = %+v, %v; want EXPIRED", got, err)
	}

	// A refusal names the counter after the settle.
	_, err = hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-C-1", "AUD-C-2", "AUD-C-3"}})
	wantCode(t, err, core.ELimitExceeded)
	if have := err.(*core.Error).Detail["have"]; have != 4 {
		t.Errorf("refusal says have %v; want 4", have)
	}

	// Again: the settle ends it and returns its tickets.
	expireAccount(t, db, ev, "alice")
	if _, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-C-1", "AUD-C-2", "AUD-C-3"}}); err != nil {
		t.Fatalf("hold over a lapsed hold: %v", err)
	}
	if got, err := db.Hold(ctx, h2.ID); err != nil || got.Status != core.HoldExpired {
		t.Fatalf("lapsed hold after the settle = %+v, %v; want EXPIRED", got, err)
	}
	if n, _ := counter(t, db, ev, "alice"); n != 3 {
		t.Fatalf("counter %d; want 3", n)
	}

	// A settle with nothing to do writes nothing and changes nothing.
	if returned, have, err := db.SettleQuota(ctx, ev, "alice"); err != nil || returned != 0 || have != 3 {
		t.Fatalf("settle = %d, %d, %v; want 0, 3", returned, have, err)
	}
	checkInvariants(t, db)
}

// Releasing a lapsed seated hold (ACTIVE in its row: no sweep ends it)
// ends it as EXPIRED, as the fan was shown it, returns its tickets once,
// and frees only the seats still under it: a seat another fan took since
// stays theirs.
func TestReleaseLapsedHold(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-A-1", "AUD-A-2"}})
	if err != nil {
		t.Fatal(err)
	}
	expireAccount(t, db, ev, "alice")
	bob, err := hold(db, ev, "bob", core.HoldRequest{Seats: []string{"AUD-A-2"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev})
	if err != nil || r.Status != core.HoldExpired {
		t.Fatalf("release of a lapsed hold = %+v, %v; want EXPIRED", r, err)
	}
	if n, ids := counter(t, db, ev, "alice"); n != 0 || len(ids) != 0 {
		t.Fatalf("alice's counter %d, list %v; want 0, []", n, ids)
	}
	var owner *string
	if err := db.Pool().QueryRow(ctx, `SELECT hold_id::text FROM seats WHERE event_id = $1 AND seat_id = 'AUD-A-2'`, ev).Scan(&owner); err != nil || owner == nil || *owner != bob.ID {
		t.Fatalf("AUD-A-2 under %v, %v; want bob's hold %s", owner, err, bob.ID)
	}
	_, err = db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev})
	wantCode(t, err, core.EHoldNotActive)
	checkInvariants(t, db)
}

// A settle that finds the account's expired hold locked (a sweep's batch
// ending it right now: a GA hold's, in the product; the test ends a seated
// one the same way, as a lock is a lock) waits for the lock and returns its tickets, rather
// than skipping it on every run and refusing the fan over a limit the
// expired hold no longer takes. (Without the wait, settleQuota's runs
// follow one another within a millisecond and this hold is refused.)
func TestSettleWaitsForLockedHold(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h1, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-A-1", "AUD-A-2", "AUD-A-3", "AUD-A-4"}})
	if err != nil {
		t.Fatal(err)
	}
	expireAccount(t, db, ev, "alice")
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM holds WHERE id = $1 FOR UPDATE`, h1.ID); err != nil {
		t.Fatal(err)
	}
	sweep := make(chan error, 1)
	go func() { // what the sweep's batch does with it, 300 ms later
		time.Sleep(300 * time.Millisecond)
		_, err := tx.Exec(ctx, `UPDATE holds SET status = 'EXPIRED', owed = true, version = version + 1, ended_at = now() WHERE id = $1`, h1.ID)
		if err == nil {
			err = tx.Commit(ctx)
		}
		sweep <- err
	}()
	if _, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-B-1", "AUD-B-2", "AUD-B-3", "AUD-B-4"}}); err != nil {
		t.Fatalf("hold while the expired hold is being swept: %v", err)
	}
	if err := <-sweep; err != nil {
		t.Fatal(err)
	}
	if n, _ := counter(t, db, ev, "alice"); n != 4 {
		t.Fatalf("counter %d; want 4 (the swept hold's 4 returned once)", n)
	}
	checkInvariants(t, db)
}

// GA: the sweep returns the event's tickets at once, the account's quota
// at the account's next refusal.
func TestLazyLimitGA(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "amphitheatre", 6)
	if _, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 5}); err != nil {
		t.Fatal(err)
	}
	expireAccount(t, db, ev, "alice")
	if r, err := db.Sweep(ctx); err != nil || r.Holds != 1 {
		t.Fatalf("sweep = %+v, %v; want 1 hold", r, err)
	}
	var remaining int
	if err := db.Pool().QueryRow(ctx, `SELECT remaining FROM ga_inventory WHERE event_id = $1`, ev).Scan(&remaining); err != nil || remaining != 2000 {
		t.Fatalf("remaining = %d, %v; want 2000 after the sweep", remaining, err)
	}
	checkInvariants(t, db)
	if h, err := hold(db, ev, "alice", core.HoldRequest{Quantity: 6}); err != nil || h.Quantity != 6 {
		t.Fatalf("GA hold over owed tickets = %+v, %v", h, err)
	}
	if n, _ := counter(t, db, ev, "alice"); n != 6 {
		t.Fatalf("counter %d; want 6", n)
	}
	checkInvariants(t, db)
}
