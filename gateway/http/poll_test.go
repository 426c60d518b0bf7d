package http_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	gwhttp "github.com/onsale/onsale/gateway/http"
)

// pollCtx is a steady-state status poll of a fan in line (nobody is let
// in), its queue token as the bearer, ready to be served again and again.
func pollCtx(tb testing.TB) (*fake, *fasthttp.RequestCtx) {
	tb.Helper()
	d := openDials()
	d.NewUsersPerMinute = 0
	f := newFakeWith(tb, d, fakeOpts{edit: func(c *gwhttp.Config) { c.TokenRate, c.TokenBurst = 1e9, 1e9 }})
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	j := f.call("POST", path, "")
	tok, _ := j.body["queue_token"].(string)
	if j.status != 200 || tok == "" {
		tb.Fatalf("join = %d %s", j.status, j.raw)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI(path + "/status")
	ctx.Request.Header.Set("Authorization", "Bearer "+tok)
	f.handler(&ctx) // checked against the document: it stands for the measured polls (bare)
	if ctx.Response.StatusCode() != 200 {
		tb.Fatalf("status = %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	return f, &ctx
}

// A steady-state poll allocates once: the claims the token check returns,
// their strings' bytes with them; none for the path, per label, route
// segment, header, cookie or reply field, and none that stays: nothing
// kept grows with the fans.
func TestStatusPollAllocs(t *testing.T) {
	f, ctx := pollCtx(t)
	// The least of a few measures: AllocsPerRun counts the process's
	// allocations, and an earlier test's goroutines may still be winding
	// down beside this one. (The response is not reset between polls: its
	// body buffer would go back to fasthttp's pool each time, and the
	// pool's refills are fasthttp's, not the handler's.)
	n := math.Inf(1)
	for range 5 {
		n = min(n, testing.AllocsPerRun(200, func() { f.bare(ctx) }))
	}
	if ctx.Response.StatusCode() != 200 || !json200(ctx, gateway.StateWaiting) {
		t.Fatalf("status = %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if n > 1 && !race {
		t.Fatalf("a steady-state poll allocates %v times; want at most 1", n)
	}
}

func json200(ctx *fasthttp.RequestCtx, state string) bool {
	return string(ctx.Response.Header.ContentType()) == "application/json" &&
		len(ctx.Response.Body()) > 0 && string(ctx.Response.Body()[:len(`{"state":"`)+len(state)]) == `{"state":"`+state
}

// BenchmarkStatusPoll is the gateway's own part of a poll (no network):
// routing, the token, the limit, the view, the reply, the metrics.
func BenchmarkStatusPoll(b *testing.B) {
	f, ctx := pollCtx(b)
	b.ReportAllocs()
	for b.Loop() {
		f.bare(ctx)
	}
}
