package procstat

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

// A busy child of a watched shell counts towards the shell: the watcher
// measures the CPU time the shell and its children used, as /proc reads it
// (a watcher that missed the descendants would see next to none: the shell
// only waits). An idle process shows next to no CPU. No rate is asserted:
// on a loaded machine the busy loop gets what the scheduler gives it.
func TestWatchCountsDescendants(t *testing.T) {
	sh := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & sleep 30")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("pkill", "-P", itoa(sh.Process.Pid)).Run()
		sh.Process.Kill()
		sh.Wait()
	})
	idle := exec.Command("sleep", "30")
	if err := idle.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idle.Process.Kill(); idle.Wait() })
	before := treeCPU(t, sh.Process.Pid)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := Watch(ctx, []Target{{"busy", sh.Process.Pid}, {"idle", idle.Process.Pid}, {"self", os.Getpid()}}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the things themselves, not for a fixed time: five samples,
	// and half a second of CPU burnt by the busy loop.
	deadline := time.Now().Add(30 * time.Second)
	for (len(w.Samples()) < 5 || treeCPU(t, sh.Process.Pid)-before < 0.5) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(w.Samples()); n < 5 {
		t.Fatalf("%d samples in 30 s at 200 ms", n)
	}
	measured := w.CPUSeconds()[0]
	used := treeCPU(t, sh.Process.Pid) - before
	if used < 0.5 {
		t.Fatalf("the busy loop used %.2f s of CPU in 30 s", used)
	}
	// The watcher reads the same counters between its first sample (after
	// before) and its last (before used): never more than used, and all but
	// what ran in those two gaps.
	if measured > used+1e-9 || measured < used/2 {
		t.Errorf("watcher measured %.3f s of CPU for the shell and its child; /proc says they used %.3f s", measured, used)
	}
	u := w.Usage()
	if u[0].CPUPeak <= 0 || u[0].Procs < 2 || u[0].MemPeak == 0 {
		t.Errorf("busy shell and child = %+v; want CPU over 2+ processes", u[0])
	}
	if u[1].CPUPeak > 0.1 || u[1].MemPeak == 0 {
		t.Errorf("idle sleep = %+v; want next to no CPU and some memory", u[1])
	}
}

// treeCPU is the CPU seconds pid and its descendants have used, read from
// /proc independently of the watcher.
func treeCPU(tb testing.TB, pid int) float64 {
	tb.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		tb.Fatal(err)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		tb.Fatal(err)
	}
	cpu, parent := map[int]float64{}, map[int]int{}
	for _, p := range procs {
		if st, err := p.Stat(); err == nil {
			cpu[p.PID], parent[p.PID] = st.CPUTime(), st.PPID
		}
	}
	var total float64
	for p, c := range cpu {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += c
				break
			}
		}
	}
	return total
}

func TestParse(t *testing.T) {
	got, err := Parse("gateway=12,postgres=34")
	if err != nil || len(got) != 2 || got[1] != (Target{"postgres", 34}) {
		t.Fatalf("Parse = %v, %v", got, err)
	}
	for _, bad := range []string{"gateway", "=12", "core=x", "core=-1", "core=0"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The busiest interval is one of the watch's own, never the sliver between
// two samples taken back to back (CPUSeconds between the ticker's): over a
// millisecond, a 10 ms step of the CPU counters reads as ten cores. A busy
// loop uses at most one core; the bound allows a second for the scan's
// own skew.
func TestPeakIgnoresSlivers(t *testing.T) {
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := Watch(ctx, []Target{{"busy", busy.Process.Pid}}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		w.CPUSeconds()
	}
	if p := w.Usage()[0].CPUPeak; p > 2 {
		t.Errorf("CPUPeak = %.1f cores for one busy loop", p)
	}
	for _, s := range w.Samples() {
		if s.Cores[0] > 2 {
			t.Errorf("a sample of %.1f cores at %s for one busy loop", s.Cores[0], s.At.Format("15:04:05.000"))
		}
	}
}
