package main

import (
	"strings"
	"testing"
	"time"

	shconfig "github.com/onsale/onsale/shared/config"
)

func TestConfig(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	var c config
	// The flags deploy/local/bench.sh passes.
	if err := shconfig.Load(&c, []string{"-gateway", "127.0.0.1:18080", "-operator-token", "a", "-gateway-pid", "42", "-out", "x.json"}, none); err != nil {
		t.Fatal(err)
	}
	if c.GatewayPID != 42 || c.Fans != 20000 || c.Conns != 64 || c.Rounds != 3 || c.Duration != 5*time.Second {
		t.Errorf("config = %+v", c)
	}
	for _, bad := range [][]string{{"-conns", "0"}, {"-duration", "5"}, {"-gateway-pid", "-1"}} {
		var c config
		if err := shconfig.Load(&c, bad, none); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("Load(%v) = %v; want an error naming %s", bad, err, bad[0])
		}
	}
}
