package room_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
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

// hangingStore's Events never answers by itself: only its context's end
// releases it (a store that stopped answering).
type hangingStore struct{ *storetest.Memory }

func (hangingStore) Events(ctx context.Context) ([]int64, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Listing the events has a deadline, as a tick does: a store that hangs
// does not stop the ticker.
func TestRunListDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := storetest.New()
	d := gateway.DefaultDials(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	if err := store.InitDials(ctx, 1, d); err != nil {
		t.Fatal(err)
	}
	r := room.New(hangingStore{store}, &catalog{}, nil)
	v, err := r.Ensure(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, 10*time.Millisecond) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if now, _ := r.View(1); now.Fetched.After(v.Fetched) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tick within 5 s of Run: the ticker waits on a store that does not answer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// A room made without a logger discards: a failed tick, which it logs,
// does not panic.
func TestNilLogger(t *testing.T) {
	ctx := context.Background()
	store := storetest.New()
	d := gateway.DefaultDials(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	if err := store.InitDials(ctx, 1, d); err != nil {
		t.Fatal(err)
	}
	r := room.New(store, &catalog{}, nil)
	if _, err := r.Ensure(ctx, 1); err != nil {
		t.Fatal(err)
	}
	store.SetDown(true)
	rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	r.Run(rctx, 10*time.Millisecond) // ticks fail, and are logged
	if r.Healthy() {
		t.Error("Healthy() after failed ticks = true")
	}
}

// partStore fails the ticks of one event: a Redis Cluster master failing
// over takes only its slots' events away.
type partStore struct {
	gateway.Store
	down int64
}

func (s partStore) Tick(ctx context.Context, event int64, factor float64, lease gateway.Lease) (gateway.Tick, error) {
	if event == s.down {
		return gateway.Tick{}, errors.New("CLUSTERDOWN the slot is not served")
	}
	return s.Store.Tick(ctx, event, factor, lease)
}

// One event's failed tick keeps the gateway ready (its load balancer keeps
// sending it the fans of every other event); every event's failing does
// not. The control is TestNilLogger's room, whose only event fails.
func TestReadyThroughOneEventsOutage(t *testing.T) {
	ctx := context.Background()
	mem := storetest.New()
	d := gateway.DefaultDials(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	for _, ev := range []int64{1, 2} {
		if err := mem.InitDials(ctx, ev, d); err != nil {
			t.Fatal(err)
		}
	}
	r := room.New(partStore{Store: mem, down: 2}, &catalog{}, nil)
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	r.Run(rctx, 10*time.Millisecond)
	if !r.Healthy() {
		t.Fatal("Healthy() = false with one of two events ticking; want ready")
	}
	if _, ok := r.View(1); !ok {
		t.Fatal("no view of the event that ticks")
	}
}

// stuckStore's ticks of one event never return until the test releases
// them, whatever their deadline (a master that stopped answering), and it
// counts the other events' ticks.
type stuckStore struct {
	gateway.Store
	stuck   int64
	release chan struct{}
	ticks   atomic.Int64
}

func (s *stuckStore) Tick(ctx context.Context, event int64, factor float64, lease gateway.Lease) (gateway.Tick, error) {
	if event == s.stuck {
		<-s.release
		return gateway.Tick{}, errors.New("i/o timeout")
	}
	s.ticks.Add(1)
	return s.Store.Tick(ctx, event, factor, lease)
}

// countHealth counts the factor's reads.
type countHealth struct{ reads atomic.Int64 }

func (h *countHealth) Factor(context.Context) float64 { h.reads.Add(1); return 0.5 }

// One event whose tick hangs does not hold up the other events' ticks nor
// the health's reads: they once ran one after another, each waiting for
// the one before. (Before, this test waited for ever at the stuck tick.)
func TestTicksThroughAStuckEvent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mem := storetest.New()
	d := gateway.DefaultDials(time.Now().Add(time.Hour), time.Now().Add(48*time.Hour))
	for _, ev := range []int64{1, 2} {
		if err := mem.InitDials(ctx, ev, d); err != nil {
			t.Fatal(err)
		}
	}
	store := &stuckStore{Store: mem, stuck: 2, release: make(chan struct{})}
	h := &countHealth{}
	r := room.New(store, &catalog{}, nil).WithHealth(h)
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, 5*time.Millisecond) }()
	defer func() { close(store.release); cancel(); <-done }()
	waitUntil(t, "twenty ticks of the event that answers while the other's hangs", func() bool { return store.ticks.Load() >= 20 })
	waitUntil(t, "twenty reads of the factor", func() bool { return h.reads.Load() >= 20 })
	if !r.Healthy() {
		t.Fatal("Healthy() = false while one of two events ticks; want ready")
	}
	if v, _ := r.View(1); v.Tick.Factor != 0.5 {
		t.Fatalf("event 1 ticked at factor %v; want the health's 0.5", v.Tick.Factor)
	}
}
