package main

import (
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/shared/config"
)

func TestConfig(t *testing.T) {
	var c Config
	env := map[string]string{"DATABASE_URL": "postgres://x/y"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	// The flags deploy/local/demo.sh passes.
	args := []string{"-gateway", "http://127.0.0.1:18080", "-admin", "http://127.0.0.1:18081", "-paysim", "http://127.0.0.1:18090", "-operator-token", "a", "-event", "1",
		"-fans", "24000", "-per-minute", "6000", "-max-active", "2000", "-session", "90s", "-onsale-in", "10s", "-wall", "10s",
		"-claim", "30s", "-deadline", "4m", "-sweep", "5s", "-report", "/tmp/r/index.html", "-watch", "paysim=1,core=2", "-redis", "redis://127.0.0.1:6379/3"}
	if err := config.Load(&c, args, lookup); err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "postgres://x/y" || c.Fans != 24000 || c.Session != 90*time.Second || c.Bots != 4 || c.Tail != 30*time.Second || c.Conns != 1024 ||
		!c.Accounts || c.Redis != "redis://127.0.0.1:6379/3" {
		t.Errorf("config = %+v", c)
	}
	if err := config.Load(&c, []string{"-admin", "http://127.0.0.1:18081", "-accounts=false"}, lookup); err != nil || c.Accounts {
		t.Errorf("-accounts=false: %v, Accounts %v; want guests", err, c.Accounts)
	}
	// The fault sale's flags (deploy/local/demo.sh with TOPOLOGY=cluster FAULTS=...).
	var fc Config
	args = append(args, "-topology", "cluster", "-dir", "/tmp/x", "-seats", "800", "-hold-seconds", "30", "-faults", "all",
		"-core-env", "ONSALE_SWEEP_INTERVAL=5s", "-core-env=ONSALE_EXTEND_BY=20s", "-gateway-env", "ONSALE_IP_RATE=100000",
		"-paysim-behaviour", `{"fail_rate":0.05,"upi_delay_min":"1s"}`, "-freeze", "20s", "-result", "/tmp/r/result.txt")
	if err := config.Load(&fc, args, lookup); err != nil {
		t.Fatal(err)
	}
	if fc.Topology != "cluster" || fc.Seats != 800 || len(fc.CoreEnv) != 2 || fc.CoreEnv[1] != "ONSALE_EXTEND_BY=20s" || fc.Faults != "all" ||
		fc.Freeze != 20*time.Second || fc.Outage != 30*time.Second || fc.Gateways != 3 || fc.Cores != 2 || fc.PaysimBehaviour == "" {
		t.Errorf("config = %+v", fc)
	}
	for _, bad := range [][]string{{"-fans", "-1"}, {"-onsale-in", "0s"}, {"-session", "soon"}, {"-conns", "0"}, {"-event", "0"},
		{"-topology", "mesh"}, {"-faults", "disk"}, {"-faults", "core@soon"}, {"-gateways", "10"},
		{"-admin", ""}} { // the dials are set on the operators' listener: without it the sale cannot start
		var c Config
		if err := config.Load(&c, bad, lookup); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("Load(%v) = %v; want an error naming %s", bad, err, bad[0])
		}
	}
}
