package metrics

import (
	"strings"
	"testing"
	"time"

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

// CountPool exports each pool's figures under one name per figure, by pool.
func TestCountPool(t *testing.T) {
	m := New()
	m.CountPool("writes", func() PoolStats {
		return PoolStats{Acquired: 16, Idle: 0, Total: 16, Max: 16, Acquires: 900, Waits: 300, Canceled: 4,
			AcquireTime: 1500 * time.Millisecond, WaitTime: 1400 * time.Millisecond}
	})
	m.CountPool("reads", func() PoolStats { return PoolStats{Max: 4, Acquires: 7} })
	want := `
# HELP onsale_core_db_pool_canceled_acquires_total Acquires that gave up waiting for a connection (the request's deadline), by pool.
# TYPE onsale_core_db_pool_canceled_acquires_total counter
onsale_core_db_pool_canceled_acquires_total{pool="reads"} 0
onsale_core_db_pool_canceled_acquires_total{pool="writes"} 4
# HELP onsale_core_db_pool_wait_seconds_total Time acquires waited for a connection, by pool.
# TYPE onsale_core_db_pool_wait_seconds_total counter
onsale_core_db_pool_wait_seconds_total{pool="reads"} 0
onsale_core_db_pool_wait_seconds_total{pool="writes"} 1.4
# HELP onsale_core_db_pool_waits_total Acquires that waited for a connection (none was idle), by pool.
# TYPE onsale_core_db_pool_waits_total counter
onsale_core_db_pool_waits_total{pool="reads"} 0
onsale_core_db_pool_waits_total{pool="writes"} 300
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"onsale_core_db_pool_canceled_acquires_total", "onsale_core_db_pool_wait_seconds_total", "onsale_core_db_pool_waits_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(m.Registry, "onsale_core_db_pool_max_connections"); err != nil || n != 2 {
		t.Errorf("onsale_core_db_pool_max_connections: %d series, %v; want 2", n, err)
	}
}
