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
	// The flags deploy/local/scale.sh passes.
	if err := shconfig.Load(&c, []string{"-gateway", "127.0.0.1:18080", "-admin", "127.0.0.1:18090", "-event", "7",
		"-fans", "2000000", "-redis", "127.0.0.1:16379", "-watch", "gateway=42"}, none); err != nil {
		t.Fatal(err)
	}
	if c.Fans != 2000000 || c.Conns != 64 || c.Mode != "prequeue" || c.PerMinute != 4020 || c.PollDuration != 10*time.Second || c.PerAddress != 0 {
		t.Errorf("config = %+v", c)
	}
	for _, bad := range [][]string{{"-conns", "0"}, {"-fans", "0"}, {"-poll-duration", "5"}, {"-joins-per-address", "-1"}} {
		var c config
		if err := shconfig.Load(&c, bad, none); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("Load(%v) = %v; want an error naming %s", bad, err, bad[0])
		}
	}
}

// TestSourceAddr: every worker's every address is its own (a gateway's
// per-address limit counts each once), and all are loopback from 127.1.0.1.
func TestSourceAddr(t *testing.T) {
	seen := map[string]bool{}
	for w := range 64 {
		for k := range 200 {
			a := sourceAddr(w, k, 64)
			if seen[a] {
				t.Fatalf("sourceAddr(%d, %d, 64) = %s, given twice", w, k, a)
			}
			seen[a] = true
		}
	}
	if a := sourceAddr(0, 0, 64); a != "127.1.0.1" {
		t.Errorf("sourceAddr(0, 0, 64) = %s; want 127.1.0.1", a)
	}
	if a := sourceAddr(3, 1000, 64); !strings.HasPrefix(a, "127.1.") {
		t.Errorf("sourceAddr(3, 1000, 64) = %s; want 127.1.x.y", a)
	}
}
