package stack

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain lets the test binary play an app: with STACK_TEST_SERVE=addr it
// serves 200 on every path there until killed. Otherwise it runs the tests
// and fails them if a goroutine they started is still running when they end
// (each one has an owner and a way to stop).
func TestMain(m *testing.M) {
	if addr := os.Getenv("STACK_TEST_SERVE"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			os.Exit(3)
		}
		http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func answers(addr string) bool {
	c := http.Client{Timeout: 300 * time.Millisecond}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// A Proc frozen with SIGSTOP does not answer and answers again after
// SIGCONT; one killed starts again on the same address; Stop ends a frozen
// one too.
func TestProcSignalRestart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := StartApp(ctx, App{Name: "fake", Binary: exe, Env: []string{"STACK_TEST_SERVE=" + addr}, Addr: addr, Dir: t.TempDir(),
		Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	if err := p.Start(ctx); err == nil {
		t.Fatal("Start of a running Proc = nil; want an error")
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal is delivered asynchronously: wait until the kernel says
	// the process is stopped (a loaded machine answered the probe first).
	proc, _ := p.live()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", proc.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "T" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process was not stopped 5 s after SIGSTOP")
		}
	}
	if answers(addr) {
		t.Fatal("a process frozen with SIGSTOP answered")
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if !answers(addr) {
		t.Fatal("no answer after SIGCONT")
	}
	first := p.Pid()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || answers(addr) {
		t.Fatal("still running after Kill")
	}
	if err := p.Signal(syscall.SIGCONT); err == nil {
		t.Error("Signal to a dead process = nil; want an error")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("Start after Kill: %v", err)
	}
	if p.Pid() == first || !answers(addr) {
		t.Fatalf("restart: pid %d (was %d), answers %v", p.Pid(), first, answers(addr))
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before a frozen process exited")
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill of an exited process = %v; want nil", err)
	}
}
