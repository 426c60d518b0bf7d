package http_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/storetest"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/admission"
)

// fake is the real handler over the in-memory store and a stand-in core
// whose answer to each path the test sets: no Redis.
type fake struct {
	store   *storetest.Memory
	room    *room.Room
	handler fasthttp.RequestHandler
	queue   *token.QueueSigner
	core    atomic.Pointer[map[string]int] // path suffix: status the core answers
}

const fakeEvent = 7

func newFake(t *testing.T, d gateway.Dials) *fake {
	t.Helper()
	f := &fake{store: storetest.New()}
	f.core.Store(&map[string]int{})
	coreSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for suffix, code := range *f.core.Load() {
			if strings.HasSuffix(r.URL.Path, suffix) {
				w.WriteHeader(code)
				fmt.Fprintf(w, `{"error":"from_the_core","status":%d}`, code)
				return
			}
		}
		fmt.Fprint(w, `{"available":1,"capacity":1}`)
	}))
	t.Cleanup(coreSrv.Close)
	if err := f.store.InitDials(ctx, fakeEvent, d); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	core := coreclient.New(coreSrv.URL, log)
	f.room = room.New(f.store, core, log)
	key, _ := admission.GenerateKey()
	ring, _ := token.NewRing(key)
	f.queue, _ = token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	s, err := gwhttp.NewServer(gwhttp.Config{Store: f.store, Room: f.room, Core: core, Queue: f.queue, Admit: ring,
		AdminToken: adminToken, Log: log, IPRate: 1000, IPBurst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = s.Handler()
	return f
}

// call runs one request through the handler in memory.
func (f *fake) call(method, path, body string, hdr ...string) resp {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		ctx.Request.Header.Set(hdr[i], hdr[i+1])
	}
	f.handler(&ctx)
	r := resp{status: ctx.Response.StatusCode(), header: http.Header{}, raw: string(ctx.Response.Body())}
	for k, v := range ctx.Response.Header.All() {
		r.header.Add(string(k), string(v))
	}
	json.Unmarshal(ctx.Response.Body(), &r.body)
	return r
}

func openDials() gateway.Dials {
	return gateway.DefaultDials(time.Now().Add(-time.Minute), time.Now().Add(24*time.Hour))
}

// Every refusal the gateway makes: its status, its code, and the headers
// the one writer adds (Retry-After on 429/503, WWW-Authenticate on the
// operators' 401 only). Runs on the in-memory store.
func TestErrorAnswers(t *testing.T) {
	ev := fmt.Sprintf("/v1/events/%d", fakeEvent)
	admin := fmt.Sprintf("/admin/v1/events/%d", fakeEvent)
	auth := []string{"Authorization", "Bearer " + adminToken}
	for _, tc := range []struct {
		name         string
		dials        func(*gateway.Dials)
		setup        func(*fake)
		method, path string
		body         string
		hdr          []string
		status       int
		code         string
		retryAfter   bool
		authenticate bool
		detail       string // a detail field the body must carry
	}{
		{name: "no route", method: "GET", path: "/nowhere", status: 404, code: gateway.ENotFound},
		{name: "non-numeric event", method: "POST", path: "/v1/events/abc/queue", status: 404, code: gateway.ENotFound},
		{name: "unknown event", method: "POST", path: "/v1/events/404/queue", setup: func(f *fake) { f.core.Store(&map[string]int{"/404": 404}) },
			status: 404, code: gateway.ENotFound},
		{name: "join by GET", method: "GET", path: ev + "/queue", status: 405, code: gateway.EMethod},
		{name: "status by POST", method: "POST", path: ev + "/queue/status", status: 405, code: gateway.EMethod},
		{name: "status without a token", method: "GET", path: ev + "/queue/status", status: 401, code: gateway.EQueueToken},
		{name: "leave with a forged token", method: "DELETE", path: ev + "/queue", hdr: []string{"Authorization", "Bearer x.y.z"},
			status: 401, code: gateway.EQueueToken},
		{name: "join, store down", method: "POST", path: ev + "/queue", setup: func(f *fake) { f.store.SetDown(true) },
			status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "readyz before a tick", method: "GET", path: "/readyz", status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "join before the pre-queue", dials: func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
		}, method: "POST", path: ev + "/queue", status: 409, code: gateway.ENotOpen, detail: "opens_at"},
		{name: "join after close", dials: func(d *gateway.Dials) { d.ClosesAt = time.Now().Add(-time.Second) },
			method: "POST", path: ev + "/queue", status: 410, code: gateway.EClosed},
		{name: "join without proof of work", dials: func(d *gateway.Dials) { d.PowDifficulty = 20 },
			method: "POST", path: ev + "/queue", status: 428, code: gateway.EProofOfWork, detail: "challenge"},
		{name: "admin without a token", method: "GET", path: admin, status: 401, code: gateway.EUnauthorized, authenticate: true},
		{name: "admin, wrong method", method: "PUT", path: admin, hdr: auth, status: 405, code: gateway.EMethod},
		{name: "admin, unknown dial", method: "PATCH", path: admin, body: `{"nope":1}`, hdr: auth, status: 400, code: gateway.EInvalid},
		{name: "admin, wrong type", method: "PATCH", path: admin, body: `{"paused":"yes"}`, hdr: auth, status: 400, code: gateway.EInvalid},
		{name: "admin, out of range", method: "PATCH", path: admin, body: `{"claim_seconds":1}`, hdr: auth, status: 400, code: gateway.EInvalid},
		{name: "admin, body too large", method: "PATCH", path: admin, body: `{"x":"` + strings.Repeat("x", 17<<10) + `"}`, hdr: auth,
			status: 413, code: gateway.ETooLarge},
		{name: "admin, onsale after the draw", method: "PATCH", path: admin, body: `{"onsale_at":"2030-01-01T00:00:00Z"}`, hdr: auth,
			status: 409, code: gateway.EOnsalePassed},
		{name: "seat map, none", method: "GET", path: ev + "/seatmap", status: 404, code: gateway.ENotFound},
		{name: "seat map, store down", method: "GET", path: ev + "/seatmap", setup: func(f *fake) { f.store.SetDown(true) },
			status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "layout, the core has none", method: "GET", path: ev + "/layout", setup: func(f *fake) { f.core.Store(&map[string]int{"/layout": 404}) },
			status: 404, code: gateway.ENotFound},
		{name: "layout, the core fails", method: "GET", path: ev + "/layout", setup: func(f *fake) { f.core.Store(&map[string]int{"/layout": 500}) },
			status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "counts, the core is unavailable", method: "GET", path: ev + "/stats", setup: func(f *fake) { f.core.Store(&map[string]int{"/stats": 503}) },
			status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "counts, no such event", method: "GET", path: ev + "/stats", setup: func(f *fake) { f.core.Store(&map[string]int{"/stats": 404}) },
			status: 404, code: gateway.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openDials()
			if tc.dials != nil {
				tc.dials(&d)
			}
			f := newFake(t, d)
			if tc.setup != nil {
				tc.setup(f)
			}
			r := f.call(tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status || r.body["error"] != tc.code || r.body["message"] == nil {
				t.Fatalf("%s %s = %d %s; want %d %q with a message", tc.method, tc.path, r.status, r.raw, tc.status, tc.code)
			}
			if got := r.header.Get("Retry-After") != ""; got != tc.retryAfter {
				t.Errorf("Retry-After %q; want one: %v", r.header.Get("Retry-After"), tc.retryAfter)
			}
			if got := r.header.Get("WWW-Authenticate") != ""; got != tc.authenticate {
				t.Errorf("WWW-Authenticate %q; want one: %v", r.header.Get("WWW-Authenticate"), tc.authenticate)
			}
			if tc.detail != "" && r.body[tc.detail] == nil {
				t.Errorf("body %s lacks %q", r.raw, tc.detail)
			}
		})
	}
}

// The core not answering: the proxy and the counts say core_unavailable
// (502), the rest of the API is untouched.
func TestCoreDown(t *testing.T) {
	f := &fake{store: storetest.New()}
	f.store.InitDials(ctx, fakeEvent, openDials())
	log := slog.New(slog.DiscardHandler)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	core := coreclient.New(dead.URL, log)
	key, _ := admission.GenerateKey()
	ring, _ := token.NewRing(key)
	queue, _ := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	s, err := gwhttp.NewServer(gwhttp.Config{Store: f.store, Room: room.New(f.store, core, log), Core: core, Queue: queue, Admit: ring, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = s.Handler()
	for _, path := range []string{"/v1/holds", fmt.Sprintf("/v1/events/%d/stats", fakeEvent)} {
		if r := f.call("GET", path, ""); r.status != 502 || r.body["error"] != gateway.ECoreUnavailable {
			t.Errorf("GET %s with the core down = %d %s; want 502 core_unavailable", path, r.status, r.raw)
		}
	}
	if r := f.call("GET", "/healthz", ""); r.status != 200 {
		t.Errorf("healthz with the core down = %d", r.status)
	}
}

// A fan's journey on the in-memory store: join, wait, be offered the
// place, be admitted, leave.
func TestJourneyInMemory(t *testing.T) {
	f := newFake(t, openDials())
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	j := f.call("POST", path, "")
	if j.status != 200 || j.body["state"] != gateway.StateWaiting || j.body["position"] != 1.0 {
		t.Fatalf("join = %d %s", j.status, j.raw)
	}
	bearer := []string{"Authorization", "Bearer " + j.body["queue_token"].(string)}
	if st := f.call("GET", path+"/status", "", bearer...); st.body["state"] != gateway.StateWaiting {
		t.Fatalf("status before the offer = %s", st.raw)
	}
	f.store.Serve(fakeEvent, 1)
	if err := f.room.Refresh(ctx, fakeEvent); err != nil {
		t.Fatal(err)
	}
	st := f.call("GET", path+"/status", "", bearer...)
	if st.status != 200 || st.body["state"] != gateway.StateAdmitted || st.body["admit_token"] == nil {
		t.Fatalf("status after the offer = %d %s", st.status, st.raw)
	}
	if l := f.call("DELETE", path, "", bearer...); l.status != 200 || l.body["outcome"] != string(gateway.LeaveEnded) {
		t.Fatalf("leave = %d %s", l.status, l.raw)
	}
	// The same visitor (its cookie) has had its session.
	var vid string
	for _, c := range (&http.Response{Header: http.Header{"Set-Cookie": j.header.Values("Set-Cookie")}}).Cookies() {
		if c.Name == "onsale_vid" {
			vid = c.Value
		}
	}
	if again := f.call("POST", path, "", "Cookie", "onsale_vid="+vid); again.status != 410 || again.body["error"] != gateway.ESessionEnded {
		t.Fatalf("join after leaving = %d %s; want 410 session_ended", again.status, again.raw)
	}
}
