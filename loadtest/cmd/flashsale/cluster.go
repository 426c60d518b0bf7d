package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology"
)

// demoEvent is the seeded event the demo sells: the stadium concert.
const demoEvent = "Arijit Singh Live"

// startCluster starts the HA topology in this process (-topology cluster)
// under c.Dir, seeds the demo's catalogue into its database with bin/seed
// (as deploy/local/demo.sh does for the single topology), and points the
// sale at it: its fans' frontend, payment simulator, admin token,
// database, Redis Cluster and the stadium concert's id.
func startCluster(ctx context.Context, c *Config) (*topology.Topology, error) {
	base := c.Base
	if base == 0 {
		var err error
		if base, err = topology.FreeBlock(topology.BlockSize); err != nil {
			return nil, err
		}
	}
	var paysimEnv []string
	if c.PaysimBehaviour != "" {
		paysimEnv = append(paysimEnv, "ONSALE_PAYSIM_BEHAVIOUR="+c.PaysimBehaviour)
	}
	fmt.Printf("flashsale: starting the HA topology in %s (ports %d-%d): PostgreSQL under Patroni, a Redis Cluster, HAProxy, %d gateways, %d cores…\n",
		c.Dir, base, base+topology.BlockSize-1, c.Gateways, c.Cores)
	t0 := time.Now()
	t, err := topology.Start(ctx, topology.Options{Dir: c.Dir, Base: base, Gateways: c.Gateways, Cores: c.Cores, Bin: c.Bin,
		GatewayEnv: c.GatewayEnv, CoreEnv: c.CoreEnv, PaysimEnv: paysimEnv})
	if err != nil {
		return nil, fmt.Errorf("start the topology: %w", err)
	}
	fmt.Printf("  up in %.0f s: fans at %s, cores behind %s, paysim %s\n", time.Since(t0).Seconds(), t.GatewayURL, t.CoreURL, t.PaysimURL)
	event, err := seed(ctx, c, t.DatabaseURL)
	if err != nil {
		t.Stop()
		return nil, err
	}
	c.Gateway, c.Paysim, c.OperatorToken, c.DatabaseURL, c.Redis, c.Event = t.GatewayURL, t.PaysimURL, t.OperatorToken, t.DatabaseURL, t.Redis.Addrs(), event
	c.Admin = t.GatewayAdminURLs[0] // the operators' dials and screens: any gateway's listener (they share Redis)
	if c.Watch == "" {
		c.Watch = watchList(t)
	}
	return t, nil
}

// seed runs bin/seed against dsn: the demo catalogue, the stadium at
// c.Seats seats with holds of c.HoldSeconds, on sale in a minute (the sale
// sets its own onsale); it returns the stadium concert's id.
func seed(ctx context.Context, c *Config, dsn string) (int64, error) {
	bin, err := stack.Binary(c.Bin, "seed")
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, bin, "-database-url", dsn, "-json", "-onsale-in", "1m",
		"-stadium-seats", strconv.Itoa(c.Seats), "-concert-hold-seconds", strconv.Itoa(c.HoldSeconds))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("seed: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	os.WriteFile(filepath.Join(c.Dir, "seed.json"), out.Bytes(), 0o644)
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var ev struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Name == demoEvent {
			fmt.Printf("  seeded: the stadium at %d seats, holds of %d s; event %d\n", c.Seats, c.HoldSeconds, ev.ID)
			return ev.ID, nil
		}
	}
	return 0, fmt.Errorf("seed: no %q in its output", demoEvent)
}

// watchList names the topology's apps and HAProxy for the CPU chart
// (name=pid,...): the processes started at the beginning (a restarted one
// is not followed).
func watchList(t *topology.Topology) string {
	var parts []string
	add := func(name string, p *stack.Proc) {
		if pid := p.Pid(); pid > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", name, pid))
		}
	}
	add("haproxy", t.HAProxy)
	add("paysim", t.Paysim)
	for _, p := range t.Cores {
		add(p.Name, p)
	}
	for _, p := range t.Gateways {
		add(p.Name, p)
	}
	return strings.Join(parts, ",")
}
