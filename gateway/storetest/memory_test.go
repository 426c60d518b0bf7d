package storetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/storetest"
)

var ctx = context.Background()

// The fake answers Position as the Redis store does (TestPositionAfterLeave
// in gateway/redis): 0 before the draw, ErrEnded for a fan who left or had
// its session, ErrNoEvent for one the draw never knew, the place otherwise.
func TestPositionAfterLeave(t *testing.T) {
	m := storetest.New()
	const ev = 1
	d := gateway.DefaultDials(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	d.PrequeueAt = time.Now().Add(-time.Hour)
	if err := m.InitDials(ctx, ev, d); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"before", "after", "stays"} {
		if r, err := m.Join(ctx, ev, f); err != nil || r.State != gateway.StatePrequeue {
			t.Fatalf("join %s before onsale = %+v, %v", f, r, err)
		}
	}
	if st, _ := m.Leave(ctx, ev, "before"); st != gateway.LeaveLeft {
		t.Fatalf("leave before the draw = %q; want left", st)
	}
	if p, err := m.Position(ctx, ev, "before"); err != nil || p != 0 {
		t.Fatalf("Position(before) before onsale = %d, %v; want 0, nil", p, err)
	}
	d.OnsaleAt = time.Now().Add(-time.Second)
	if _, err := m.PatchDials(ctx, ev, d, []string{"onsale_at"}); err != nil {
		t.Fatal(err)
	}
	if frozen, err := m.Frozen(ctx, ev); err != nil || frozen {
		t.Fatalf("Frozen before any script ran after onsale = %v, %v; want false: asking only reports", frozen, err)
	}
	if p, err := m.Position(ctx, ev, "stays"); err != nil || p < 1 || p > 2 {
		t.Fatalf("Position(stays) = %d, %v; want 1 or 2", p, err)
	}
	if frozen, _ := m.Frozen(ctx, ev); !frozen {
		t.Fatal("Frozen after a position at onsale = false; want true")
	}
	if st, _ := m.Leave(ctx, ev, "after"); st != gateway.LeaveLeft {
		t.Fatalf("leave after the draw = %q; want left", st)
	}
	for _, f := range []string{"before", "after"} {
		if p, err := m.Position(ctx, ev, f); !errors.Is(err, gateway.ErrEnded) {
			t.Errorf("Position(%s) after leaving = %d, %v; want ErrEnded", f, p, err)
		}
	}
	if p, err := m.Position(ctx, ev, "stranger"); !errors.Is(err, gateway.ErrNoEvent) {
		t.Errorf("Position(stranger) = %d, %v; want ErrNoEvent", p, err)
	}
}
