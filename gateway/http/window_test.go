package http_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// A loop of joins of catalog events outside their sale window (far ahead,
// or long over) is answered not_open or closed from the catalog and
// writes nothing to Redis: no room, nothing added to onsale:events. The
// control: a join of an event on sale sets its room up. And a fan still
// polling once its event's window is over, and the room retired, is told
// closed, again writing nothing.
func TestJoinOutsideWindow(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), func(c *gwhttp.Config) { c.IPRate, c.IPBurst = 1000, 1000 })
	now := time.Now()
	for i := range 30 {
		id := redistest.Event(t, g.store)
		path, want := fmt.Sprintf("/v1/events/%d", id), gateway.ENotOpen
		g.times.Store(path, [2]time.Time{now.Add(24 * time.Hour), now.Add(48 * time.Hour)})
		if i%2 == 1 {
			g.times.Store(path, [2]time.Time{now.Add(-48 * time.Hour), now.Add(-24 * time.Hour)})
			want = gateway.EClosed
		}
		if r := g.do(t, g.fan(), "POST", path+"/queue", ""); r.body["error"] != want {
			t.Fatalf("join of event %d = %d %v; want %s", id, r.status, r.raw, want)
		}
		if n := keysOf(t, g, id); n != 0 {
			t.Fatalf("join of event %d outside its window wrote %d keys; want none", id, n)
		}
	}

	fan := g.fan()
	if r := g.do(t, fan, "POST", g.path("/queue"), ""); r.status != 200 {
		t.Fatalf("join on sale = %d %s", r.status, r.raw)
	}
	if keysOf(t, g, g.event) < 2 {
		t.Fatal("the join of the event on sale set no room up")
	}
	// The sale ended three hours ago: the room is retired, its keys gone.
	g.times.Store(g.path(""), [2]time.Time{now.Add(-4 * time.Hour), now.Add(-3 * time.Hour)})
	d := gateway.Dials{PrequeueAt: now.Add(-5 * time.Hour), OnsaleAt: now.Add(-4 * time.Hour), ClosesAt: now.Add(-3 * time.Hour)}
	if _, err := g.store.PatchDials(ctx, g.event, d, []string{"prequeue_at", "onsale_at", "closes_at"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the room retired", func() bool { _, ok := g.room.View(g.event); return !ok && keysOf(t, g, g.event) == 0 })
	if r := g.do(t, fan, "GET", g.path("/queue/status"), ""); r.body["error"] != gateway.EClosed {
		t.Fatalf("status after the sale = %d %s; want closed", r.status, r.raw)
	}
	if n := keysOf(t, g, g.event); n != 0 {
		t.Fatalf("status after the sale wrote %d keys; want none", n)
	}
}

// keysOf counts the event's room keys in Redis, and its entry in the list
// of rooms the gateways tick.
func keysOf(t *testing.T, g *gw, ev int64) int64 {
	t.Helper()
	var n int64
	for _, k := range []string{"dials", "pre", "ids", "frozen", "seq", "bucket", "offers", "active", "claims"} {
		c, err := g.store.Client().Exists(ctx, fmt.Sprintf("{evt:%d}:%s", ev, k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		n += c
	}
	if ok, _ := g.store.Client().SIsMember(ctx, "onsale:events", ev).Result(); ok {
		n++
	}
	return n
}
