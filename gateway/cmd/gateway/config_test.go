package main

import (
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/shared/config/configtest"
)

func TestReadme(t *testing.T) {
	configtest.CheckReadme(t, "../../../README.md", "gateway", &Config{})
}

// The configuration refuses what it cannot use, naming the setting, and
// means what it says (ONSALE_REQUIRE_IDENTITY=1 is on).
func TestConfig(t *testing.T) {
	base := map[string]string{"ONSALE_REDIS": "redis://127.0.0.1:6379/1", "ONSALE_ADMIT_KEYS": "a.key,b.key",
		"ONSALE_QUEUE_SECRET": strings.Repeat("s", 32)}
	load := func(env map[string]string, args ...string) (Config, error) {
		m := NewMain()
		m.Getenv = func(k string) (string, bool) {
			if v, ok := env[k]; ok {
				return v, true
			}
			v, ok := base[k]
			return v, ok
		}
		err := m.ParseFlags(args)
		return m.Config, err
	}
	c, err := load(nil)
	if err != nil || c.Tick != 100*time.Millisecond || c.IPRate != 5 || c.TokenRate != 2 || len(c.AdmitKeys) != 2 || c.RequireIdentity {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
	if c, err := load(map[string]string{"ONSALE_REQUIRE_IDENTITY": "1", "ONSALE_ACCOUNT_SECRET": "x"}); err != nil || !c.RequireIdentity {
		t.Errorf("ONSALE_REQUIRE_IDENTITY=1 = %v, %v; want on", c.RequireIdentity, err)
	}
	if c, err := load(map[string]string{"ONSALE_REDIS": "", "REDIS_URL": "redis://x:1/2"}); err != nil || c.Redis != "redis://x:1/2" {
		t.Errorf("REDIS_URL = %q, %v; want it used when ONSALE_REDIS is unset", c.Redis, err)
	}
	if c, err := load(map[string]string{"ONSALE_DEBUG_ADDR": "127.0.0.1:6060"}, "-tick", "50ms"); err != nil || c.DebugAddr != "127.0.0.1:6060" || c.Tick != 50*time.Millisecond {
		t.Errorf("debug address and tick = %q %v, %v", c.DebugAddr, c.Tick, err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string // the error names this
	}{
		{"unparsable tick", map[string]string{"ONSALE_TICK": "fast"}, nil, "ONSALE_TICK"},
		{"tick over a second", nil, []string{"-tick", "2s"}, "tick"},
		{"unparsable rate", map[string]string{"ONSALE_IP_RATE": "lots"}, nil, "ONSALE_IP_RATE"},
		{"zero rate", map[string]string{"ONSALE_TOKEN_RATE": "0"}, nil, "ONSALE_TOKEN_RATE"},
		{"unparsable bool", map[string]string{"ONSALE_REQUIRE_IDENTITY": "yes please"}, nil, "ONSALE_REQUIRE_IDENTITY"},
		{"identity without a secret", map[string]string{"ONSALE_REQUIRE_IDENTITY": "true"}, nil, "ONSALE_ACCOUNT_SECRET"},
		{"short queue secret", map[string]string{"ONSALE_QUEUE_SECRET": "short"}, nil, "ONSALE_QUEUE_SECRET"},
		{"no redis", map[string]string{"ONSALE_REDIS": ""}, nil, "ONSALE_REDIS"},
		{"no admit keys", map[string]string{"ONSALE_ADMIT_KEYS": ""}, nil, "ONSALE_ADMIT_KEYS"},
		{"bad log level", map[string]string{"ONSALE_LOG_LEVEL": "loud"}, nil, "ONSALE_LOG_LEVEL"},
		{"the old profiler flag", nil, []string{"-pprof-addr", "x"}, "pprof-addr"},
	} {
		if _, err := load(tc.env, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", tc.name, err, tc.want)
		}
	}
}
