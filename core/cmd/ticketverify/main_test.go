package main

import (
	"slices"
	"testing"

	"github.com/onsale/onsale/shared/config/configtest"
)

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		args, flags, rest []string
	}{
		{[]string{"t1.abc"}, []string{}, []string{"t1.abc"}},
		{[]string{"-pub", "k.pub", "t1.abc"}, []string{"-pub", "k.pub"}, []string{"t1.abc"}},
		{[]string{"-pub=k.pub", "t1.abc", "def"}, []string{"-pub=k.pub"}, []string{"t1.abc", "def"}},
		{[]string{"-pub", "k.pub"}, []string{"-pub", "k.pub"}, nil},
		{[]string{"-pub", "k.pub", "--", "-x"}, []string{"-pub", "k.pub"}, []string{"-x"}},
		{[]string{"-h"}, []string{"-h"}, nil},
	}
	for _, tc := range tests {
		flags, rest := splitArgs(tc.args)
		if !slices.Equal(flags, tc.flags) || !slices.Equal(rest, tc.rest) {
			t.Errorf("splitArgs(%q) = %q, %q; want %q, %q", tc.args, flags, rest, tc.flags, tc.rest)
		}
	}
}

// docs/configuration.md's table of ticketverify's settings is generated from Config.
func TestConfigDoc(t *testing.T) {
	configtest.CheckDoc(t, "../../../docs/configuration.md", "ticketverify", &Config{})
}
