package http_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/storetest"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// fake is the real handler over the in-memory store and a stand-in core
// whose answer to each path the test sets: no Redis. Its handlers check
// every exchange against the gateway's OpenAPI document (checked) and fail
// t on drift.
type fake struct {
	t       testing.TB
	store   *storetest.Memory
	room    *room.Room
	handler fasthttp.RequestHandler
	admin   fasthttp.RequestHandler // the operators' listener's
	queue   *token.QueueSigner
	core    atomic.Pointer[map[string]int] // path suffix: status the core answers
	asked   atomic.Pointer[http.Request]   // the last request the core was asked
	asks    atomic.Int64                   // requests that reached the core
	server  *gwhttp.Server
	// bare is the fans' handler unchecked, for the measures (allocations,
	// the heap) that the check would distort; a checked exchange of the
	// same kind stands for them.
	bare fasthttp.RequestHandler
	// unchecked sends the fans' calls to bare: a loop of thousands checks
	// a sample (each check compiles the document's schemas: ~0.5 ms).
	unchecked bool
}

const fakeEvent = 7

func newFake(t testing.TB, d gateway.Dials) *fake {
	t.Helper()
	return newFakeWith(t, d, fakeOpts{})
}

// fakeOpts vary a fake: the room over wrap(the in-memory store), the
// server's logger, a change to the server's Config.
type fakeOpts struct {
	wrap func(*storetest.Memory) gateway.Store
	log  *slog.Logger
	edit func(*gwhttp.Config)
	core http.HandlerFunc // the core's answers, instead of the stand-in's
}

func newFakeWith(t testing.TB, d gateway.Dials, o fakeOpts) *fake {
	t.Helper()
	log, wrap := o.log, o.wrap
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &fake{t: t, store: storetest.New()}
	f.core.Store(&map[string]int{})
	coreSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.asked.Store(r.Clone(context.Background()))
		f.asks.Add(1)
		if o.core != nil {
			o.core(w, r)
			return
		}
		for suffix, code := range *f.core.Load() {
			if strings.HasSuffix(r.URL.Path, suffix) {
				w.WriteHeader(code)
				fmt.Fprintf(w, `{"error":"from_the_core","status":%d}`, code)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if b := coreRead(r.URL.Path); b != "" {
			fmt.Fprint(w, b)
			return
		}
		fmt.Fprint(w, `{"available":1,"capacity":1}`)
	}))
	t.Cleanup(coreSrv.Close)
	if err := f.store.InitDials(ctx, fakeEvent, d); err != nil {
		t.Fatal(err)
	}
	core := coreclient.New(coreSrv.URL, log)
	var store gateway.Store = f.store
	if wrap != nil {
		store = wrap(f.store)
	}
	f.room = room.New(store, core, log)
	key, _ := admission.GenerateKey()
	ring, _ := token.NewRing(key)
	f.queue, _ = token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	cfg := gwhttp.Config{Room: f.room, Core: core, Queue: f.queue, Admit: ring, Accounts: accountVerifier(),
		Operators: operatorVerifier(), Log: log, IPRate: 1000, IPBurst: 1000}
	if o.edit != nil {
		o.edit(&cfg)
	}
	s, err := gwhttp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.handler, f.admin, f.bare, f.server = checked(f.t, s.Handler()), checked(f.t, s.AdminHandler()), s.Handler(), s
	return f
}

// coreRead is the core's answer to a public read of path (the catalog, an
// event, its layout, its counts: core/http's shapes), as the stand-ins of
// the core give it; "" for another path. The event is general admission
// with no times set, so that a room set up from it (room.Ensure) has the
// default dials.
func coreRead(path string) string {
	if path == "/v1/events" {
		return `{"events":[` + coreEvent("7") + `],"next_cursor":"Mg"}`
	}
	rest, ok := strings.CutPrefix(path, "/v1/events/")
	id, sub, _ := strings.Cut(rest, "/")
	if !ok || strings.Trim(id, "0123456789") != "" || id == "" {
		return ""
	}
	switch sub {
	case "":
		return coreEvent(id)
	case "layout":
		return `{"event_id":` + id + `,"capacity":2,"price_bands":[{"code":"GOLD","name":"Gold","price_paise":250000}],` +
			`"sections":[{"code":"A","rows":[{"label":"1","band":"GOLD","pos":0,"numbers":[1,2]}]}]}`
	case "stats":
		return `{"capacity":2,"available":1,"held":1,"sold":0}`
	}
	return ""
}

func coreEvent(id string) string {
	return `{"id":` + id + `,"name":"A show","kind":"concert","venue":{"id":1,"name":"The Hall","city":"Oslo","timezone":"Europe/Oslo"},` +
		`"starts_at":"0001-01-01T00:00:00Z","onsale_at":"0001-01-01T00:00:00Z","seated":false,"capacity":1,"max_per_account":4,` +
		`"hold_seconds":600,"price_bands":null,"status":"published"}`
}

// call runs one request through the handler in memory.
func (f *fake) call(method, path, body string, hdr ...string) resp {
	return f.callFrom("", method, path, body, hdr...)
}

// callFrom is call from the client address from ("": none).
func (f *fake) callFrom(from, method, path, body string, hdr ...string) resp {
	var ctx fasthttp.RequestCtx
	if from != "" {
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.ParseIP(from), Port: 40000}, nil)
	}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		ctx.Request.Header.Set(hdr[i], hdr[i+1])
	}
	switch {
	case onAdmin(path):
		f.admin(&ctx)
	case f.unchecked:
		f.bare(&ctx)
	default:
		f.handler(&ctx)
	}
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
	required := func(d *gateway.Dials) { d.AccountRequired = true }
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
	noKeysYet := func(c *gwhttp.Config) { c.Accounts = account.NewVerifier(nil) }
	otherKey, _ := admission.GenerateKey()
	forged, _, _ := account.NewSigner(otherKey).Account("1", true, time.Hour)
	expired, _, _ := accountSigner.Account("1", true, -time.Minute)
	holdGrant, _ := accountSigner.Sign(jwt.RegisteredClaims{Issuer: account.Issuer, Audience: jwt.ClaimStrings{"onsale-hold"},
		Subject: "vis:x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
	for _, tc := range []struct {
		name         string
		dials        func(*gateway.Dials)
		setup        func(*fake)
		cfg          func(*gwhttp.Config)
		method, path string
		body         string
		hdr          []string
		status       int
		code         string
		retryAfter   bool
		authenticate bool
		detail       string // a detail field the body must carry
		message      string // words the message must contain
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
		{name: "join without an account where one is required", dials: required, method: "POST", path: ev + "/queue",
			status: 401, code: gateway.EIdentity},
		{name: "join with a visitor cookie where an account is required", dials: required, method: "POST", path: ev + "/queue",
			hdr: []string{"Cookie", "onsale_vid=" + visitorCookie(t)}, status: 401, code: gateway.EIdentity},
		{name: "join with a malformed account token", method: "POST", path: ev + "/queue",
			hdr: bearer("x.y.z"), status: 401, code: gateway.EIdentity},
		{name: "join with an account token of another key", method: "POST", path: ev + "/queue",
			hdr: bearer(forged), status: 401, code: gateway.EIdentity},
		{name: "join with an expired account token", dials: required, method: "POST", path: ev + "/queue",
			hdr: bearer(expired), status: 401, code: gateway.EIdentity},
		{name: "join with a hold grant for an account token", dials: required, method: "POST", path: ev + "/queue",
			hdr: bearer(holdGrant), status: 401, code: gateway.EIdentity},
		{name: "join with an unverified phone", method: "POST", path: ev + "/queue", hdr: bearer(accountJWT(t, "1", false)),
			status: 403, code: gateway.EPhoneUnverified},
		{name: "join with an account before the core's keys are known", cfg: noKeysYet, dials: required, method: "POST",
			path: ev + "/queue", hdr: bearer(accountJWT(t, "1", true)), status: 503, code: gateway.EUnavailable, retryAfter: true},
		{name: "admin, a removed dial", method: "PATCH", path: admin, body: `{"pow_difficulty":20}`, hdr: auth, status: 400,
			code: gateway.EInvalid, message: "proof of work was removed"},
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
			f := newFakeWith(t, d, fakeOpts{edit: tc.cfg})
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
			if msg, _ := r.body["message"].(string); !strings.Contains(msg, tc.message) {
				t.Errorf("message %q; want it to say %q", msg, tc.message)
			}
			if tc.detail != "" && r.body[tc.detail] == nil {
				t.Errorf("body %s lacks %q", r.raw, tc.detail)
			}
		})
	}
}

// The core not answering: the proxy, the counts and the core's document
// say core_unavailable (502), the rest of the API is untouched.
func TestCoreDown(t *testing.T) {
	f := &fake{t: t, store: storetest.New()}
	f.store.InitDials(ctx, fakeEvent, openDials())
	log := slog.New(slog.DiscardHandler)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens there now
	core := coreclient.New(dead.URL, log)
	key, _ := admission.GenerateKey()
	ring, _ := token.NewRing(key)
	queue, _ := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	s, err := gwhttp.NewServer(gwhttp.Config{Room: room.New(f.store, core, log), Core: core, Queue: queue, Admit: ring, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	f.handler = checked(f.t, s.Handler())
	for _, path := range []string{"/v1/holds", fmt.Sprintf("/v1/events/%d/stats", fakeEvent), "/openapi/core.yaml"} {
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

// panickingStore is a store whose Join panics, as a bug in a handler's
// path would.
type panickingStore struct{ *storetest.Memory }

func (panickingStore) Join(context.Context, int64, string) (gateway.JoinResult, error) {
	panic("storetest: a bug in Join")
}

// A handler that panics is answered 500 internal through the one error
// writer, logged with its stack and counted, and the server goes on
// serving (fasthttp does not recover: without this the process dies).
func TestHandlerPanic(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	f := newFakeWith(t, openDials(), fakeOpts{wrap: func(m *storetest.Memory) gateway.Store { return panickingStore{m} }, log: log})
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	r := f.call("POST", path, "")
	if r.status != 500 || r.body["error"] != gateway.EInternal || r.body["message"] != "internal error" {
		t.Fatalf("POST %s with a panicking store = %d %s; want 500 internal", path, r.status, r.raw)
	}
	if c := r.header.Get("Content-Type"); c != "application/problem+json" {
		t.Errorf("Content-Type = %q; want application/problem+json (RFC 9457)", c)
	}
	if r.body["type"] != "urn:onsale:problem:internal" || r.body["status"] != 500.0 || r.body["request_id"] == nil ||
		r.body["request_id"] != r.header.Get("X-Request-Id") {
		t.Errorf("body %s; want a problem naming the request id of its X-Request-Id header", r.raw)
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	for _, want := range []string{`"msg":"handler panicked"`, `"route":"join"`, "storetest: a bug in Join", "panickingStore.Join"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	m := f.call("GET", "/metrics", "")
	if want := `onsale_gateway_handler_panics_total{route="join"} 1`; !strings.Contains(m.raw, want) {
		t.Errorf("/metrics lacks %q", want)
	}
	if h := f.call("GET", "/healthz", ""); h.status != 200 {
		t.Errorf("healthz after the panic = %d; want 200", h.status)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// accountSigner stands in for the core's signing key: it signs account
// tokens as the core does; accountVerifier is what a gateway builds from
// the core's JWKS.
var accountSigner = func() *account.Signer {
	k, err := admission.GenerateKey()
	if err != nil {
		panic(err)
	}
	return account.NewSigner(k)
}()

func accountVerifier() *account.Verifier {
	pub := accountSigner.PublicKey()
	return account.NewVerifier(map[string]ed25519.PublicKey{admission.KeyID(pub): pub})
}

// operatorVerifier is the gateway's verifier of operators' tokens: the
// account keys, another audience.
func operatorVerifier() *account.Verifier { return accountVerifier().Sibling(account.OperatorAudience) }

// operatorJWT is an operator's session token as the core signs it.
func operatorJWT(name, role string, ttl time.Duration) string {
	tok, _, err := accountSigner.Operator(name, role, ttl)
	if err != nil {
		panic(err)
	}
	return tok
}

// accountJWT is an account token as the core signs it.
func accountJWT(t testing.TB, sub string, phoneVerified bool) string {
	t.Helper()
	tok, _, err := accountSigner.Account(sub, phoneVerified, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// visitorCookie is a visitor cookie a gateway of the tests' queue secret
// minted.
func visitorCookie(t testing.TB) string {
	t.Helper()
	q, _ := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	_, c := q.NewVisitor()
	return c
}

// A guest's identity is always one a gateway minted: a cookie the client
// made up (an id of its choosing, unsigned, or with a mac copied from
// another id) is replaced by a fresh id, and the chosen id is never the
// identity of a place in line; a minted cookie keeps its id.
func TestVisitorIdentity(t *testing.T) {
	f := newFake(t, openDials())
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	identity := func(r resp) string {
		t.Helper()
		q, err := f.queue.Verify(r.body["queue_token"].(string), fakeEvent)
		if r.status != 200 || err != nil {
			t.Fatalf("join = %d %s (%v)", r.status, r.raw, err)
		}
		return q.Identity()
	}
	minted := func(r resp) string {
		for _, c := range (&http.Response{Header: http.Header{"Set-Cookie": r.header.Values("Set-Cookie")}}).Cookies() {
			if c.Name == "onsale_vid" {
				return c.Value
			}
		}
		return ""
	}
	first := f.call("POST", path, "")
	cookie := minted(first)
	id, _ := f.queue.Visitor(cookie)
	if got := identity(first); cookie == "" || got != "vis:"+id {
		t.Fatalf("first join: identity %q, cookie %q; want vis:<the minted id>", got, cookie)
	}
	// The minted cookie keeps its place and is not replaced.
	again := f.call("POST", path, "", "Cookie", "onsale_vid="+cookie)
	if got := identity(again); got != "vis:"+id || minted(again) != "" || again.body["position"] != first.body["position"] {
		t.Fatalf("join with the minted cookie = %q %s; want the same identity and place, no new cookie", got, again.raw)
	}
	const chosen = "AAAAAAAAAAAAAAAAAAAAAA" // a well-formed id the client picked
	mac := cookie[strings.IndexByte(cookie, '.')+1:]
	for _, tc := range []struct{ name, cookie string }{
		{"a chosen id", chosen},
		{"a chosen id with another id's mac", chosen + "." + mac},
		{"a chosen id with a made-up mac", chosen + ".bm90LWEtbWFj"},
		{"an old unsigned cookie", "legacy-visitor-id-0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.call("POST", path, "", "Cookie", "onsale_vid="+tc.cookie)
			got, fresh := identity(r), minted(r)
			freshID, ok := f.queue.Visitor(fresh)
			if !ok || got != "vis:"+freshID || strings.Contains(got, chosen) || got == "vis:"+id {
				t.Fatalf("join with cookie %q: identity %q, new cookie %q; want a freshly minted id", tc.cookie, got, fresh)
			}
		})
	}
	// An Authorization of another scheme is no bearer: the fan joins as a
	// guest (a site behind a password sends Basic with every request).
	// Control: the same header as a bearer is an account token that does
	// not verify, refused.
	if r := f.call("POST", path, "", "Authorization", "Basic dXM6cHc="); r.status != 200 || !strings.HasPrefix(identity(r), "vis:") {
		t.Fatalf("join with Authorization: Basic = %d %s; want a guest's place", r.status, r.raw)
	}
	if r := f.call("POST", path, "", "Authorization", "Bearer dXM6cHc="); r.status == 200 {
		t.Fatalf("join with a bearer that is no account token = %d %s; want a refusal (the control)", r.status, r.raw)
	}
	// Control: the chosen id holds no place (its status poll is refused
	// for want of a token, and leaving as it has nothing to leave).
	if out, err := f.store.Leave(ctx, fakeEvent, "vis:"+chosen); err != nil || out != gateway.LeaveNone {
		t.Fatalf("Leave(vis:%s) = %v, %v; want none: the chosen id never joined", chosen, out, err)
	}
}

// Every proxied route reaches the core with the fan's address in
// X-Onsale-Client-Addr, whatever the client put there.
func TestProxyClientAddr(t *testing.T) {
	f := newFake(t, openDials())
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/auth/code"}, {"POST", "/v1/auth/verify"}, {"GET", "/v1/me"}, {"PATCH", "/v1/me"},
		{"GET", "/v1/me/bookings"}, {"POST", "/v1/gate/scan"}, {"GET", "/v1/gate/offline"}, {"POST", "/v1/holds"},
		{"GET", "/v1/bookings/3"}, {"POST", "/v1/events/3/holds"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			var req fasthttp.Request
			req.Header.SetMethod(tc.method)
			req.SetRequestURI(tc.path)
			req.Header.Add("X-Onsale-Client-Addr", "10.9.9.9")       // a client's lie
			req.Header.Add("x-onsale-client-addr", "10.8.8.8")       // and another spelling
			req.Header.Add("X-Forwarded-For", "10.7.7.7, 192.0.2.1") // not trusted either
			ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40000}, nil)
			f.asked.Store(nil)
			f.handler(&ctx)
			got := f.asked.Load()
			if got == nil || got.URL.Path != tc.path || got.Method != tc.method {
				t.Fatalf("%s %s reached the core as %v (answer %d %s)", tc.method, tc.path, got, ctx.Response.StatusCode(), ctx.Response.Body())
			}
			if v := got.Header.Values("X-Onsale-Client-Addr"); len(v) != 1 || v[0] != "203.0.113.7" {
				t.Fatalf("X-Onsale-Client-Addr at the core = %q; want [203.0.113.7]", v)
			}
		})
	}
}

// Pages: each route serves its page under the strict CSP; only the gate's
// scanner may use the camera.
func TestPageHeaders(t *testing.T) {
	f := newFake(t, openDials())
	for _, tc := range []struct {
		path, camera string
	}{
		{"/events/7", "camera=()"}, {"/admin/", "camera=()"}, {"/me", "camera=()"}, {"/tickets/12", "camera=()"},
		{"/signin", "camera=()"}, {"/gate", "camera=(self)"},
	} {
		r := f.call("GET", tc.path, "")
		if csp := r.header.Get("Content-Security-Policy"); r.status != 200 || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s = %d, CSP %q; want 200 under the strict CSP", tc.path, r.status, csp)
		}
		if pp := r.header.Get("Permissions-Policy"); !strings.HasPrefix(pp, tc.camera+",") {
			t.Errorf("GET %s: Permissions-Policy %q; want %s", tc.path, pp, tc.camera)
		}
	}
}

// What a fan reads while the room is full: the fan at the front of the
// line is told it waits for a session to end (bound_by active_users, about
// a session's length with one place), not the rate dial's second; the
// admitted fan's reply says when its session ends.
func TestStatusWhenTheRoomIsFull(t *testing.T) {
	d := openDials()
	d.TotalActiveUsers, d.SessionSeconds = 1, 600
	f := newFake(t, d)
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	a, b := f.call("POST", path, ""), f.call("POST", path, "")
	bearerOf := func(r resp) []string { return []string{"Authorization", "Bearer " + r.body["queue_token"].(string)} }
	f.store.Serve(fakeEvent, 1)
	if err := f.room.Refresh(ctx, fakeEvent); err != nil {
		t.Fatal(err)
	}
	in := f.call("GET", path+"/status", "", bearerOf(a)...)
	until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(in.body["admit_expires_at"]))
	if in.body["state"] != gateway.StateAdmitted || err != nil || time.Until(until) < 590*time.Second || time.Until(until) > 601*time.Second {
		t.Fatalf("admitted reply = %s; want admit_expires_at the session's end, ten minutes on", in.raw)
	}
	if err := f.room.Refresh(ctx, fakeEvent); err != nil {
		t.Fatal(err)
	}
	st := f.call("GET", path+"/status", "", bearerOf(b)...)
	if st.body["state"] != gateway.StateWaiting || st.body["ahead"] != 0.0 || st.body["bound_by"] != "active_users" || st.body["eta_seconds"] != 600.0 {
		t.Fatalf("status at the front of a full room = %s; want 0 ahead, bound_by active_users, eta 600 s", st.raw)
	}
	// The admitted fan is done: the next join says its turn is over, and
	// that what it holds or bought is still its own.
	f.call("DELETE", path, "", bearerOf(a)...)
	var vid string
	for _, c := range (&http.Response{Header: http.Header{"Set-Cookie": a.header.Values("Set-Cookie")}}).Cookies() {
		if c.Name == "onsale_vid" {
			vid = c.Value
		}
	}
	again := f.call("POST", path, "", "Cookie", "onsale_vid="+vid)
	if again.status != 410 || again.body["error"] != gateway.ESessionEnded || !strings.Contains(fmt.Sprint(again.body["message"]), "still yours") {
		t.Fatalf("join after the session = %d %s; want 410 session_ended saying holds and tickets stay the fan's", again.status, again.raw)
	}
}

// A page that sends its account token on every request still polls: the
// bearer is not a queue token, so the queue cookie answers.
func TestStatusWithAnAccountBearer(t *testing.T) {
	f := newFake(t, openDials())
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	acct := []string{"Authorization", "Bearer " + accountJWT(t, "7", true)}
	j := f.call("POST", path, "", acct...)
	if j.status != 200 {
		t.Fatalf("join = %d %s", j.status, j.raw)
	}
	cookie := fmt.Sprintf("onsale_q_%d=%s", fakeEvent, j.body["queue_token"])
	if st := f.call("GET", path+"/status", "", append(acct, "Cookie", cookie)...); st.status != 200 || st.body["state"] != gateway.StateWaiting {
		t.Fatalf("status with the account bearer and the queue cookie = %d %s; want 200 waiting", st.status, st.raw)
	}
	// Control: without the cookie the account token alone is no queue token.
	if st := f.call("GET", path+"/status", "", acct...); st.status != 401 || st.body["error"] != gateway.EQueueToken {
		t.Fatalf("status with the account bearer alone = %d %s; want 401 invalid_queue_token", st.status, st.raw)
	}
}

// A page that signed in during the pre-queue gives back the guest's place
// by the guest's bearer token while its cookie already names the account's
// place: that cookie stays. The control: leaving the cookie's own place
// clears it.
func TestLeaveKeepsAnotherPlacesCookie(t *testing.T) {
	f := newFake(t, openDials())
	path := fmt.Sprintf("/v1/events/%d/queue", fakeEvent)
	cookie := fmt.Sprintf("onsale_q_%d", fakeEvent)
	for _, tc := range []struct {
		name      string
		sameplace bool
		cleared   bool
	}{
		{name: "the cookie names another place: kept", sameplace: false, cleared: false},
		{name: "control: the cookie names the place left: cleared", sameplace: true, cleared: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guest, acct := f.call("POST", path, ""), f.call("POST", path, "")
			g, _ := guest.body["queue_token"].(string)
			a, _ := acct.body["queue_token"].(string)
			if g == "" || a == "" {
				t.Fatalf("joins = %s, %s; want queue tokens", guest.raw, acct.raw)
			}
			c := a
			if tc.sameplace {
				c = g
			}
			r := f.call("DELETE", path, "", "Authorization", "Bearer "+g, "Cookie", cookie+"="+c)
			if r.status != 200 {
				t.Fatalf("DELETE = %d %s; want 200", r.status, r.raw)
			}
			cleared := strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), cookie+"=")
			if cleared != tc.cleared {
				t.Fatalf("Set-Cookie %q: cleared = %v; want %v", r.header.Values("Set-Cookie"), cleared, tc.cleared)
			}
		})
	}
}
