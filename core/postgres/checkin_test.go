package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

// confirmed books seats for account (an async payment, approved): a
// CONFIRMED, captured booking with one ticket per seat.
func confirmed(tb testing.TB, db *postgres.DB, ev int64, account string, seats ...string) *core.Booking {
	tb.Helper()
	_, b := pending(tb, db, ev, account, seats...)
	out, err := db.Settle(ctx, core.Settlement{EventID: "evt_ok_" + fmt.Sprint(b.ID), Type: "payment.succeeded",
		PaymentID: b.PaymentID, BookingID: b.ID, Succeeded: true})
	if err != nil || out != core.BookingConfirmed {
		tb.Fatalf("settle = %s, %v; want CONFIRMED", out, err)
	}
	got, err := db.Booking(ctx, b.ID)
	if err != nil || !got.Captured || len(got.Tickets) != len(seats) {
		tb.Fatalf("booking = %+v, %v; want captured with %d tickets", got, err, len(seats))
	}
	return got
}

func venueOf(tb testing.TB, db *postgres.DB, ev int64) (int64, string) {
	tb.Helper()
	var venue int64
	var tz string
	if err := db.Pool().QueryRow(ctx, `SELECT v.id, v.timezone FROM events e JOIN venues v ON v.id = e.venue_id WHERE e.id = $1`, ev).Scan(&venue, &tz); err != nil {
		tb.Fatal(err)
	}
	return venue, tz
}

func TestRedeem(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	venue, tz := venueOf(t, db, ev)
	loc, _ := time.LoadLocation(tz)
	b := confirmed(t, db, ev, "alice", "AUD-J-4", "AUD-J-5")
	refunded := confirmed(t, db, ev, "bob", "AUD-K-1")
	if _, err := db.Pool().Exec(ctx, `UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, refunded.ID); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2031, 3, 1, 13, 32, 10, 0, time.UTC) // 19:02 in Kolkata
	// The show starts at 19:00 on the scans' day; another show at the same
	// venue starts two days later.
	later := newEvent(t, db, "cinema", 6)
	laterB := confirmed(t, db, later, "dan", "AUD-J-4")
	for e, at := range map[int64]time.Time{ev: first.Add(-2 * time.Minute), later: first.Add(48 * time.Hour)} {
		if _, err := db.Pool().Exec(ctx, `UPDATE events SET starts_at = $2 WHERE id = $1`, e, at); err != nil {
			t.Fatal(err)
		}
	}
	gate1 := core.Staff{Name: "asha", Venue: venue, Gate: "1"}
	gate3 := core.Staff{Name: "ravi", Venue: venue, Gate: "3"}
	elsewhere := core.Staff{Name: "meera", Venue: venue + 100, Gate: "1"}
	scan := func(bk int64, n int, st core.Staff, at time.Time, offline bool) core.Scan {
		return core.Scan{Event: ev, Booking: bk, N: n, Staff: st, At: at, Offline: offline}
	}
	for _, tc := range []struct {
		name    string
		scan    core.Scan
		code    string // "" admitted
		message string
	}{
		{"first scan admits", scan(b.ID, 1, gate3, first, false), "", ""},
		{"second scan at another gate", scan(b.ID, 1, gate1, first.Add(time.Minute), false), core.EAlreadyUsed,
			"already used at gate 3 at " + first.In(loc).Format("15:04")},
		{"second scan at the same gate", scan(b.ID, 1, gate3, first.Add(time.Minute), false), core.EAlreadyUsed, "already used at gate 3"},
		{"the booking's other ticket", scan(b.ID, 2, gate1, first, false), "", ""},
		{"another venue", scan(b.ID, 1, elsewhere, first, false), core.EWrongVenue, "at another venue"},
		{"refunded booking", scan(refunded.ID, 1, gate1, first, false), core.ETicketRevoked, "revoked"},
		{"no such ticket", scan(b.ID, 9, gate1, first, false), core.ETicketRevoked, "withdrawn"},
		{"same venue, other day", core.Scan{Event: later, Booking: laterB.ID, N: 1, Staff: gate1, At: first}, core.EWrongEvent, "not one of today's events"},
		{"same venue, other day, offline", core.Scan{Event: later, Booking: laterB.ID, N: 1, Staff: gate1, At: first, Offline: true}, core.EWrongEvent, ""},
		{"ticket of another event", core.Scan{Event: ev + 1, Booking: b.ID, N: 1, Staff: gate1, At: first}, core.ETicketRevoked, ""},
		{"an offline scan of a used ticket", scan(b.ID, 1, gate1, first, true), core.EAlreadyUsed, "gate 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := db.Redeem(ctx, tc.scan)
			if tc.code == "" {
				if err != nil || c.Gate != tc.scan.Staff.Gate || c.Staff != "staff:"+tc.scan.Staff.Name || c.Seat == "" || c.EventName == "" {
					t.Fatalf("Redeem = %+v, %v; want admitted at gate %s with the seat", c, err, tc.scan.Staff.Gate)
				}
				return
			}
			if core.ErrorCode(err) != tc.code || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("Redeem = %+v, %v; want %s %q", c, err, tc.code, tc.message)
			}
		})
	}

	// An offline scan synced twice (the first answer lost) is its own row,
	// not a duplicate; a second offline scan of the ticket is.
	carol := confirmed(t, db, ev, "carol", "AUD-L-1")
	off := scan(carol.ID, 1, gate3, first.Add(-time.Hour), true)
	for i, want := range []string{"", "", core.EAlreadyUsed} {
		if i == 2 {
			off.Staff = gate1
		}
		_, err := db.Redeem(ctx, off)
		if core.ErrorCode(err) != want && !(want == "" && err == nil) {
			t.Errorf("offline sync %d = %v; want %q", i, err, want)
		}
	}

	// A scan id makes a resent scan its own whatever the clocks say: an
	// online scan whose answer was lost, sent again online and then
	// synced offline with the scanner's wrong clock; another look (another
	// id) at the same ticket is a duplicate.
	erin := confirmed(t, db, ev, "erin", "AUD-L-2")
	const id, other = "6f1c2a3e-8b9d-4c5e-a1f2-0123456789ab", "0b9a8c7d-6e5f-4a3b-9c2d-fedcba987654"
	skewed := first.Add(-3 * time.Hour)
	for i, tc := range []struct {
		scan core.Scan
		want string
	}{
		{core.Scan{Event: ev, Booking: erin.ID, N: 1, Staff: gate3, At: first, ScanID: id}, ""},
		{core.Scan{Event: ev, Booking: erin.ID, N: 1, Staff: gate3, At: first.Add(5 * time.Second), ScanID: id}, ""},
		{core.Scan{Event: ev, Booking: erin.ID, N: 1, Staff: gate3, At: first.Add(time.Minute), Offline: true, ScanID: strings.ToUpper(id), ClientAt: skewed}, ""},
		{core.Scan{Event: ev, Booking: erin.ID, N: 1, Staff: gate3, At: first.Add(time.Minute), Offline: true, ScanID: other, ClientAt: skewed}, core.EAlreadyUsed},
	} {
		c, err := db.Redeem(ctx, tc.scan)
		if core.ErrorCode(err) != tc.want && !(tc.want == "" && err == nil) || err == nil && (c.Gate != "3" || !c.At.Equal(first)) {
			t.Errorf("scan id %d: Redeem = %+v, %v; want %q (first at gate 3, %v)", i, c, err, tc.want, first)
		}
	}
	// The same scan id from another gate or steward is not that scan's own.
	if _, err := db.Redeem(ctx, core.Scan{Event: ev, Booking: erin.ID, N: 1, Staff: gate1, At: first, ScanID: id}); core.ErrorCode(err) != core.EAlreadyUsed {
		t.Errorf("another gate's scan with erin's scan id: %v; want already_used", err)
	}

	// A scanner whose clock is a day behind syncs a ticket it let in
	// offline at tonight's show: it is redeemed (the sync's time is
	// today), so no other gate can let it in again; online, that clock's
	// time would be another day.
	tonight := newEvent(t, db, "cinema", 6)
	if _, err := db.Pool().Exec(ctx, `UPDATE events SET starts_at = now() WHERE id = $1`, tonight); err != nil {
		t.Fatal(err)
	}
	frank := confirmed(t, db, tonight, "frank", "AUD-J-4")
	behind := time.Now().Add(-24 * time.Hour)
	if _, err := db.Redeem(ctx, core.Scan{Event: tonight, Booking: frank.ID, N: 1, Staff: gate1, At: behind}); core.ErrorCode(err) != core.EWrongEvent {
		t.Errorf("online scan with a clock a day behind: %v; want wrong_event", err)
	}
	if _, err := db.Redeem(ctx, core.Scan{Event: tonight, Booking: frank.ID, N: 1, Staff: gate1, At: behind, Offline: true}); err != nil {
		t.Errorf("offline scan synced with a clock a day behind: %v; want admitted", err)
	}
	if _, err := db.Redeem(ctx, core.Scan{Event: tonight, Booking: frank.ID, N: 1, Staff: gate3, At: time.Now()}); core.ErrorCode(err) != core.EAlreadyUsed {
		t.Errorf("the same ticket online at another gate: %v; want already_used", err)
	}
	var n int
	db.Pool().QueryRow(ctx, `SELECT count(*) FROM checkins`).Scan(&n)
	if n != 5 {
		t.Errorf("%d check-ins; want 5", n)
	}
	var sid string
	var clientAt *time.Time
	db.Pool().QueryRow(ctx, `SELECT scan_id::text, client_at FROM checkins WHERE booking_id = $1`, erin.ID).Scan(&sid, &clientAt)
	if sid != id || clientAt != nil {
		t.Errorf("erin's check-in: scan id %s, client time %v; want %s and none (an online scan)", sid, clientAt, id)
	}
}

func TestOfflinePack(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	tomorrow := newEvent(t, db, "cinema", 6) // newEvent starts shows in 24 hours
	venue, _ := venueOf(t, db, ev)
	now := time.Now()
	if _, err := db.Pool().Exec(ctx, `UPDATE events SET starts_at = $2 WHERE id = $1`, ev, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	b := confirmed(t, db, ev, "alice", "AUD-J-4", "AUD-J-5")
	gone := confirmed(t, db, ev, "bob", "AUD-K-1")
	confirmed(t, db, tomorrow, "bob", "AUD-K-1")
	db.Pool().Exec(ctx, `UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, gone.ID)
	if _, err := db.Redeem(ctx, core.Scan{Event: ev, Booking: b.ID, N: 2, Staff: core.Staff{Name: "asha", Venue: venue, Gate: "3"}, At: now}); err != nil {
		t.Fatal(err)
	}
	p, err := db.Offline(ctx, venue, now, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{}
	for _, e := range p.Events {
		ids = append(ids, e.ID)
	}
	if !slices.Contains(ids, ev) || p.Venue.ID != venue {
		t.Errorf("events = %v at venue %d; want %d among them", ids, p.Venue.ID, ev)
	}
	if !slices.Equal(p.Revoked, []string{core.TicketRef(gone.ID, 1)}) {
		t.Errorf("revoked = %v; want %s", p.Revoked, core.TicketRef(gone.ID, 1))
	}
	if len(p.Used) != 1 || p.Used[0].Ticket != core.TicketRef(b.ID, 2) || p.Used[0].Gate != "3" {
		t.Errorf("used = %+v; want %s at gate 3", p.Used, core.TicketRef(b.ID, 2))
	}
	// Incremental: only the check-ins recorded since (less the overlap).
	for _, tc := range []struct {
		since time.Time
		used  int
	}{{now.Add(-2 * time.Minute), 1}, {now.Add(core.GateSinceOverlap + time.Minute), 0}} {
		p, err := db.Offline(ctx, venue, now, tc.since)
		if err != nil || len(p.Used) != tc.used || p.Since == nil || len(p.Revoked) != 1 {
			t.Errorf("Offline(since %v) = %+v, %v; want %d used", tc.since, p, err, tc.used)
		}
	}
	if _, err := db.Offline(ctx, venue+100, now, time.Time{}); core.ErrorCode(err) != core.ENotFound {
		t.Errorf("Offline(unknown venue) = %v; want not_found", err)
	}
}

// The gate's events of the day, around a venue's midnight: at 23:05 in
// Kolkata a show at 00:05 is scanned (its doors are open), one at 07:00 is
// tomorrow's, one that started 13 hours ago is over. The control is the
// rule without core.GateDayAhead: the 00:05 show would be refused until
// midnight (a fresh-clone make test at 17:35 UTC failed just so).
func TestGateDay(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	now := time.Date(2031, 3, 1, 17, 35, 0, 0, time.UTC) // 23:05 in Kolkata
	shows := map[string]struct {
		at  time.Time
		day bool
	}{
		"19:00 today":        {now.Add(-4*time.Hour - 5*time.Minute), true},
		"23:30 today":        {now.Add(25 * time.Minute), true},
		"00:05 tomorrow":     {now.Add(time.Hour), true},
		"04:30 tomorrow":     {now.Add(5*time.Hour + 25*time.Minute), true},
		"07:00 tomorrow":     {now.Add(7*time.Hour + 55*time.Minute), false},
		"10:00 today, ended": {now.Add(-13*time.Hour - 5*time.Minute), false},
	}
	ids := map[int64]string{}
	var venue int64
	for name, s := range shows {
		ev := newEvent(t, db, "cinema", 6)
		if _, err := db.Pool().Exec(ctx, `UPDATE events SET starts_at = $2 WHERE id = $1`, ev, s.at); err != nil {
			t.Fatal(err)
		}
		ids[ev] = name
		v, tz := venueOf(t, db, ev)
		if venue != 0 && v != venue || tz != "Asia/Kolkata" {
			t.Fatalf("show %s at venue %d in %s; want every show at %d in Asia/Kolkata", name, v, tz, venue)
		}
		venue = v
	}
	p, err := db.Offline(ctx, venue, now, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range p.Events {
		got[ids[e.ID]] = true
	}
	for name, s := range shows {
		if got[name] != s.day {
			t.Errorf("show at %s of the day at 23:05: %v; want %v", name, got[name], s.day)
		}
	}
}

// Two gates scan the same ticket at the same instant, 100 times (a
// hundred tickets): exactly one admits it each time.
func TestRaceTwoGates(t *testing.T) {
	const rounds = 100
	setup := func(t *testing.T) (*postgres.DB, int64, *core.Booking, int64) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "cinema", 6)
		venue, _ := venueOf(t, db, ev)
		if _, err := db.Pool().Exec(ctx, `UPDATE events SET starts_at = now() WHERE id = $1`, ev); err != nil { // a show of the day
			t.Fatal(err)
		}
		b := confirmed(t, db, ev, "alice", "AUD-J-4")
		// The booking's other 99 tickets (GA-like: no seat).
		if _, err := db.Pool().Exec(ctx, `INSERT INTO tickets (booking_id, event_id, n) SELECT $1, $2, g FROM generate_series(2, $3) g`,
			b.ID, ev, rounds); err != nil {
			t.Fatal(err)
		}
		return db, ev, b, venue
	}

	// The control runs the product's own Redeem against a checkins table
	// without its keys (this subtest's own database): the keys are what
	// make a redemption once, and the harness must see the doubles when
	// they are gone.
	t.Run("control: the same redeem without the table's keys admits twice", func(t *testing.T) {
		db, ev, b, venue := setup(t)
		if _, err := db.Pool().Exec(ctx, `ALTER TABLE checkins DROP CONSTRAINT checkins_pkey, DROP CONSTRAINT checkins_ticket_id_key`); err != nil {
			t.Fatal(err)
		}
		doubles := 0
		for n := 1; n <= rounds; n++ {
			var admitted atomic.Int32
			together(2, func(i int) {
				st := core.Staff{Name: fmt.Sprint("steward-", i), Venue: venue, Gate: fmt.Sprint(i + 1)}
				if _, err := db.Redeem(ctx, core.Scan{Event: ev, Booking: b.ID, N: n, Staff: st, At: time.Now()}); err == nil {
					admitted.Add(1)
				} else if core.ErrorCode(err) != core.EAlreadyUsed {
					t.Errorf("ticket %d: %v", n, err)
				}
			})
			if admitted.Load() > 1 {
				doubles++
			}
		}
		t.Logf("without the keys: %d of %d tickets admitted at both gates", doubles, rounds)
		if doubles == 0 {
			t.Fatal("the redemption without its keys never admitted twice: the harness cannot see the bug")
		}
	})

	t.Run("product: one gate admits, the other says already used", func(t *testing.T) {
		db, ev, b, venue := setup(t)
		for n := 1; n <= rounds; n++ {
			var admitted, used atomic.Int32
			together(2, func(i int) {
				st := core.Staff{Name: fmt.Sprint("steward-", i), Venue: venue, Gate: fmt.Sprint(i + 1)}
				_, err := db.Redeem(ctx, core.Scan{Event: ev, Booking: b.ID, N: n, Staff: st, At: time.Now()})
				switch core.ErrorCode(err) {
				case core.EInternal:
					if err == nil {
						admitted.Add(1)
						return
					}
					t.Error(err)
				case core.EAlreadyUsed:
					used.Add(1)
				default:
					t.Errorf("ticket %d: %v", n, err)
				}
			})
			if admitted.Load() != 1 || used.Load() != 1 {
				t.Fatalf("ticket %d: %d admitted, %d already used; want 1 and 1", n, admitted.Load(), used.Load())
			}
		}
		var rows int
		db.Pool().QueryRow(ctx, `SELECT count(*) FROM checkins`).Scan(&rows)
		if rows != rounds {
			t.Fatalf("%d check-ins; want %d", rows, rounds)
		}
	})
}
