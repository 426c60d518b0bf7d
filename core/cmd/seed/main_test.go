package main

import (
	"testing"
	"time"

	"github.com/onsale/onsale/shared/config"
	"github.com/onsale/onsale/shared/config/configtest"
)

func TestConfig(t *testing.T) {
	env := func(kv map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
	}
	db := map[string]string{"DATABASE_URL": "postgres://x"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
		want OnsaleIn
	}{
		{"no database", nil, nil, false, OnsaleIn{}},
		{"defaults keep the catalog's on-sale time", nil, db, true, OnsaleIn{}},
		{"on sale now", []string{"-onsale-in", "0s"}, db, true, OnsaleIn{Set: true}},
		{"on sale in a minute", []string{"-onsale-in", "1m"}, db, true, OnsaleIn{D: time.Minute, Set: true}},
		{"on sale since a minute ago (the proof tests)", []string{"-onsale-in", "-1m"}, db, true, OnsaleIn{D: -time.Minute, Set: true}},
		{"unparsable on-sale offset", []string{"-onsale-in", "soon"}, db, false, OnsaleIn{}},
		{"no stadium", []string{"-stadium-seats", "0"}, db, false, OnsaleIn{}},
		{"reset from the environment", nil, map[string]string{"DATABASE_URL": "postgres://x", "ONSALE_SEED_RESET": "maybe"}, false, OnsaleIn{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			err := config.Load(&c, tc.args, env(tc.env))
			if (err == nil) != tc.ok {
				t.Fatalf("Load(%v, %v) = %v; want ok=%v", tc.args, tc.env, err, tc.ok)
			}
			if err == nil && c.OnsaleIn != tc.want {
				t.Fatalf("Load(%v).OnsaleIn = %+v; want %+v", tc.args, c.OnsaleIn, tc.want)
			}
		})
	}
}

// docs/configuration.md's table of the seed command's settings is generated from Config.
func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "seed", &Config{})
}
