package room_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
	"github.com/onsale/onsale/gateway/room"
)

// watched is one gateway's view of the store: it counts, per event, the
// ticks that ran the admission bucket (the tick is the caller's own:
// Tick.Ticker is its lease's holder), and the reads of another's last
// tick; it can lose the store (down: every tick and read fails, as across
// a partition), and be blind to how long a lease has left (as a store
// that does not say).
type watched struct {
	gateway.Store
	down  atomic.Bool
	blind atomic.Bool
	mu    sync.Mutex
	ran   map[int64]int
	reads map[int64]int
}

func watch(s gateway.Store) *watched {
	return &watched{Store: s, ran: map[int64]int{}, reads: map[int64]int{}}
}

var errCut = errors.New("dial tcp: connection refused")

func (w *watched) Tick(ctx context.Context, ev int64, f float64, lease gateway.Lease) (gateway.Tick, error) {
	if w.down.Load() {
		return gateway.Tick{}, errCut
	}
	tk, err := w.Store.Tick(ctx, ev, f, lease)
	if err == nil && tk.Ticker == lease.Holder && tk.DialsVersion >= 0 {
		w.mu.Lock()
		w.ran[ev]++
		w.mu.Unlock()
	}
	return tk, err
}

func (w *watched) LastTick(ctx context.Context, ev int64) (gateway.Tick, bool, error) {
	if w.down.Load() {
		return gateway.Tick{}, false, errCut
	}
	w.mu.Lock()
	w.reads[ev]++
	w.mu.Unlock()
	tk, ok, err := w.Store.LastTick(ctx, ev)
	if w.blind.Load() {
		tk.LeaseLeft = 0
	}
	return tk, ok, err
}

func (w *watched) readsOf(ev int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reads[ev]
}

// Watch passes the store's notices on (gateway.Watcher), lost or not.
func (w *watched) Watch(ctx context.Context, changed func(gateway.Notice)) {
	if wt, ok := w.Store.(gateway.Watcher); ok {
		wt.Watch(ctx, changed)
	}
}

func (w *watched) count(ev int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ran[ev]
}

// gw is a gateway's room over its watched store, running until stop.
type gw struct {
	w    *watched
	room *room.Room
	stop func()
}

func startGateway(t *testing.T, s *redis.Store, lease bool) *gw {
	t.Helper()
	w := watch(s)
	r := room.New(w, &catalog{}, nil)
	if !lease {
		r.WithoutLease()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, 10*time.Millisecond) }()
	var once sync.Once
	g := &gw{w: w, room: r, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(g.stop)
	return g
}

// liveEvent is an event in its sale window, a line of fans waiting.
func liveEvent(t *testing.T, s *redis.Store) int64 {
	t.Helper()
	ev := redistest.Event(t, s)
	d := gateway.DefaultDials(time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
	d.NewUsersPerMinute = 600
	if err := s.InitDials(context.Background(), ev, d); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Join(context.Background(), ev, "fan-"+string(rune('a'+i%26))+string(rune('a'+i/26))); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

// Two gateways over one Redis: one runs the event's admission bucket, the
// other only reads its ticks, and both views follow them. The control,
// two rooms without the lease (every gateway ticking, as before the
// lease), shows that the harness sees a second ticker when there is one.
func TestOneTickerAtATime(t *testing.T) {
	eachRedis(t, func(t *testing.T, s *redis.Store) {
		t.Run("lease", func(t *testing.T) {
			ev := liveEvent(t, s)
			a, b := startGateway(t, s, true), startGateway(t, s, true)
			waitUntil(t, "forty ticks of the event", func() bool { return a.w.count(ev)+b.w.count(ev) >= 40 })
			lead, other := a, b
			if b.w.count(ev) > a.w.count(ev) {
				lead, other = b, a
			}
			if n := other.w.count(ev); n != 0 {
				t.Fatalf("both gateways ran the admission bucket (%d and %d ticks); want one ticker", lead.w.count(ev), n)
			}
			waitUntil(t, "the other gateway to follow the ticker's ticks", func() bool {
				v, ok := other.room.View(ev)
				lv, _ := lead.room.View(ev)
				return ok && v.Tick.Ticker == lead.room.Holder() && v.Tick.Serving > 0 && !v.Tick.Now.Before(lv.Tick.Now.Add(-time.Second))
			})
		})
		t.Run("control: without the lease both gateways tick", func(t *testing.T) {
			ev := liveEvent(t, s)
			a, b := startGateway(t, s, false), startGateway(t, s, false)
			waitUntil(t, "the harness to see two tickers", func() bool { return a.w.count(ev) > 0 && b.w.count(ev) > 0 })
		})
	})
}

// The ticking gateway loses Redis: the other takes the event over once
// the lease lapses, and the first, back, only follows (never a second
// ticker). Then the ticker stops: it gives the lease up as it stops (no
// waiting for it to lapse), and the first takes over.
func TestTickLeaseFailover(t *testing.T) {
	eachRedis(t, func(t *testing.T, s *redis.Store) {
		ev := liveEvent(t, s)
		a, b := startGateway(t, s, true), startGateway(t, s, true)
		waitUntil(t, "a ticker", func() bool { return a.w.count(ev)+b.w.count(ev) > 0 })
		lead, other := a, b
		if b.w.count(ev) > 0 {
			lead, other = b, a
		}

		lead.w.down.Store(true)
		waitUntil(t, "the other gateway to take over from one that lost Redis", func() bool { return other.w.count(ev) > 0 })
		lead.w.down.Store(false)
		waitUntil(t, "the first gateway, back, to follow the new ticker", func() bool {
			v, _ := lead.room.View(ev)
			return v.Tick.Ticker == other.room.Holder()
		})
		ran, n := lead.w.count(ev), other.w.count(ev)
		waitUntil(t, "twenty more ticks by the new ticker", func() bool { return other.w.count(ev) >= n+20 })
		if lead.w.count(ev) != ran {
			t.Fatalf("the old ticker, back, ran %d ticks while the new one held the lease; want none", lead.w.count(ev)-ran)
		}

		other.stop()
		if tk, ok, err := s.LastTick(context.Background(), ev); err != nil || ok && tk.Ticker == other.room.Holder() {
			t.Fatalf("the lease after its holder stopped: %+v, %v, %v; want given up", tk, ok, err)
		}
		waitUntil(t, "the first gateway to take over from one that stopped", func() bool { return lead.w.count(ev) > ran })
		waitUntil(t, "its view to show its own tick", func() bool {
			v, _ := lead.room.View(ev)
			return v.Tick.Ticker == lead.room.Holder()
		})
	})
}

// A gateway following another's ticks reads the holder's last tick about
// once a lease (when the lease, unless renewed, would lapse), not at
// every tick: a tenth of the holder's ticks at most (a lease is a second,
// the tick 10 ms here). The control, a follower whose store does not say
// how long the lease has left, reads at every tick, as every follower did.
func TestFollowerReadsOnceALease(t *testing.T) {
	eachRedis(t, func(t *testing.T, s *redis.Store) {
		for _, blind := range []bool{false, true} {
			t.Run(fmt.Sprintf("blind=%v", blind), func(t *testing.T) {
				ev := liveEvent(t, s)
				a := startGateway(t, s, true)
				waitUntil(t, "a ticker", func() bool { return a.w.count(ev) > 0 })
				b := startGateway(t, s, true)
				b.w.blind.Store(blind)
				waitUntil(t, "the other gateway to follow", func() bool {
					v, _ := b.room.View(ev)
					return v.Tick.Ticker == a.room.Holder()
				})
				ticks, reads := a.w.count(ev), b.w.readsOf(ev)
				waitUntil(t, "two hundred ticks", func() bool { return a.w.count(ev) >= ticks+200 })
				ticks, reads = a.w.count(ev)-ticks, b.w.readsOf(ev)-reads
				if b.w.count(ev) != 0 {
					t.Fatalf("the follower ran %d ticks; want none", b.w.count(ev))
				}
				switch {
				case !blind && reads*10 > ticks:
					t.Fatalf("the follower read the tick %d times in %d ticks; want a tenth at most", reads, ticks)
				case blind && reads*2 < ticks:
					t.Fatalf("control: the blind follower read the tick %d times in %d ticks; want about every tick", reads, ticks)
				}
				t.Logf("%d ticks, %d reads by the follower", ticks, reads)
			})
		}
	})
}
