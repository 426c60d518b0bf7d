package procstat

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A busy child of a watched shell counts towards the shell; an idle
// process shows next to no CPU.
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := Watch(ctx, []Target{{"busy", sh.Process.Pid}, {"idle", idle.Process.Pid}, {"self", os.Getpid()}}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for five samples themselves, not for a fixed time: on a busy
	// machine they come late (how fast is a benchmark's question, not a
	// test's).
	deadline := time.Now().Add(10 * time.Second)
	for len(w.Samples()) < 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	samples := w.Samples()
	if len(samples) < 5 {
		t.Fatalf("%d samples in 10 s at 200 ms", len(samples))
	}
	u := w.Usage()
	if u[0].CPUPeak < 0.5 || u[0].CPUMean < 0.3 || u[0].Procs < 2 || u[0].MemPeak == 0 {
		t.Errorf("busy shell and child = %+v; want about one core over 2+ processes", u[0])
	}
	if u[1].CPUPeak > 0.1 || u[1].MemPeak == 0 {
		t.Errorf("idle sleep = %+v; want next to no CPU and some memory", u[1])
	}
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
