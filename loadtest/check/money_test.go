package check

import (
	"strings"
	"testing"
	"time"
)

// Money: conserved bookings pass; a paisa off fails; a ledger with nothing
// for the event's bookings fails (no evidence); across an outage only the
// bookings whose money moved around it count.
func TestConserved(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	bookings := []booking{{1, "CONFIRMED", 5000}, {2, "REFUNDED", 2500}, {3, "FAILED", 2500}}
	good := ledger{
		Totals: map[string]totals{
			"booking-1": {Authorized: 5000, Captured: 5000},
			"booking-2": {Charged: 2500, Captured: 2500, Refunded: 2500},
			"booking-3": {Authorized: 2500, Voided: 2500},
		},
		Entries: []entry{{t0, "booking-1"}, {t0.Add(time.Second), "booking-1"}, {t0.Add(10 * time.Minute), "booking-2"}},
	}
	if r := conserved(bookings, good, nil); !r.Pass || !strings.Contains(r.Detail, "kept ₹50.00 = confirmed sales ₹50.00") {
		t.Errorf("conserved(good) = %+v; want a pass", r)
	}
	off := ledger{Totals: map[string]totals{"booking-1": {Authorized: 5000, Captured: 4999}}}
	if r := conserved(bookings, off, nil); r.Pass || !strings.Contains(r.Detail, "1 bookings off") {
		t.Errorf("conserved(a paisa short) = %+v; want a failure", r)
	}
	if r := conserved(bookings, ledger{}, nil); r.Pass || !strings.HasPrefix(r.Detail, "no evidence") {
		t.Errorf("conserved(empty ledger) = %+v; want a failure for want of evidence", r)
	}
	w := Window{t0.Add(-time.Second), t0.Add(30 * time.Second)}
	if r := conserved(bookings, good, &w); !r.Pass || !strings.HasPrefix(r.Detail, "1 bookings") || !strings.Contains(r.Name, "outage") {
		t.Errorf("conserved(outage) = %+v; want a pass over booking 1 alone", r)
	}
	later := Window{t0.Add(time.Hour), t0.Add(time.Hour + 30*time.Second)}
	if r := conserved(bookings, good, &later); r.Pass {
		t.Errorf("conserved(an outage with no money moving) = %+v; want a failure for want of evidence", r)
	}
}
