package http_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/valyala/fasthttp"

	gwhttp "github.com/onsale/onsale/gateway/http"
)

// The gateway's memory does not grow with the fans in line: 600,000
// distinct queue tokens (a full-size sale's line), each polled, leave the
// heap where 60,000 left it. Nothing is kept per token or per fan: the
// token is checked without a cache (gateway/token), the per-token limit is
// a table of a fixed size (limit.go). The line itself is the store's
// (Redis), so the tokens are signed here rather than joined. The control:
// the polls are served (each one counted), so the tokens really go
// through the token check and the limit. (main's verified-token cache and
// per-token limiter map: 49 MB after 60,000 tokens, 381 MB after 600,000.)
func TestPollMemoryBounded(t *testing.T) {
	d := openDials()
	d.NewUsersPerMinute = 0
	f := newFakeWith(t, d, fakeOpts{edit: func(c *gwhttp.Config) { c.TokenRate, c.TokenBurst = 2, 10 }})
	pollCtx := func(tok string) *fasthttp.RequestCtx {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI(fmt.Sprintf("/v1/events/%d/queue/status", fakeEvent))
		ctx.Request.Header.Set("Authorization", "Bearer "+tok)
		return &ctx
	}
	if j := f.call("POST", fmt.Sprintf("/v1/events/%d/queue", fakeEvent), ""); j.status != 200 {
		t.Fatalf("join = %d %s", j.status, j.raw) // (reads the room's view in)
	}
	v, _ := f.room.View(fakeEvent)
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	fans := 600_000
	if race {
		fans = 120_000 // the same flat heap, in a race run's time
	}
	served, at := 0, map[int]float64{0: heap()}
	for i := 1; i <= fans; i++ {
		tok, err := f.queue.Sign(fakeEvent, fmt.Sprintf("vis:fan%07d", i), int64(i), 0, v.Dials.Epoch)
		if err != nil {
			t.Fatal(err)
		}
		ctx := pollCtx(tok)
		if i == 1 {
			f.handler(ctx) // checked against the document: it stands for the rest
		} else {
			f.bare(ctx)
		}
		if ctx.Response.StatusCode() == 200 {
			served++
		}
		if i == fans/10 || i == fans {
			at[i] = heap()
		}
	}
	t.Logf("gateway heap: %.1f MB before the polls, %.1f MB after %d distinct tokens, %.1f MB after %d",
		at[0], at[fans/10], fans/10, at[fans], fans)
	if served != fans {
		t.Fatalf("%d of %d polls served; want every one (each token polls once, within its burst)", served, fans)
	}
	if grew := at[fans] - at[fans/10]; grew > 16 {
		t.Fatalf("the heap grew %.1f MB from %d to %d tokens; want it flat (nothing kept per token)", grew, fans/10, fans)
	}
	if at[fans] > 100 {
		t.Fatalf("the heap is %.1f MB after %d tokens; want the fixed tables' 20 MB and the rest", at[fans], fans)
	}
}
