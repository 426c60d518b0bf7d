package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/config/configtest"
)

// parse loads a Main from env (name=value pairs) and args.
func parse(tb testing.TB, env map[string]string, args ...string) (*Main, error) {
	tb.Helper()
	m := NewMain()
	m.lookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return m, m.ParseFlags(args)
}

func TestConfigDefaults(t *testing.T) {
	m, err := parse(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.Addr != "127.0.0.1:18090" || c.APIKey != "sk_test_paysim" || c.WebhookSecret != "whsec_test_paysim" || c.Control ||
		c.WebhookURL != "http://127.0.0.1:8081/v1/webhooks/payments" || c.ShutdownTimeout != 10*time.Second {
		t.Errorf("defaults = %+v", c)
	}
	if got, want := c.Behaviour.behaviour(), paysim.DefaultBehaviour(); !reflect.DeepEqual(got, want) {
		t.Errorf("default behaviour = %+v; want paysim.DefaultBehaviour() %+v", got, want)
	}
}

// TestConfigLayers: the behaviour JSON overlays the defaults (absent fields
// keep theirs), the knobs' flags override the JSON, -outage repeats.
func TestConfigLayers(t *testing.T) {
	m, err := parse(t, map[string]string{
		"ONSALE_PAYSIM_CONTROL":   "1",
		"ONSALE_PAYSIM_ADDR":      "127.0.0.1:0",
		"ONSALE_PAYSIM_BEHAVIOUR": `{"upi_delay_min":"2s","upi_delay_max":"4s","fail_rate":0.05}`,
	}, "-upi-delay-max", "9s", "-outage", "+1m/30s", "-outage", "2030-01-01T00:00:00Z/2030-01-01T00:10:00Z")
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	b := c.Behaviour.behaviour()
	if !c.Control || c.Addr != "127.0.0.1:0" {
		t.Errorf("env: %+v", c)
	}
	if b.UPIDelayMin != 2*time.Second || b.UPIDelayMax != 9*time.Second || b.FailRate != 0.05 || b.UPISlowDelay != 2*time.Minute {
		t.Errorf("behaviour = %+v; want min 2s (JSON), max 9s (flag), fail 0.05 (JSON), slow delay 2m (default)", b)
	}
	if len(b.Outages) != 2 || b.Outages[0].End.Sub(b.Outages[0].Start) != 30*time.Second ||
		time.Until(b.Outages[0].Start) < 55*time.Second || !b.Outages[1].Start.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("outages = %+v", b.Outages)
	}
}

// TestConfigRefuses: a bad value stops the binary with a message naming the
// setting, never silently becomes a default.
func TestConfigRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string // in the error
	}{
		{"control not a boolean", map[string]string{"ONSALE_PAYSIM_CONTROL": "yes"}, nil, "ONSALE_PAYSIM_CONTROL"},
		{"behaviour not JSON", map[string]string{"ONSALE_PAYSIM_BEHAVIOUR": "{fail_rate:1"}, nil, "ONSALE_PAYSIM_BEHAVIOUR"},
		{"behaviour out of range", map[string]string{"ONSALE_PAYSIM_BEHAVIOUR": `{"fail_rate":2}`}, nil, "fail"},
		{"bad log level", map[string]string{"ONSALE_LOG_LEVEL": "loud"}, nil, "ONSALE_LOG_LEVEL"},
		{"fail rate above 1", nil, []string{"-fail-rate", "1.5"}, "-fail-rate"},
		{"unparsable duration", nil, []string{"-upi-delay-min", "soon"}, "-upi-delay-min"},
		{"delays crossed", nil, []string{"-upi-delay-min", "10s"}, "upi_delay_min must not exceed upi_delay_max"},
		{"no shutdown grace", nil, []string{"-shutdown-timeout", "0s"}, "-shutdown-timeout"},
		{"bad outage", nil, []string{"-outage", "+1m"}, "-outage"},
		{"stray argument", nil, []string{"extra"}, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseFlags = %v; want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestConfigDoc(t *testing.T) {
	var c Config
	configtest.CheckDoc(t, "../../../docs/configuration.md", "paysim", &c)
}
