package crowd

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// serve answers on a local port with h; it returns the base URL.
func serve(tb testing.TB, h fasthttp.RequestHandler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func TestClient(t *testing.T) {
	base := serve(t, func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/set":
			ctx.Response.Header.Set("Set-Cookie", "q=token1; Path=/; HttpOnly")
			ctx.Response.Header.Add("Set-Cookie", "v=visitor; Path=/")
			ctx.SetBodyString(`{"ok":true}`)
		case "/clear":
			ctx.Response.Header.Set("Set-Cookie", "q=; Path=/; Max-Age=0")
		case "/echo":
			body := ctx.PostBody()
			if len(body) == 0 {
				body = []byte("null")
			}
			ctx.SetBodyString(`{"q":"` + string(ctx.Request.Header.Cookie("q")) + `","v":"` + string(ctx.Request.Header.Cookie("v")) +
				`","auth":"` + string(ctx.Request.Header.Peek("Authorization")) + `","body":` + string(body) + `}`)
		case "/busy":
			ctx.Response.Header.Set("Retry-After", "7")
			ctx.SetStatusCode(503)
		}
	})
	st := NewStats(time.Now(), time.Minute)
	ctx := context.Background()
	fan := NewClient(NewPool(base, 4), 5*time.Second, st, true)
	if r := fan.Do(ctx, "join", "POST", base+"/set", nil); r.Status != 200 || r.Body["ok"] != true {
		t.Fatalf("Do(/set) = %+v", r)
	}
	r := fan.Do(ctx, "status", "POST", base+"/echo", map[string]any{"n": 1}, "Authorization", "Bearer x")
	if r.Body["q"] != "token1" || r.Body["v"] != "visitor" || r.Body["auth"] != "Bearer x" || r.Body["body"].(map[string]any)["n"] != 1.0 {
		t.Errorf("a fan sends its cookies, headers and JSON body: the server saw %v", r.Body)
	}
	fan.Do(ctx, "leave", "GET", base+"/clear", nil)
	if r := fan.Do(ctx, "status", "GET", base+"/echo", nil); r.Body["q"] != "" || r.Body["v"] != "visitor" {
		t.Errorf("a cleared cookie is dropped, the other kept: the server saw %v", r.Body)
	}
	if r := fan.Do(ctx, "layout", "GET", base+"/set", nil); r.Status != 200 || r.Body != nil {
		t.Errorf("Do(layout) = %+v; want the body not decoded", r)
	}

	bot := NewClient(NewPool(base, 4), 5*time.Second, st, false)
	bot.Do(ctx, "bot", "GET", base+"/set", nil)
	if r := bot.Do(ctx, "bot", "GET", base+"/echo", nil); r.Body["q"] != "" {
		t.Errorf("a bot keeps no cookies: the server saw %v", r.Body)
	}
	if r := bot.Do(ctx, "hold", "GET", base+"/busy", nil); r.Status != 503 || r.Retry != 7*time.Second {
		t.Errorf("Do(/busy) = %+v; want 503, Retry-After 7s", r)
	}
	dead := NewClient(NewPool("http://127.0.0.1:1", 1), time.Second, st, false)
	if r := dead.Do(ctx, "join", "GET", "http://127.0.0.1:1/", nil); r.Status != 0 {
		t.Errorf("Do(nothing listening) = %+v; want no status", r)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if r := fan.Do(canceled, "join", "GET", base+"/set", nil); r.Status != 0 {
		t.Errorf("Do(canceled) = %+v; want nothing sent", r)
	}

	if got := st.ErrorsByKind(); len(got) != 2 || got["hold 503"] != 1 || got["transport"] != 1 {
		t.Errorf("errors %v; want one 5xx and one transport error", got)
	}
	if _, _, secs := st.PollRate(); len(secs) != 1 || secs[0].V != 2 {
		t.Errorf("polls %v; want the two status requests", secs)
	}
	n := 0
	for _, l := range st.Latencies() {
		n += l.Count
	}
	if n != 9 {
		t.Errorf("%d requests timed; want 9 (every request sent, none for the canceled one)", n)
	}
}
