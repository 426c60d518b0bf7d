package main

import (
	"strings"
	"testing"

	shconfig "github.com/onsale/onsale/shared/config"
)

func TestConfig(t *testing.T) {
	env := func(k string) (string, bool) { return "postgres://x/y", k == "DATABASE_URL" }
	var c config
	if err := shconfig.Load(&c, []string{"-fans", "10"}, env); err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != "postgres://x/y" || c.Fans != 10 || c.Concurrency != 48 || c.Core != "http://127.0.0.1:8081" {
		t.Errorf("config = %+v", c)
	}
	for _, bad := range [][]string{{"-fans", "0"}, {"-concurrency", "many"}} {
		var c config
		if err := shconfig.Load(&c, bad, env); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("Load(%v) = %v; want an error naming %s", bad, err, bad[0])
		}
	}
}
