package main

import (
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/procstat"
)

// The CPU over the sale averages only the samples inside it: the sign-in
// ahead (before saleFrom) and the settling after the crowd (after saleTo)
// are left out.
func TestSaleCPU(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	o := outcome{targets: []procstat.Target{{Name: "core"}, {Name: "postgres"}}, saleFrom: at(10), saleTo: at(13),
		cpu: []procstat.Sample{
			{At: at(9), Cores: []float64{1.5, 1.5}},  // sign-in ahead
			{At: at(10), Cores: []float64{1.5, 1.5}}, // the second before the pre-queue opened
			{At: at(11), Cores: []float64{0.2, 0.1}},
			{At: at(12), Cores: []float64{0.4, 0.3}},
			{At: at(13), Cores: []float64{0.6, 0.5}},
			{At: at(14), Cores: []float64{1.5, 1.5}}, // settling
		}}
	for name, want := range map[string]float64{"core": 0.4, "postgres": 0.3, "redis": 0} {
		if got := o.saleCPUOf(name); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("saleCPUOf(%q) = %v; want %v", name, got, want)
		}
	}
}
