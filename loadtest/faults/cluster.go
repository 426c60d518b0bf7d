package faults

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology"
)

// Topology is the HA topology (loadtest/topology) as the runner acts on
// it. An app killed or frozen counts as back once it answers its health
// route and HAProxy's checks have put it back in rotation: when fans and
// webhooks reach it again.
func Topology(t *topology.Topology) Cluster { return topo{t} }

type topo struct{ t *topology.Topology }

func (c topo) member(name string) (*topology.PGMember, error) {
	for _, m := range c.t.PG.Members {
		if m.Name == name {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no PostgreSQL member %q", name)
}

func (c topo) node(name string) (*topology.RedisNode, error) {
	for _, n := range c.t.Redis.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no Redis node %q", name)
}

func (c topo) PGPrimary(ctx context.Context) (string, error) {
	m, err := c.t.PG.Primary(ctx)
	if err != nil {
		return "", err
	}
	return m.Name, nil
}

func (c topo) KillPG(name string) error {
	m, err := c.member(name)
	if err != nil {
		return err
	}
	return c.t.PG.Kill(m)
}

func (c topo) WaitPGPrimary(ctx context.Context, not string) (string, error) {
	m, err := c.member(not)
	if err != nil {
		return "", err
	}
	p, err := c.t.PG.WaitPrimary(ctx, m)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

func (c topo) RestartPG(ctx context.Context, name string) error {
	m, err := c.member(name)
	if err != nil {
		return err
	}
	return c.t.PG.Restart(ctx, m)
}

func (c topo) RedisMasterOf(ctx context.Context, key string) (string, error) {
	n, err := c.t.Redis.MasterOf(ctx, key)
	if err != nil {
		return "", err
	}
	return n.Name, nil
}

func (c topo) KillRedis(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return c.t.Redis.Kill(n)
}

func (c topo) WaitRedisFailover(ctx context.Context, dead string) (string, error) {
	n, err := c.node(dead)
	if err != nil {
		return "", err
	}
	p, err := c.t.Redis.WaitFailover(ctx, n)
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

func (c topo) RestartRedis(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	return c.t.Redis.Restart(ctx, n)
}

func (c topo) Cores() []Proc {
	return c.apps(c.t.Cores, topology.BackendCores, http.DefaultClient)
}

func (c topo) Gateways() []Proc {
	// A gateway takes a connection from 127.0.0.1 only with a PROXY
	// header: its health route is asked from another loopback address.
	return c.apps(c.t.Gateways, topology.BackendGateways, topology.FanClient(topology.FanAddr))
}

func (c topo) apps(ps []*stack.Proc, backend string, client *http.Client) []Proc {
	out := make([]Proc, len(ps))
	for i, p := range ps {
		out[i] = app{p: p, t: c.t, backend: backend, of: len(ps), client: client}
	}
	return out
}

func (c topo) RestartGateways(ctx context.Context) error { return c.t.RestartGateways(ctx) }

// app is one core or gateway of the topology.
type app struct {
	p       *stack.Proc
	t       *topology.Topology
	backend string // its HAProxy backend
	of      int    // servers in it
	client  *http.Client
}

func (a app) Name() string                    { return a.p.Name }
func (a app) Kill() error                     { return a.p.Kill() }
func (a app) Signal(sig syscall.Signal) error { return a.p.Signal(sig) }

func (a app) Start(ctx context.Context) error {
	if err := a.p.Start(ctx); err != nil {
		return err
	}
	return a.t.WaitServers(ctx, a.backend, a.of, 30*time.Second)
}

func (a app) Ready(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, http.MethodGet, "http://"+a.p.Addr+"/readyz", nil)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: readyz %s", a.p.Name, resp.Status)
	}
	return a.t.WaitServers(ctx, a.backend, a.of, 2*time.Second)
}
