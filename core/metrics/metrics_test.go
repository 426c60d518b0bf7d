package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// CountSeatHolds exports both counters under one name, by decided_by.
func TestCountSeatHolds(t *testing.T) {
	m := New()
	m.CountSeatHolds(func() (int64, int64) { return 3, 5 })
	n, err := testutil.GatherAndCount(m.Registry, "onsale_core_seat_holds_total")
	if err != nil || n != 2 {
		t.Fatalf("GatherAndCount = %d, %v; want 2 series", n, err)
	}
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "onsale_core_seat_holds_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	if got["cache"] != 3 || got["postgres"] != 5 {
		t.Errorf("onsale_core_seat_holds_total = %v; want cache 3, postgres 5", got)
	}
}
