package stack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An app that exits before it is ready on a port Start picked is started
// again on new ports (startAttempts in all); on a port the caller named, once.
func TestStartRetriesPickedPorts(t *testing.T) {
	bin := t.TempDir()
	count := filepath.Join(bin, "count")
	script := "#!/bin/sh\necho \"$ONSALE_PAYSIM_ADDR\" >>" + count + "\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, Paysim), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr  string
		tries int
	}{{"", startAttempts}, {"127.0.0.1:1", 1}} {
		os.Remove(count)
		_, err := Start(context.Background(), Options{Bin: bin, Dir: t.TempDir(), Apps: []string{Paysim}, PaysimAddr: tc.addr})
		if !errors.Is(err, errExited) {
			t.Fatalf("addr %q: Start = %v, want %v", tc.addr, err, errExited)
		}
		b, _ := os.ReadFile(count)
		addrs := strings.Fields(string(b))
		if len(addrs) != tc.tries {
			t.Fatalf("addr %q: started %d times (%q), want %d", tc.addr, len(addrs), addrs, tc.tries)
		}
		if tc.addr == "" && addrs[0] == addrs[1] {
			t.Errorf("the second try reused the port %s", addrs[0])
		}
	}
}
