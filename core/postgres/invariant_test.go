package postgres_test

import (
	"testing"

	"github.com/onsale/onsale/core/postgres"
)

// checkInvariants fails the test when the database breaks a rule that must
// hold after any interleaving: one owner per seat, every held seat under an
// active hold that lists it with the same expiry (or lapsed: past its
// hold_until, so free), every active hold owning
// all its seats until it expires, account counters equal to what active,
// booked and owed holds hold (and every hold whose tickets may come back on
// its account's list), GA counters equal to what active and booked holds
// hold, and every booked seat under exactly the
// confirmed booking of its hold (with one ticket per seat).
func checkInvariants(tb testing.TB, db *postgres.DB) {
	tb.Helper()
	checks := []struct {
		name string
		sql  string
	}{
		// A seat of an ended hold may stay HELD once its time has passed:
		// lazy expiry makes it free, and the sweeper does not rewrite it.
		{"held seat without a matching active hold", `
SELECT count(*) FROM seats s LEFT JOIN holds h ON h.id = s.hold_id
 WHERE s.status = 'HELD' AND (h.id IS NULL OR (h.status <> 'ACTIVE' AND s.hold_until >= now()) OR NOT s.seat_id = ANY (h.seat_ids)
       OR h.event_id <> s.event_id OR h.expires_at <> s.hold_until)`},
		{"seat in two active holds", `
SELECT count(*) FROM (SELECT h.event_id, sid FROM holds h, unnest(h.seat_ids) sid
  WHERE h.status = 'ACTIVE' AND h.expires_at > now() GROUP BY 1, 2 HAVING count(*) > 1) d`},
		{"valid active hold missing a seat", `
SELECT count(*) FROM holds h, unnest(h.seat_ids) sid
  LEFT JOIN seats s ON s.seat_id = sid
 WHERE h.status = 'ACTIVE' AND h.expires_at > now() AND s.event_id = h.event_id
   AND (s.status <> 'HELD' OR s.hold_id IS DISTINCT FROM h.id)`},
		{"available seat still pointing at a hold", `
SELECT count(*) FROM seats WHERE status = 'AVAILABLE' AND (hold_id IS NOT NULL OR hold_until IS NOT NULL)`},
		// The limit is lazy (sweepSQL): an expired hold's tickets count
		// until a settle returns them, the hold ACTIVE past its expiry (a
		// seated hold, never swept) or swept and marked owed until then.
		{"account counter differs from its active, booked and owed holds", `
SELECT count(*) FROM account_tickets a
  FULL JOIN (SELECT event_id, account, sum(quantity) n FROM holds WHERE status IN ('ACTIVE', 'BOOKED') OR owed GROUP BY 1, 2) h
    ON h.event_id = a.event_id AND h.account = a.account
 WHERE coalesce(a.tickets, 0) <> coalesce(h.n, 0)`},
		// A hold whose tickets may still come back must be on its account's
		// list, or no settle could ever find it (a lost return).
		{"active or owed hold missing from its account's list", `
SELECT count(*) FROM holds h LEFT JOIN account_tickets a ON a.event_id = h.event_id AND a.account = h.account
 WHERE (h.status = 'ACTIVE' OR h.owed) AND NOT h.id = ANY (coalesce(a.holds, '{}'))`},
		{"hold listed twice on its account", `
SELECT count(*) FROM account_tickets a WHERE cardinality(a.holds) <> (SELECT count(DISTINCT x) FROM unnest(a.holds) x)`},
		{"account over its limit", `SELECT count(*) FROM account_tickets WHERE tickets > max_tickets OR tickets < 0`},
		{"booked seat not under a confirmed booking of its hold", `
SELECT count(*) FROM seats s LEFT JOIN bookings b ON b.id = s.booking_id
 WHERE s.status = 'BOOKED' AND (b.id IS NULL OR b.status <> 'CONFIRMED' OR b.hold_id <> s.hold_id OR NOT s.seat_id = ANY (b.seat_ids))`},
		{"confirmed booking without all its seats booked", `
SELECT count(*) FROM bookings b, unnest(b.seat_ids) sid
  LEFT JOIN seats s ON s.seat_id = sid
 WHERE b.status = 'CONFIRMED' AND s.event_id = b.event_id AND (s.status <> 'BOOKED' OR s.booking_id IS DISTINCT FROM b.id)`},
		{"confirmed booking whose hold is not BOOKED", `
SELECT count(*) FROM bookings b JOIN holds h ON h.id = b.hold_id WHERE (b.status = 'CONFIRMED') <> (h.status = 'BOOKED')`},
		{"confirmed booking without one ticket per seat", `
SELECT count(*) FROM bookings b WHERE b.status = 'CONFIRMED' AND (SELECT count(*) FROM tickets t WHERE t.booking_id = b.id) <> b.quantity`},
		{"money due back with no job to give it back", `
SELECT count(*) FROM bookings b WHERE b.status = 'REFUND_DUE'
   AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.booking_id = b.id AND o.kind IN ('refund', 'void') AND o.status = 'PENDING')`},
		{"GA counter differs from capacity minus active holds", `
SELECT count(*) FROM ga_inventory g
  LEFT JOIN (SELECT event_id, sum(quantity) n FROM holds WHERE status IN ('ACTIVE', 'BOOKED') GROUP BY 1) h ON h.event_id = g.event_id
 WHERE g.remaining <> g.capacity - coalesce(h.n, 0) OR g.remaining < 0`},
	}
	for _, c := range checks {
		var n int
		if err := db.Pool().QueryRow(ctx, c.sql).Scan(&n); err != nil {
			tb.Fatalf("invariant %q: %v", c.name, err)
		}
		if n != 0 {
			tb.Errorf("invariant broken: %s (%d rows)", c.name, n)
		}
	}
}
