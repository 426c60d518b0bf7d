package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/shared/config"
	"github.com/onsale/onsale/shared/config/configtest"
)

func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "gateway", &Config{})
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
	if err != nil || c.Tick != 100*time.Millisecond || c.IPRate != 5 || c.TokenRate != 2 || len(c.AdmitKeys) != 2 ||
		c.AccountJWKSURL != "" || c.JWKSRefresh != time.Minute {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
	if c, err := load(map[string]string{"ONSALE_ACCOUNT_JWKS_URL": "https://core:1/keys"}, "-jwks-refresh", "5m"); err != nil ||
		c.AccountJWKSURL != "https://core:1/keys" || c.JWKSRefresh != 5*time.Minute {
		t.Errorf("account JWKS = %q every %v, %v", c.AccountJWKSURL, c.JWKSRefresh, err)
	}
	if c, err := load(map[string]string{"ONSALE_REDIS": "", "REDIS_URL": "redis://x:1/2"}); err != nil || c.Redis != "redis://x:1/2" {
		t.Errorf("REDIS_URL = %q, %v; want it used when ONSALE_REDIS is unset", c.Redis, err)
	}
	if c, err := load(map[string]string{"ONSALE_DEBUG_ADDR": "127.0.0.1:6060"}, "-tick", "50ms"); err != nil || c.DebugAddr != "127.0.0.1:6060" || c.Tick != 50*time.Millisecond {
		t.Errorf("debug address and tick = %q %v, %v", c.DebugAddr, c.Tick, err)
	}
	if _, err := load(map[string]string{"ONSALE_HEALTH_WINDOW": "100ms", "ONSALE_TICK": "100ms", "ONSALE_HEALTH": "off"}); err != nil {
		t.Errorf("a short health window with the feedback off = %v; want it accepted (unused)", err)
	}
	// The profiler's old name still works (an old deploy keeps its
	// profiler); the new name wins when both are set.
	if c, err := load(map[string]string{"ONSALE_PPROF_ADDR": "127.0.0.1:6061"}); err != nil || c.DebugAddr != "127.0.0.1:6061" {
		t.Errorf("ONSALE_PPROF_ADDR = %q, %v; want it used as the debug address", c.DebugAddr, err)
	}
	if c, err := load(map[string]string{"ONSALE_PPROF_ADDR": "127.0.0.1:6061", "ONSALE_DEBUG_ADDR": "127.0.0.1:6060"}); err != nil || c.DebugAddr != "127.0.0.1:6060" {
		t.Errorf("both profiler names = %q, %v; want ONSALE_DEBUG_ADDR's", c.DebugAddr, err)
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
		{"unparsable duration", map[string]string{"ONSALE_JWKS_REFRESH": "often"}, nil, "ONSALE_JWKS_REFRESH"},
		// The settings account tokens had before JWKS and the dial: a
		// deploy that still sets them meant something the gateway no
		// longer does, so it stops rather than ignore them.
		{"the old account secret", map[string]string{"ONSALE_ACCOUNT_SECRET": "x"}, nil, "ONSALE_ACCOUNT_SECRET"},
		{"the old identity switch", map[string]string{"ONSALE_REQUIRE_IDENTITY": "true"}, nil, "account_required"},
		{"the old account secret flag", nil, []string{"-account-secret", "x"}, "account-secret"},
		{"short queue secret", map[string]string{"ONSALE_QUEUE_SECRET": "short"}, nil, "ONSALE_QUEUE_SECRET"},
		{"no redis", map[string]string{"ONSALE_REDIS": ""}, nil, "ONSALE_REDIS"},
		{"no admit keys", map[string]string{"ONSALE_ADMIT_KEYS": ""}, nil, "ONSALE_ADMIT_KEYS"},
		{"bad log level", map[string]string{"ONSALE_LOG_LEVEL": "loud"}, nil, "ONSALE_LOG_LEVEL"},
		{"the old profiler flag", nil, []string{"-pprof-addr", "x"}, "pprof-addr"},
		{"a trusted proxy that is not an address", map[string]string{"ONSALE_TRUSTED_PROXIES": "10.0.0.0/8,haproxy"}, nil, "ONSALE_TRUSTED_PROXIES"},
		{"PROXY protocol neither on nor off", map[string]string{"ONSALE_PROXY_PROTOCOL": "v2"}, nil, "ONSALE_PROXY_PROTOCOL"},
		// No one could send the header: every connection would be served
		// as a client's, which is what off means; say so instead.
		{"PROXY protocol with no one trusted", map[string]string{"ONSALE_PROXY_PROTOCOL": "on"}, nil, "ONSALE_TRUSTED_PROXIES"},
		// A window's verdict must reach Redis while the window is the one
		// just closed: a window of one tick would drop every verdict.
		// Whoever rewrites the keys on the wire mints any account token.
		{"a plain http JWKS to a remote host", map[string]string{"ONSALE_ACCOUNT_JWKS_URL": "http://core:1/keys"}, nil, "ONSALE_ACCOUNT_JWKS_URL"},
		{"a core URL that is not http(s)", map[string]string{"ONSALE_CORE_URL": "core:8081"}, nil, "ONSALE_CORE_URL"},
		// Two listeners on one address: the second would not bind.
		{"the operators' listener on the fans' address", map[string]string{"ONSALE_ADMIN_ADDR": "127.0.0.1:8080"}, nil, "ONSALE_ADMIN_ADDR"},
		{"an operators' address without a port", map[string]string{"ONSALE_ADMIN_ADDR": "127.0.0.1"}, nil, "ONSALE_ADMIN_ADDR"},
		{"a health window shorter than three ticks", map[string]string{"ONSALE_HEALTH_WINDOW": "100ms", "ONSALE_TICK": "100ms"}, nil, "ONSALE_HEALTH_WINDOW"},
	} {
		if _, err := load(tc.env, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %s", tc.name, err, tc.want)
		}
	}
}

// The effective configuration is logged with a password in the core's or
// the checkout's URL masked.
func TestConfigLogMasksURLs(t *testing.T) {
	var b bytes.Buffer
	c := Config{CoreURL: "http://gw:hunter2@core:8081", CheckoutURL: "https://shop:hunter3@pay/checkout", QueueSecret: "q"}
	config.Log(slog.New(slog.NewJSONHandler(&b, nil)), &c)
	for _, secret := range []string{"hunter2", "hunter3"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("the config log shows the password %q: %s", secret, b.String())
		}
	}
	if !strings.Contains(b.String(), "core:8081") || !strings.Contains(b.String(), "pay/checkout") {
		t.Errorf("the config log lost the URLs themselves: %s", b.String())
	}
}
