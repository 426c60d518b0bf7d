package check

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The whole checker over a small sale in the core's database and a
// provider's ledger: with the crowd's evidence every invariant passes; a
// confirmation the crowd recorded that the database lacks fails the
// confirmations rule (and nothing else); handed no samples, admissions or
// confirmations, the rules about them fail instead of passing.
func TestRun(t *testing.T) {
	ctx := context.Background()
	conn, dsn := coreDatabase(t)
	const sale = `
INSERT INTO venues (id, name, city) VALUES (1, 'Stadium', 'Mumbai');
INSERT INTO events (id, venue_id, name, kind, starts_at, onsale_at, seated, capacity, max_per_account)
VALUES (1, 1, 'Concert', 'concert', now() + interval '1 day', now(), true, 3, 4);
INSERT INTO accounts (id, phone) VALUES (1, '+919800000001'), (2, '+919800000002');
INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, status, expires_at, ended_at)
VALUES ('00000000-0000-0000-0000-000000000001', 1, 'acct:1', '{A-1,A-2}', 2, 2, 'BOOKED', now() + interval '1 minute', NULL),
       ('00000000-0000-0000-0000-000000000002', 1, 'acct:2', '{A-3}', 1, 1, 'EXPIRED', now() - interval '1 minute', now() - interval '58 seconds');
INSERT INTO account_tickets (event_id, account, tickets, max_tickets) VALUES (1, 'acct:1', 2, 4), (1, 'acct:2', 0, 4);
INSERT INTO bookings (id, hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, status)
VALUES (7, '00000000-0000-0000-0000-000000000001', 1, 'acct:1', '{A-1,A-2}', 2, 5000, 'sync', 'CONFIRMED');
INSERT INTO seats (event_id, seat_id, pos, section, row_label, row_no, number, band, status, booking_id)
VALUES (1, 'A-1', 1, 'A', 'A', 1, 1, 'gold', 'BOOKED', 7), (1, 'A-2', 2, 'A', 'A', 1, 2, 'gold', 'BOOKED', 7),
       (1, 'A-3', 3, 'A', 'A', 1, 3, 'gold', 'AVAILABLE', NULL);`
	if _, err := conn.Exec(ctx, sale); err != nil {
		t.Fatal(err)
	}
	ledger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"totals": map[string]totals{"booking-7": {Authorized: 5000, Captured: 5000}},
			"entries": []map[string]any{{"time": time.Now(), "reference": "booking-7"}}})
	}))
	defer ledger.Close()

	t0 := time.Now().Add(-3 * time.Minute)
	var samples []Sample
	for i := range int64(90) {
		samples = append(samples, Sample{At: t0.Add(time.Duration(i) * time.Second), Dial: 600, Cap: 100, Serving: i, Queued: 3})
	}
	in := Input{DatabaseURL: dsn, Event: 1, LedgerURL: ledger.URL, ProviderKey: "k", SweepInterval: time.Second, Samples: samples,
		Admissions: []Admission{{Fan: 1, First: 5, Position: 5, AdmittedAt: t0.Add(10 * time.Second), Account: "acct:1",
			Places: []Place{{t0, PlaceJoined, 5, 0, 0}, {t0.Add(10 * time.Second), PlaceAdmitted, 5, time.Second, 0}}}},
		Confirmations: []Confirmation{{Fan: 1, Account: "acct:1", Booking: 7, Seats: []string{"A-2", "A-1"}, AmountPaise: 5000}},
		Claim:         30 * time.Second, AccountsRequired: true}
	failures := func(in Input) []string {
		t.Helper()
		res, err := Run(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		var failed []string
		for _, r := range res {
			if !r.Pass {
				failed = append(failed, r.Name+": "+r.Detail)
			}
		}
		return failed
	}
	if f := failures(in); len(f) > 0 {
		t.Fatalf("a clean sale failed:\n%s", strings.Join(f, "\n"))
	}

	lost := in
	lost.Confirmations = append(lost.Confirmations, Confirmation{Fan: 2, Account: "acct:2", Booking: 8, Seats: []string{"A-3"}, AmountPaise: 2500})
	if f := failures(lost); len(f) != 1 || !strings.HasPrefix(f[0], confirmationsName) || !strings.Contains(f[0], "booking 8 (fan 2) not in the database") {
		t.Errorf("a confirmation the database lacks: failures %q; want only the confirmations rule, naming booking 8", f)
	}

	empty := in
	empty.Samples, empty.Admissions, empty.Confirmations = nil, nil, nil
	failed := failures(empty)
	for _, want := range []string{"active sessions never beat", "places offered never beat", "admitted in queue order", confirmationsName, keptName} {
		found := false
		for _, f := range failed {
			name, detail, _ := strings.Cut(f, ": ")
			found = found || strings.Contains(name, want) && strings.HasPrefix(detail, "no evidence (")
		}
		if !found {
			t.Errorf("handed no samples, admissions or confirmations: failures\n%s\nwant %q failing for want of evidence", strings.Join(failed, "\n"), want)
		}
	}

	// The lazy limit: an expired hold still owed counts on its account. A
	// counter that gave its ticket back while it is owed (a double return)
	// fails the counters rule, and so does an owed hold its account does
	// not list (no settle could return it: a lost return).
	counters := func(setup string) []string {
		t.Helper()
		if _, err := conn.Exec(ctx, setup); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range failures(in) {
			if strings.HasPrefix(f, "account counters equal") {
				got = append(got, f)
			}
		}
		return got
	}
	const owed2 = `UPDATE holds SET owed = true WHERE id = '00000000-0000-0000-0000-000000000002';`
	for _, tc := range []struct {
		name, setup string
		fail        bool
	}{
		{"owed, not counted", owed2 + `UPDATE account_tickets SET tickets = 0, holds = '{00000000-0000-0000-0000-000000000002}' WHERE account = 'acct:2'`, true},
		{"owed, counted, not listed", owed2 + `UPDATE account_tickets SET tickets = 1, holds = '{}' WHERE account = 'acct:2'`, true},
		{"owed, counted and listed", owed2 + `UPDATE account_tickets SET tickets = 1, holds = '{00000000-0000-0000-0000-000000000002}' WHERE account = 'acct:2'`, false},
		{"returned", `UPDATE holds SET owed = false; UPDATE account_tickets SET tickets = 0, holds = '{}' WHERE account = 'acct:2'`, false},
	} {
		if got := counters(tc.setup); (len(got) > 0) != tc.fail {
			t.Errorf("%s: counters rule failures %q; want failing %v", tc.name, got, tc.fail)
		}
	}

	// An unsettled booking fails its rule, named in the detail.
	if _, err := conn.Exec(ctx, `INSERT INTO bookings (id, hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, status, payment_id)
VALUES (9, '00000000-0000-0000-0000-000000000002', 1, 'acct:2', '{A-3}', 1, 2500, 'async', 'PAYMENT_PENDING', 'pay_x')`); err != nil {
		t.Fatal(err)
	}
	f := strings.Join(failures(in), "\n")
	if !strings.Contains(f, "no booking left unsettled") || !strings.Contains(f, `booking 9 PAYMENT_PENDING (async, payment "pay_x"`) {
		t.Errorf("an unsettled booking: failures\n%s\nwant the unsettled rule naming booking 9", f)
	}

	// A hold no sweep ever ended (left ACTIVE an hour past its expiry: a
	// sweep that lost track of it) outlived its expiry as much as one
	// ended late, and fails the same rule; one just expired does not.
	outlived := func(ago string) bool {
		t.Helper()
		if _, err := conn.Exec(ctx, `INSERT INTO holds (id, event_id, account, quantity, claimed, status, expires_at)
VALUES ('00000000-0000-0000-0000-000000000003', 1, 'acct:2', 1, 1, 'ACTIVE', now() - $1::interval)
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at`, ago); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(strings.Join(failures(in), "\n"), "no hold outlived its expiry")
	}
	if !outlived("1 hour") || outlived("1 second") {
		t.Errorf("a hold left ACTIVE: the rule fails an hour past its expiry %v, a second past it %v; want true, false", outlived("1 hour"), outlived("1 second"))
	}

	// A held seat lapses with its hold: one that outlives its hold's expiry
	// (hold_until later than it: a seat no reader frees when the hold
	// lapses) fails the same rule; one lapsing with it does not.
	seatOutlived := func(by string) bool {
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE seats s SET status = 'HELD', hold_id = h.id, hold_until = h.expires_at + $1::interval
  FROM holds h WHERE h.id = '00000000-0000-0000-0000-000000000002' AND s.event_id = 1 AND s.seat_id = 'A-3'`, by); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(strings.Join(failures(in), "\n"), "no hold outlived its expiry")
	}
	if !seatOutlived("1 hour") || seatOutlived("0 s") {
		t.Errorf("a held seat: the rule fails it an hour past its hold's expiry %v, at it %v; want true, false", seatOutlived("1 hour"), seatOutlived("0 s"))
	}
}
