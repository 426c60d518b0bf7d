package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeCluster records what the runner did to it, in order.
type fakeCluster struct {
	mu       sync.Mutex
	log      []string
	primary  string
	master   string
	cores    []Proc
	gateways []Proc
	failover error // WaitRedisFailover's answer
}

func (c *fakeCluster) did(format string, args ...any) {
	c.mu.Lock()
	c.log = append(c.log, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *fakeCluster) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, "; ")
}

func (c *fakeCluster) PGPrimary(context.Context) (string, error) { return c.primary, nil }
func (c *fakeCluster) KillPG(n string) error                     { c.did("kill pg %s", n); return nil }
func (c *fakeCluster) WaitPGPrimary(_ context.Context, not string) (string, error) {
	c.did("wait primary not %s", not)
	c.primary = "pg2"
	return c.primary, nil
}
func (c *fakeCluster) RestartPG(_ context.Context, n string) error {
	c.did("restart pg %s", n)
	return nil
}
func (c *fakeCluster) RedisMasterOf(_ context.Context, key string) (string, error) {
	c.did("master of %s", key)
	return c.master, nil
}
func (c *fakeCluster) KillRedis(n string) error { c.did("kill redis %s", n); return nil }
func (c *fakeCluster) WaitRedisFailover(_ context.Context, dead string) (string, error) {
	c.did("wait failover of %s", dead)
	return "n4", c.failover
}
func (c *fakeCluster) RestartRedis(_ context.Context, n string) error {
	c.did("restart redis %s", n)
	return nil
}
func (c *fakeCluster) Cores() []Proc    { return c.cores }
func (c *fakeCluster) Gateways() []Proc { return c.gateways }
func (c *fakeCluster) RestartGateways(context.Context) error {
	c.did("restart every gateway")
	return nil
}

type fakeProc struct {
	name string
	c    *fakeCluster
}

func (p fakeProc) Name() string                { return p.name }
func (p fakeProc) Kill() error                 { p.c.did("kill %s", p.name); return nil }
func (p fakeProc) Start(context.Context) error { p.c.did("start %s", p.name); return nil }
func (p fakeProc) Signal(sig syscall.Signal) error {
	p.c.did("%s %s", map[syscall.Signal]string{syscall.SIGSTOP: "SIGSTOP", syscall.SIGCONT: "SIGCONT"}[sig], p.name)
	return nil
}
func (p fakeProc) Ready(context.Context) error { return nil }

type fakeProvider struct {
	c          *fakeCluster
	start, end time.Time
}

func (p *fakeProvider) Outage(_ context.Context, start, end time.Time) error {
	p.start, p.end = start, end
	p.c.did("outage %v", end.Sub(start))
	return nil
}
func (p *fakeProvider) Up(context.Context) bool { return time.Now().After(p.end) }
func (p *fakeProvider) Held(context.Context) (int, error) {
	return 4, nil
}

func newFake() (*fakeCluster, *fakeProvider) {
	c := &fakeCluster{primary: "pg1", master: "n2"}
	c.cores = []Proc{fakeProc{"core1", c}, fakeProc{"core2", c}}
	c.gateways = []Proc{fakeProc{"gw1", c}, fakeProc{"gw2", c}, fakeProc{"gw3", c}}
	return c, &fakeProvider{c: c}
}

var quick = Options{CoreKills: 2, CoreGap: time.Millisecond, CoreDown: time.Millisecond, GatewayDown: time.Millisecond,
	Freeze: 5 * time.Millisecond, Outage: 1100 * time.Millisecond, Quiet: 20 * time.Millisecond}

// Every fault, on its timeline: what the runner does to the topology, in
// order, and what it records.
func TestRunnerAll(t *testing.T) {
	c, p := newFake()
	r := &Runner{Cluster: c, Provider: p, Event: 42, Options: quick}
	steps, _ := Parse("all", 0, 10*time.Millisecond)
	if err := r.Check(steps); err != nil {
		t.Fatal(err)
	}
	onsale := time.Now()
	events := r.Run(context.Background(), onsale, steps)
	want := "kill pg pg1; wait primary not pg1; restart pg pg1; " +
		"master of {evt:42}; kill redis n2; wait failover of n2; restart redis n2; " +
		"restart every gateway; " +
		"kill core1; start core1; kill core1; start core1; " +
		"kill gw1; start gw1; " +
		"outage 1.1s; " +
		"SIGSTOP core2; SIGCONT core2"
	if got := c.Log(); got != want {
		t.Errorf("the runner did\n%s\nwant\n%s", got, want)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.Fault)
		if e.At.IsZero() || e.Back.Before(e.At) || e.Back.IsZero() || e.Err != "" || e.Target == "" || e.Detail == "" {
			t.Errorf("event %+v; want injected, back after it, a target and a detail, no error", e)
		}
		if (e.Fault == PGPrimary || e.Fault == RedisMaster) != !e.Rejoined.IsZero() {
			t.Errorf("event %+v: rejoined %v; want a rejoin for the engines alone", e, e.Rejoined)
		}
	}
	if got := strings.Join(names, ","); got != "pg-primary,redis-master,gateways-restart,core,core,gateway,provider,freeze-core" {
		t.Errorf("events %s", got)
	}
	// Back to back (all due at once): each a quiet time after the one before.
	for i := 1; i < len(events); i++ {
		prev := events[i-1].Back
		if !events[i-1].Rejoined.IsZero() {
			prev = events[i-1].Rejoined
		}
		if events[i].Fault != Core && events[i].At.Sub(prev) < quick.Quiet {
			t.Errorf("%s injected %v after %s was back; want at least %v", events[i].Fault, events[i].At.Sub(prev), events[i-1].Fault, quick.Quiet)
		}
	}
	if p.end.Sub(p.start) != quick.Outage || p.start.Before(onsale) {
		t.Errorf("outage %v to %v; want %v from after onsale", p.start, p.end, quick.Outage)
	}
	if !strings.Contains(events[6].Detail, "4 webhooks held") || events[6].Down() < quick.Outage-time.Second {
		t.Errorf("provider event %+v; want the held webhooks and the outage's length", events[6])
	}
	if !strings.Contains(events[0].Detail, "pg2 promoted") || !strings.Contains(events[3].Detail, "kill 1 of 2") {
		t.Errorf("details %q, %q", events[0].Detail, events[3].Detail)
	}
}

// A step comes at its time after onsale; a sale that ends first leaves
// the rest out; a target that does not come back is an error on its event.
func TestRunnerTimelineAndErrors(t *testing.T) {
	c, p := newFake()
	c.failover = errors.New("no replica")
	r := &Runner{Cluster: c, Provider: p, Event: 1, Options: quick}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	onsale := time.Now()
	events := r.Run(ctx, onsale, []Step{{RedisMaster, 50 * time.Millisecond}, {Gateway, time.Hour}})
	if len(events) != 1 {
		t.Fatalf("events %+v; want the one step before the sale ended", events)
	}
	e := events[0]
	if e.At.Sub(onsale) < 50*time.Millisecond || !e.Back.IsZero() || !strings.Contains(e.Err, "no replica") {
		t.Errorf("event %+v; want injected 50 ms after onsale, never back, the error", e)
	}
	if strings.Contains(c.Log(), "restart redis") {
		t.Errorf("the runner did %s; want no restart of a node whose replica never took over", c.Log())
	}
}

// The single topology has only the provider to fault.
func TestRunnerCheck(t *testing.T) {
	_, p := newFake()
	r := &Runner{Provider: p}
	if err := r.Check([]Step{{ProviderDown, 0}}); err != nil {
		t.Errorf("provider without a cluster: %v", err)
	}
	if err := r.Check([]Step{{ProviderDown, 0}, {Core, 0}}); err == nil || !strings.Contains(err.Error(), "-topology cluster") {
		t.Errorf("core without a cluster: %v; want an error naming -topology cluster", err)
	}
	if err := (&Runner{}).Check([]Step{{ProviderDown, 0}}); err == nil {
		t.Error("provider without its control: no error")
	}
}
