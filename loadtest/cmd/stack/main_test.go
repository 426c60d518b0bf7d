package main

import (
	"slices"
	"testing"

	shconfig "github.com/onsale/onsale/shared/config"
)

func noEnv(string) (string, bool) { return "", false }

// -paysim-env / -core-env / -gateway-env add one KEY=VALUE per use, commas
// and all; bad values stop the command.
func TestConfig(t *testing.T) {
	var c config
	if err := shconfig.Load(&c, []string{"-core-env", "A=1", "-core-env", "B=2,3", "-apps", "core"}, noEnv); err != nil {
		t.Fatal(err)
	}
	if want := []string{"A=1", "B=2,3"}; !slices.Equal(c.CoreEnv, want) {
		t.Errorf("CoreEnv = %q, want %q", c.CoreEnv, want)
	}
	if !slices.Equal(c.Apps, []string{"core"}) || c.Ready.Seconds() != 60 {
		t.Errorf("Apps = %q, Ready = %v", c.Apps, c.Ready)
	}
	for _, args := range [][]string{{"-apps", "core,nope"}, {"-apps", ""}, {"-core-env", "A"}, {"-ready-timeout", "0s"}} {
		var c config
		if err := shconfig.Load(&c, args, noEnv); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}
