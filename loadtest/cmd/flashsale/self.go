package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsale/onsale/loadtest/crowd"
	"github.com/onsale/onsale/loadtest/procstat"
)

// self is what the crowd (this process) cost: its goroutines and Go heap at
// their peaks, sampled once a second, and its peak resident set as the
// kernel counts it (VmHWM: every page, not a sample). The crowd's cost is
// reported beside the service's so that a slow sale can be told from a
// starved crowd.
type self struct {
	mu         sync.Mutex
	goroutines int
	heap       uint64 // bytes: live and not yet swept heap objects
}

// watchSelf samples this process once a second until ctx ends.
func watchSelf(ctx context.Context) *self {
	s := &self{}
	s.sample()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

func (s *self) sample() {
	m := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(m)
	s.mu.Lock()
	s.goroutines = max(s.goroutines, int(m[0].Value.Uint64()))
	s.heap = max(s.heap, m[1].Value.Uint64())
	s.mu.Unlock()
}

// peakRSS is this process's peak resident set (VmHWM), 0 if unknown.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// line says what the crowd cost: its peak RSS, CPU (u: the process
// table's sampling of this process), its
// goroutines and heap at their peaks and how late its fans acted (lag:
// all of them; shop: the admitted fans, on workers of their own).
func (s *self) line(fans, workers int, u procstat.Usage, lag, shop crowd.Latency) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("The crowd itself (this process, %d fans on %d workers): peak RSS %.0f MB, Go heap at most %.0f MB, at most %d goroutines; "+
		"CPU %.2f cores on average, %.2f at the busiest second; its fans acted late (every worker busy) by %.0f ms at the median, %.0f ms at p99, %.0f ms at most; "+
		"the admitted fans (shopping and paying, on %d workers of their own) by %.0f ms at p99, %.0f ms at most.",
		fans, workers, float64(peakRSS())/(1<<20), float64(s.heap)/(1<<20), s.goroutines, u.CPUMean, u.CPUPeak,
		millis(lag.P50), millis(lag.P99), millis(lag.Max), workers, millis(shop.P99), millis(shop.Max))
}

// millis is a duration in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
