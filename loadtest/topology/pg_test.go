package topology

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// startPG starts a cluster for a test on a free port block, stopped at the
// test's end. Without the engines it skips, unless ONSALE_REQUIRE_SERVICES=1
// (make test), where a missing engine is a failure.
func startPG(t *testing.T, o PGOptions) *PG {
	t.Helper()
	if o.Base == 0 {
		base, err := FreeBlock(BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		o.Base = base
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPG(ctx, o)
	if errors.Is(err, ErrNoPGEngine) && os.Getenv("ONSALE_REQUIRE_SERVICES") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

func TestPGStartStop(t *testing.T) {
	p := startPG(t, PGOptions{})
	ctx := context.Background()
	leader, err := p.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sync, err := p.SyncStandby(ctx)
	if err != nil || sync == leader {
		t.Fatalf("SyncStandby = %v, %v; leader %s", sync, err, leader.Name)
	}
	if err := p.CreateDatabase(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s, sync %s, DSN %s", leader.Name, sync.Name, p.DSN("smoke"))
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
