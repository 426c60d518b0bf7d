package crowd

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestWatch: the operators read their screens once a second, record the
// series and the checker's samples (at the gateway's as_of), and at the
// first reading with nothing available or held tell the line it is sold
// out, once.
func TestWatch(t *testing.T) {
	asOf := time.Now().Add(-50 * time.Millisecond).UTC().Truncate(time.Millisecond)
	var mu sync.Mutex
	var patches []string
	base := serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Request.Header.Peek("Authorization")) != "Bearer tok" && string(ctx.Path()) == "/admin/v1/events/7" {
			ctx.SetStatusCode(401)
			return
		}
		var v any
		switch string(ctx.Method()) + " " + string(ctx.Path()) {
		case "GET /admin/v1/events/7":
			v = map[string]any{"stats": map[string]any{"as_of": asOf.Format(time.RFC3339Nano), "queued": 5, "active": 3, "serving": 40,
				"offered_unclaimed": 2, "admitted_per_minute": 60}, "dials": map[string]any{"new_users_per_minute": 100, "total_active_users": 10}}
		case "PATCH /admin/v1/events/7":
			mu.Lock()
			patches = append(patches, string(ctx.PostBody()))
			mu.Unlock()
			v = map[string]any{}
		case "GET /v1/events/7/stats":
			v = map[string]any{"available": 0, "held": 0, "sold": 12}
		}
		b, _ := json.Marshal(v)
		ctx.SetBody(b)
	})
	st := NewStats(time.Now(), time.Minute)
	st.Held.Add(4)
	ops := NewOperators(base, "tok", 7, st)
	onsale := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var s Screens
	var readings []Reading
	done := make(chan struct{})
	go func() {
		defer close(done)
		ops.Watch(ctx, onsale, &s, func(r Reading) {
			readings = append(readings, r)
			if len(readings) == 2 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("two readings did not come in 30 s")
	}
	cancel()
	if len(readings) != 2 || !readings[0].SoldOutNow || readings[1].SoldOutNow || readings[0].Tick != 0 || readings[1].Tick != 1 {
		t.Fatalf("readings %+v; want two, the first telling the line it is sold out", readings)
	}
	p := readings[0].Point
	if p.Queued != 5 || p.Active != 3 || p.Serving != 40 || p.Admitted != 60 || p.Dial != 100 || p.Cap != 10 || p.Sold != 12 || p.Holds != 4 || p.T <= 0 {
		t.Errorf("point %+v", p)
	}
	samples := s.Samples()
	if len(samples) != 2 || !samples[0].At.Equal(asOf) || samples[0].Offers != 2 || samples[0].Serving != 40 || samples[0].Cap != 10 {
		t.Errorf("samples %+v; want two, at the gateway's as_of %v", samples, asOf)
	}
	if len(s.Series()) != 2 || s.SoldOut() <= 0 || s.AllTaken() != s.SoldOut() {
		t.Errorf("series %d, sold out after %v, all taken after %v", len(s.Series()), s.SoldOut(), s.AllTaken())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(patches) != 1 || patches[0] != `{"sold_out":true}` {
		t.Errorf("PATCHes %q; want one sold_out", patches)
	}
}
