package room_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/storetest"
)

// catalog is a stand-in core: the events it knows, and how often it was asked.
type catalog struct {
	events map[int64]gateway.Event
	asked  int
}

func (c *catalog) Event(_ context.Context, id int64) (gateway.Event, error) {
	c.asked++
	ev, ok := c.events[id]
	if !ok {
		return gateway.Event{}, gateway.ErrNoEvent
	}
	return ev, nil
}

// Ensure sets an unknown event up from the core's times, once; an event
// neither the store nor the core knows is ErrNoEvent; a store that cannot
// be reached fails the tick and the room says it is not healthy.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	store := storetest.New()
	onsale := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	cat := &catalog{events: map[int64]gateway.Event{1: {OnsaleAt: onsale, StartsAt: onsale.Add(24 * time.Hour)}}}
	r := room.New(store, cat, slog.New(slog.DiscardHandler))
	v, err := r.Ensure(ctx, 1)
	if err != nil || !v.Dials.OnsaleAt.Equal(onsale) || v.Dials.NewUsersPerMinute != 1000 || v.Fetched.IsZero() {
		t.Fatalf("Ensure(1) = %+v, %v; want the default dials at the core's onsale", v, err)
	}
	if _, err := r.Ensure(ctx, 1); err != nil || cat.asked != 1 {
		t.Fatalf("Ensure again = %v, core asked %d times; want once", err, cat.asked)
	}
	if _, err := r.Ensure(ctx, 2); !errors.Is(err, gateway.ErrNoEvent) {
		t.Fatalf("Ensure(2) = %v; want ErrNoEvent", err)
	}
	if _, ok := r.View(2); ok {
		t.Fatal("an unknown event has a view")
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(run, 10*time.Millisecond) }()
	defer func() { stop(); <-done }()
	waitUntil(t, "a healthy tick", r.Healthy)
	store.SetDown(true)
	waitUntil(t, "the room to see the store gone", func() bool { return !r.Healthy() })
	if v, ok := r.View(1); !ok || !v.Dials.OnsaleAt.Equal(onsale) {
		t.Fatalf("view with the store down = %+v, %v; want the last one kept", v, ok)
	}
	store.SetDown(false)
	waitUntil(t, "the room to recover", r.Healthy)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
