package check

import (
	"strings"
	"testing"
	"time"
)

// The crowd's confirmations against the database: each must be there,
// CONFIRMED, with the seats (in any order), amount and owner the fan was
// told. A confirmation the database lacks fails; so does none recorded.
func TestCompareConfirmations(t *testing.T) {
	told1 := Confirmation{Fan: 1, Account: "acct:1", Booking: 10, Seats: []string{"A-1", "A-2"}, AmountPaise: 5000}
	told2 := Confirmation{Fan: 2, Account: "acct:2", Booking: 11, Seats: []string{"B-1"}, AmountPaise: 2500}
	db := func() map[int64]told {
		return map[int64]told{
			10: {"CONFIRMED", []string{"A-2", "A-1"}, 5000, "acct:1"},
			11: {"CONFIRMED", []string{"B-1"}, 2500, "acct:2"},
		}
	}
	tests := []struct {
		name   string
		cs     []Confirmation
		change func(map[int64]told)
		pass   bool
		want   string
	}{
		{"all there", []Confirmation{told1, told2, told1}, nil, true, "2 bookings the fans were told"},
		{"one missing from the database", []Confirmation{told1, told2}, func(m map[int64]told) { delete(m, 11) }, false, "booking 11 (fan 2) not in the database"},
		{"refunded in the database", []Confirmation{told1, told2}, func(m map[int64]told) { m[10] = told{"REFUNDED", m[10].Seats, 5000, "acct:1"} }, false, "is REFUNDED"},
		{"other seats", []Confirmation{told1}, func(m map[int64]told) { m[10] = told{"CONFIRMED", []string{"A-1", "A-3"}, 5000, "acct:1"} }, false, "has seats"},
		{"another amount", []Confirmation{told1}, func(m map[int64]told) { m[10] = told{"CONFIRMED", []string{"A-1", "A-2"}, 4999, "acct:1"} }, false, "₹49.99"},
		{"another owner", []Confirmation{told1}, func(m map[int64]told) { m[10] = told{"CONFIRMED", []string{"A-1", "A-2"}, 5000, "acct:9"} }, false, "belongs to acct:9"},
		{"none recorded", nil, nil, false, "no evidence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := db()
			if tc.change != nil {
				tc.change(m)
			}
			r := compareConfirmations(tc.cs, m)
			if r.Pass != tc.pass || !strings.Contains(r.Detail, tc.want) {
				t.Errorf("compareConfirmations = %+v; want pass %v and a detail with %q", r, tc.pass, tc.want)
			}
		})
	}
}

// Places: kept, or moved back only where the fan let its turn lapse.
func TestPlacesKept(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	const claim = 30 * time.Second
	fan := func(n int, ps ...Place) Admission { return Admission{Fan: n, Places: ps} }
	kept := fan(1, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(20), PlaceAdmitted, 40, 2 * time.Second, 0})
	pre := fan(2, Place{at(0), PlaceJoined, 0, 0, 0}, Place{at(11), PlaceSeen, 7, 3 * time.Second, 0}, Place{at(12), PlaceAdmitted, 7, time.Second, 0})
	tests := []struct {
		name string
		adms []Admission
		pass bool
		want string
	}{
		{"kept, and a pre-queue place drawn at onsale", []Admission{kept, pre}, true, "2 fans held a place; 0 lost"},
		{"moved back", []Admission{kept, fan(3, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(9), PlaceSeen, 900, time.Second, 0})}, false, "fan 3 moved back from 40 to 900"},
		{"a lapse the fan let happen", []Admission{kept, fan(4, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(60), PlaceRequeued, 900, 45 * time.Second, 0})}, true, "1 let their turn lapse"},
		{"sent back though it kept asking", []Admission{fan(5, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(60), PlaceRequeued, 900, 2 * time.Second, 3 * time.Second})}, false, "fan 5 sent back from 40 to 900"},
		{"sent back, its polls slow to arrive", []Admission{kept, fan(9, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(60), PlaceRequeued, 900, 25 * time.Second, 31 * time.Second})}, true, "1 went back though they polled in time"},
		{"the room reset", []Admission{fan(6, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(5), PlaceReset, 0, time.Second, 0})}, false, "the room was reset"},
		{"ended before its turn", []Admission{fan(7, Place{at(0), PlaceJoined, 40, 0, 0}, Place{at(5), PlaceEnded, 0, time.Second, 0})}, false, "told its turn was over"},
		{"nobody held a place", []Admission{fan(8, Place{at(0), PlaceJoined, 0, 0, 0})}, false, "no evidence"},
		{"no histories", nil, false, "no evidence"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := placesKept(tc.adms, claim)
			if r.Pass != tc.pass || !strings.Contains(r.Detail, tc.want) {
				t.Errorf("placesKept = %+v; want pass %v and a detail with %q", r, tc.pass, tc.want)
			}
		})
	}
}

// An invariant handed nothing fails: no samples, no admissions.
func TestNoEvidenceFails(t *testing.T) {
	if r := offeredRate(nil, 0); r.Pass || !strings.HasPrefix(r.Detail, "no evidence") {
		t.Errorf("offeredRate(no samples) = %+v; want a failure for want of evidence", r)
	}
	if r := queueOrder(Input{}); r.Pass || !strings.HasPrefix(r.Detail, "no evidence") {
		t.Errorf("queueOrder(no admissions) = %+v; want a failure for want of evidence", r)
	}
	adm := []Admission{{Position: 5, AdmittedAt: time.Unix(100, 0)}}
	if r := queueOrder(Input{Admissions: adm}); r.Pass {
		t.Errorf("queueOrder(admissions, no samples) = %+v; want a failure for want of evidence", r)
	}
	if r := withinLimit(nil); r.Pass {
		t.Errorf("withinLimit(nobody bought) = %+v; want a failure for want of evidence", r)
	}
	if r := (evidenceOf{3, "x"}).rule(Result{"r", true, "d"}); !r.Pass || r.Detail != "d" {
		t.Errorf("rule with evidence = %+v; want it unchanged", r)
	}
}
