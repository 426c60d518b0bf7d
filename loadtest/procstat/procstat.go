// Package procstat samples the CPU and memory of the processes a load test
// runs against. A watched process counts with its descendants, so
// PostgreSQL is its postmaster and every backend; memory is the sum of
// proportional set sizes (PSS), so pages shared between backends count once.
package procstat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// Target is a process to watch, by a name for the report.
type Target struct {
	Name string
	PID  int
}

// Usage is what one target cost over the watch.
type Usage struct {
	Name    string
	CPUPeak float64 // cores, the busiest sampling interval (of at least half the interval asked for)
	CPUMean float64 // cores, over the whole watch
	MemPeak uint64  // bytes, the largest PSS sum sampled (every memEvery)
	Procs   int     // processes (the target and descendants) at the last sample
}

// Sample is one interval: cores used by each target, in Targets order.
type Sample struct {
	At    time.Time
	Cores []float64
}

// Watcher samples its targets until its context ends.
type Watcher struct {
	fs      procfs.FS
	targets []Target
	every   time.Duration

	mu      sync.Mutex
	usage   []Usage
	cpu     []float64 // CPU seconds at the last sample
	busy    []float64 // CPU seconds accumulated
	start   time.Time
	last    time.Time
	memAt   time.Time // the last PSS read (memEvery)
	samples []Sample
}

// Parse reads "name=pid,name=pid".
func Parse(s string) ([]Target, error) {
	var out []Target
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		name, pid, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("procstat: %q is not name=pid", f)
		}
		out = append(out, Target{Name: name, PID: n})
	}
	return out, nil
}

// memEvery is how often the watcher reads memory. PSS comes from
// /proc/PID/smaps_rollup, which walks the process's page tables in the
// kernel, charged to the watcher: read every second for a 1.3 GB crowd
// and 27 PostgreSQL processes it was about a seventh of the crowd's own CPU
// (perf, the 600,000-fan sale). Memory moves slowly; CPU is read each
// interval.
const memEvery = 5 * time.Second

// Watch samples targets every interval until ctx ends.
func Watch(ctx context.Context, targets []Target, every time.Duration) (*Watcher, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("procstat: %w", err)
	}
	w := &Watcher{fs: fs, targets: targets, every: every, usage: make([]Usage, len(targets)), cpu: make([]float64, len(targets)),
		busy: make([]float64, len(targets)), start: time.Now()}
	for i, t := range targets {
		w.usage[i].Name = t.Name
	}
	w.last = w.start
	w.sample(true)
	go func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				w.sample(false)
			}
		}
	}()
	return w, nil
}

// sample reads every process once: its parent (to find descendants), CPU
// time, and PSS every memEvery. Samples are taken one at a time (the
// ticker's and CPUSeconds' alike), each under the lock from its first read
// to its last.
func (w *Watcher) sample(first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	procs, err := w.fs.AllProcs()
	if err != nil {
		return
	}
	type info struct {
		ppid int
		cpu  float64
	}
	all := make(map[int]*info, len(procs))
	children := map[int][]int{}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // gone meanwhile
		}
		all[p.PID] = &info{ppid: st.PPID, cpu: st.CPUTime()}
		children[st.PPID] = append(children[st.PPID], p.PID)
	}
	now := time.Now()
	dt := now.Sub(w.last).Seconds()
	readMem := first || now.Sub(w.memAt) >= memEvery
	if readMem {
		w.memAt = now
	}
	s := Sample{At: now, Cores: make([]float64, len(w.targets))}
	for i, t := range w.targets {
		var cpu float64
		var mem uint64
		n := 0
		stack := []int{t.PID}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			in, ok := all[pid]
			if !ok {
				continue
			}
			n++
			cpu += in.cpu
			if readMem {
				if p, err := w.fs.Proc(pid); err == nil {
					if r, err := p.ProcSMapsRollup(); err == nil {
						mem += r.Pss
					}
				}
			}
			stack = append(stack, children[pid]...)
		}
		u := &w.usage[i]
		u.Procs = n
		u.MemPeak = max(u.MemPeak, mem)
		if !first && dt > 0 {
			d := max(0, cpu-w.cpu[i]) // a backend that exits takes its time along
			w.busy[i] += d
			s.Cores[i] = d / dt
			if dt >= w.every.Seconds()/2 {
				// Not over a sliver: CPUSeconds samples between the
				// ticker's, and over a few milliseconds the counters'
				// 10 ms steps and the scan's own length read as many
				// cores (12 cores of PostgreSQL on a 2-core machine).
				u.CPUPeak = max(u.CPUPeak, d/dt)
			}
		}
		w.cpu[i] = cpu
	}
	if !first && dt >= w.every.Seconds()/2 {
		// A sliver's CPU counts in the totals (CPUSeconds, CPUMean) but is
		// no sample: the chart and the sale's mean (an average of samples)
		// would read its few milliseconds as a second of many cores.
		w.samples = append(w.samples, s)
	}
	w.last = now
}

// Usage reports each target so far.
func (w *Watcher) Usage() []Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]Usage(nil), w.usage...)
	if el := w.last.Sub(w.start).Seconds(); el > 0 {
		for i := range out {
			out[i].CPUMean = w.busy[i] / el
		}
	}
	return out
}

// Samples returns the per-interval CPU samples so far.
func (w *Watcher) Samples() []Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Sample(nil), w.samples...)
}

// Targets returns the watched targets, in the order of Sample.Cores.
func (w *Watcher) Targets() []Target { return w.targets }

// CPUSeconds samples now and returns each target's CPU seconds so far
// since the watch began (in Targets order).
func (w *Watcher) CPUSeconds() []float64 {
	w.sample(false)
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]float64(nil), w.busy...)
}
