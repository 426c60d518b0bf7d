package topology

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A member killed before leaves pids behind: its Patroni handle's pid and
// the postmaster.pid that a kill -9 does not remove. By the next Kill or
// Stop the kernel may have handed those pids to anything; neither may be
// signalled. The stand-in is a sleep of ours whose pid both name (its
// working directory is not the data directory, as no reused pid's is).
func TestPGKillStopSparesReusedPids(t *testing.T) {
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	pid := other.Process.Pid

	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), fmt.Appendf(nil, "%d\n%s\n", pid, data), 0o600); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	close(exited)
	m := &PGMember{Name: "pg1", DataDir: data,
		patroni: &pgProc{name: "patroni pg1", pidv: pid, since: pgStartTime(pid), done: exited}}
	p := &PG{Members: []*PGMember{m}}

	if got := m.postmaster(); got != 0 {
		t.Errorf("postmaster() = %d; want 0 (pid %d runs elsewhere)", got, pid)
	}
	if err := p.Kill(m); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st, _ := pgProcStat(pid); st != "S" && st != "R" {
		t.Fatalf("the process holding a stale pid is %q after Kill and Stop; want it running untouched", st)
	}
}

// The data of a cluster whose test binary was killed stays in
// /tmp/onsale-ha-*; the next start removes it, but only a directory the
// topology made, and only when no process runs from it.
func TestRemoveStaleRoots(t *testing.T) {
	mk := func(name string, mark bool) string {
		d := "/tmp/onsale-ha-zz" + name + fmt.Sprint(os.Getpid())
		if err := os.MkdirAll(filepath.Join(d, "pg1"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if mark {
			os.WriteFile(filepath.Join(d, staleMark), nil, 0o644)
		}
		return d
	}
	stale, busy, foreign, keep := mk("stale", true), mk("busy", true), mk("foreign", false), mk("keep", true)
	run := exec.Command("sleep", "60")
	run.Dir = filepath.Join(busy, "pg1")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })

	removeStaleRoots(keep)
	for d, want := range map[string]bool{stale: false, busy: true, foreign: true, keep: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists = %v; want %v", d, err == nil, want)
		}
	}
}
