package crowd_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/crowd"
)

// TestCrowdScale runs 200,000 fans through a fake gateway that keeps them
// all in line at once (they join, and poll once the line has moved) and
// then admits one in fifty, telling the rest the sale is sold out: as a full-size sale does
// with a crowd many times the seats. The crowd's goroutines are bounded by
// its workers, not by its fans (a goroutine a fan would be 200,000); its
// heap and stacks at their peak are reported per fan, not asserted (they
// include the fake gateway's, in the same process).
func TestCrowdScale(t *testing.T) {
	const fans, workers, admit = 200_000, 128, 50
	g := newFakeGateway(t)
	start := time.Now()
	arrival := crowd.Arrival{OnsaleIn: 2 * time.Second, Wall: time.Second, Tail: 2 * time.Second}
	g.line = &fakeLine{until: start.Add(arrival.OnsaleIn + arrival.Tail), poll: arrival.OnsaleIn + arrival.Tail + time.Second, admit: admit}
	st := crowd.NewStats(start, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := crowd.New(g.addr, 1, []string{"A", "B"}, workers, st)

	runtime.GC()
	before := sample()
	cpu0 := cpuTime()
	var peak usage
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				peak = peak.max(sample())
			}
		}
	}()
	admissions := c.Fans(ctx, fans, arrival, start)
	close(stop)
	wg.Wait()
	took, cpu := time.Since(start), cpuTime()-cpu0
	if ctx.Err() != nil {
		t.Fatal("the crowd took longer than 5 minutes")
	}
	got := g.Counts()
	if got["join"] != fans || len(admissions) != fans || int(st.Admitted.Load()) != fans/admit || got["status sold out"] != fans-fans/admit {
		t.Errorf("joins %d, traces %d, admitted %d, told sold out %d; want %d, %d, %d, %d",
			got["join"], len(admissions), st.Admitted.Load(), got["status sold out"], fans, fans, fans/admit, fans-fans/admit)
	}
	// The fake's server has a goroutine a connection, the crowd a worker
	// each and a connection each (and a few more for second clicks).
	if bound := before.goroutines + 3*workers + 64; peak.goroutines > bound {
		t.Errorf("%d goroutines at the peak (%d before); want at most %d: bounded by the workers (%d), not the fans (%d)",
			peak.goroutines, before.goroutines, bound, workers, fans)
	}
	lag := st.Lag()
	t.Logf("%d fans, %d workers, %.1f s, %d requests, %.1f µs of CPU a request (the crowd's and the fake gateway's): peak %d goroutines (%d before), heap %.0f MB and stacks %.1f MB at the peak "+
		"(%.0f bytes a fan over the %.0f MB before, the fake gateway's included); the fans' lag p50 %v, p99 %v, max %v",
		fans, workers, took.Seconds(), requests(st), cpu.Seconds()*1e6/float64(requests(st)), peak.goroutines, before.goroutines, mb(peak.heap), mb(peak.stacks),
		float64(peak.heap+peak.stacks-before.heap-before.stacks)/fans, mb(before.heap+before.stacks), lag.P50, lag.P99, lag.Max)
}

// usage is the process's goroutines and memory at one moment.
type usage struct {
	goroutines   int
	heap, stacks uint64 // bytes: live and not yet swept heap objects; goroutine stacks
}

func (u usage) max(v usage) usage {
	return usage{max(u.goroutines, v.goroutines), max(u.heap, v.heap), max(u.stacks, v.stacks)}
}

// sample reads usage from runtime/metrics (no stop-the-world).
func sample() usage {
	s := []metrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return usage{int(s[0].Value.Uint64()), s[1].Value.Uint64(), s[2].Value.Uint64()}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// requests is how many requests the crowd timed.
func requests(st *crowd.Stats) int {
	n := 0
	for _, l := range st.Latencies() {
		n += l.Count
	}
	return n
}
