package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/coreclient"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/seatmap"
)

var ctx = context.Background()

// serviceToken is the gateways' service token: their reads of the saved
// dials from the core.
const serviceToken = "admin-secret-of-at-least-32-bytes!"

// adminToken is an operator's session token as the core signs it at
// sign-in (with the key of account tokens): what the operators' API takes.
var adminToken = operatorJWT("ops", "box_office", time.Hour)

// onAdmin says whether a test request goes to the operators' listener
// (AdminHandler): the fans' one does not serve these paths.
func onAdmin(path string) bool { return strings.HasPrefix(path, "/admin") || path == "/metrics" }

type gw struct {
	statsAsked *atomic.Int64 // requests for /stats that reached the core
	store      *redis.Store
	room       *room.Room
	times      *sync.Map // the core's onsale and show times by event path (default: on sale)
	client     *http.Client
	base       string
	event      int64
	cancel     context.CancelFunc
}

// newGateway runs the real handler on an in-memory listener against the
// given Redis address, with a stand-in for the core's event endpoint.
func newGateway(t *testing.T, addrs string, edit func(*gwhttp.Config)) *gw {
	t.Helper()
	store, err := redis.Open(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	statsAsked := new(atomic.Int64)
	saved := &savedDials{m: map[string]map[string]json.RawMessage{}}
	times := new(sync.Map)
	// A core answering with its Cache-Control (core/http/server.go).
	coreSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/dials") {
			saved.serve(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/stats") {
			w.Header().Set("Cache-Control", "public, max-age=1")
			n := statsAsked.Add(1)
			fmt.Fprintf(w, `{"capacity":100,"available":%d,"held":0,"sold":0}`, 100-n)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/404") {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/layout") {
			w.Header().Set("Cache-Control", "public, max-age=86400, immutable")
			id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/events/"), "/layout")
			fmt.Fprintf(w, `{"event_id":%s,"capacity":12,"price_bands":[{"code":"GOLD","name":"Gold","price_paise":250000}],`+
				`"sections":[{"code":"A","rows":[{"label":"1","band":"GOLD","pos":0,"numbers":[1,2,3,4,5,6,7,8,9,10,11,12]}]}]}`, id)
			return
		}
		if at, ok := times.Load(r.URL.Path); ok {
			json.NewEncoder(w).Encode(map[string]any{"onsale_at": at.([2]time.Time)[0], "starts_at": at.([2]time.Time)[1]})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"onsale_at": time.Now().Add(-time.Minute), "starts_at": time.Now().Add(24 * time.Hour)})
	}))
	t.Cleanup(coreSrv.Close)
	key, _ := admission.GenerateKey()
	ring, _ := token.NewRing(key)
	queue, _ := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	log := slog.New(slog.DiscardHandler)
	core := coreclient.New(coreSrv.URL, log)
	rm := room.New(store, core, log).WithRecord(coreclient.NewDials(core, serviceToken))
	cfg := gwhttp.Config{Room: rm, Core: core, Queue: queue, Admit: ring, Operators: operatorVerifier(), Log: log}
	if edit != nil {
		edit(&cfg)
	}
	s, err := gwhttp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	// One in-memory listener, two handlers: the host "admin" stands for the
	// operators' listener (AdminHandler), any other for the fans' one.
	public, admin := s.Handler(), s.AdminHandler()
	go fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Host()) == "admin" {
			admin(ctx)
			return
		}
		public(ctx)
	})
	rctx, cancel := context.WithCancel(ctx)
	go rm.Run(rctx, 50*time.Millisecond)
	t.Cleanup(func() { cancel(); ln.Close() })
	jar := &cookieJar{}
	// Every client's exchanges are checked against the OpenAPI document.
	tr := apiDoc().Transport(t, &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return ln.Dial() }})
	g := &gw{statsAsked: statsAsked, store: store, room: rm, times: times, base: "http://gateway", cancel: cancel,
		client: &http.Client{Jar: jar, Transport: tr}}
	g.event = redistest.Event(t, store)
	return g
}

// savedDials stands in for the core's dials record (core/http/dials.go,
// tested on a real database there): read with the service token, changed
// with an operator's, a JSON object of dials merged per dial.
type savedDials struct {
	mu sync.Mutex
	m  map[string]map[string]json.RawMessage // by path
}

func (d *savedDials) serve(w http.ResponseWriter, r *http.Request) {
	want := serviceToken
	if r.Method == "PATCH" {
		want = adminToken
	}
	if r.Header.Get("Authorization") != "Bearer "+want {
		w.WriteHeader(401)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.m[r.URL.Path]
	if cur == nil {
		cur = map[string]json.RawMessage{}
	}
	if r.Method == "PATCH" {
		var p map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			w.WriteHeader(400)
			return
		}
		for k, v := range p {
			cur[k] = v
		}
		d.m[r.URL.Path] = cur
	}
	json.NewEncoder(w).Encode(map[string]any{"dials": cur})
}

// cookieJar is a minimal per-client jar (net/http/cookiejar wants a host).
type cookieJar struct {
	mu sync.Mutex
	c  map[string]*http.Cookie
}

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.c == nil {
		j.c = map[string]*http.Cookie{}
	}
	for _, c := range cs {
		j.c[c.Name] = c
	}
}

func (j *cookieJar) Cookies(*url.URL) []*http.Cookie {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*http.Cookie
	for _, c := range j.c {
		out = append(out, c)
	}
	return out
}

type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (g *gw) do(t *testing.T, c *http.Client, method, path, body string, hdr ...string) resp {
	t.Helper()
	base := g.base
	if onAdmin(path) {
		base = "http://admin"
	}
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if c == nil {
		c = g.client
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	out := resp{status: r.StatusCode, header: r.Header, raw: string(b)}
	json.Unmarshal(b, &out.body)
	return out
}

// fan returns a client with its own cookies, on the same gateway (and
// the same checks).
func (g *gw) fan() *http.Client {
	return &http.Client{Jar: &cookieJar{}, Transport: g.client.Transport}
}

func (g *gw) dials(t *testing.T, edit func(*gateway.Dials)) {
	t.Helper()
	d, err := g.store.Dials(ctx, g.event)
	if err == gateway.ErrNoEvent {
		d = gateway.DefaultDials(time.Now().Add(-time.Minute), time.Now().Add(24*time.Hour))
	} else if err != nil {
		t.Fatal(err)
	}
	edit(&d)
	ver, err := g.store.SetDials(ctx, g.event, d)
	if err != nil {
		t.Fatal(err)
	}
	g.store.InitDials(ctx, g.event, d) // registers the event
	// Wait for the room to have read the change (an event it does not know
	// yet is read afresh on the first join).
	waitUntil(t, "the room to read the dials", func() bool {
		v, ok := g.room.View(g.event)
		return !ok || v.Dials.Version >= ver
	})
}

// waitUntil polls cond until it holds, failing the test after a generous
// deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *gw) path(suffix string) string { return fmt.Sprintf("/v1/events/%d%s", g.event, suffix) }

func TestFanJourney(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	// Ready once the room has ticked against Redis (503 before: the
	// fake's TestErrorAnswers).
	waitUntil(t, "ready", func() bool {
		r := g.do(t, nil, "GET", "/readyz", "")
		return r.status == 200 && r.body["status"] == "ready"
	})
	g.dials(t, func(d *gateway.Dials) {
		d.PrequeueAt, d.OnsaleAt = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
		d.NewUsersPerMinute, d.TotalActiveUsers = 60000, 100
	})
	fan := g.fan()
	r := g.do(t, fan, "POST", g.path("/queue"), "")
	if r.status != 200 || r.body["state"] != gateway.StatePrequeue || r.body["queue_token"] == nil || r.body["onsale_at"] == nil {
		t.Fatalf("pre-queue join = %d %s", r.status, r.raw)
	}
	// A second tab (same visitor cookie) keeps the one place.
	if again := g.do(t, fan, "POST", g.path("/queue"), ""); again.body["state"] != gateway.StatePrequeue {
		t.Fatalf("second join = %s", again.raw)
	}
	st := g.do(t, fan, "GET", g.path("/queue/status"), "")
	if st.status != 200 || st.body["state"] != gateway.StatePrequeue || st.body["poll_after_ms"].(float64) < 1000 {
		t.Fatalf("pre-queue status = %d %s", st.status, st.raw)
	}
	// Onsale: the place is drawn; the fan is admitted and gets an admit token.
	g.dials(t, func(d *gateway.Dials) { d.OnsaleAt = time.Now().Add(-time.Millisecond) })
	var admit string
	for range 50 {
		st = g.do(t, fan, "GET", g.path("/queue/status"), "")
		if st.body["state"] == gateway.StateAdmitted {
			admit = st.body["admit_token"].(string)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if admit == "" {
		t.Fatalf("never admitted: %s", st.raw)
	}
	jwks := g.do(t, nil, "GET", "/.well-known/jwks.json", "")
	b, _ := json.Marshal(jwks.body)
	keys, err := admission.ParseJWKS(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := admission.NewVerifier(keys).Verify(admit)
	if err != nil || c.EventID != g.event || !strings.HasPrefix(c.Account(), "vis:") {
		t.Fatalf("admit token as the core sees it: %+v, %v", c, err)
	}
	// Later polls answer from the token: admitted, no Redis.
	if st = g.do(t, fan, "GET", g.path("/queue/status"), ""); st.body["state"] != gateway.StateAdmitted {
		t.Fatalf("poll after admission = %s", st.raw)
	}
	m := g.do(t, nil, "GET", "/metrics", "")
	if !strings.Contains(m.raw, `onsale_gateway_polls_total{redis="no",state="admitted"} 1`) {
		t.Errorf("metrics do not show an admitted poll answered without Redis")
	}
}

func TestStatusNeedsNoRedis(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	g.dials(t, func(d *gateway.Dials) { d.NewUsersPerMinute = 0 }) // nobody is admitted
	fan := g.fan()
	if r := g.do(t, fan, "POST", g.path("/queue"), ""); r.status != 200 || r.body["position"] != 1.0 {
		t.Fatalf("join = %d %s", r.status, r.raw)
	}
	for range 8 { // within the per-token burst of 10
		if st := g.do(t, fan, "GET", g.path("/queue/status"), ""); st.body["state"] != gateway.StateWaiting || st.body["ahead"] != 0.0 {
			t.Fatalf("status = %s", st.raw)
		}
	}
	m := g.do(t, nil, "GET", "/metrics", "")
	if !strings.Contains(m.raw, `onsale_gateway_polls_total{redis="no",state="waiting"} 8`) {
		t.Errorf("the waiting polls touched Redis:\n%s", grep(m.raw, "polls_total"))
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Tokens that must not pass: each refused with 401 and a JSON error.
func TestBadTokens(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	g.dials(t, func(d *gateway.Dials) {})
	fan := g.fan()
	r := g.do(t, fan, "POST", g.path("/queue"), "")
	good := r.body["queue_token"].(string)
	other, _ := token.NewQueueSigner([]byte(strings.Repeat("z", 32)))
	forged, _ := other.Sign(g.event, "vis:x", 1, 0, "")
	real, _ := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	wrongEvent, _ := real.Sign(g.event+1, "vis:x", 1, 0, "")
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, token.Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}, Event: g.event, Position: 1}).SignedString([]byte(strings.Repeat("q", 32)))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, token.Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:x", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}, Event: g.event, Position: 1}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + parts[1][:len(parts[1])-2] + "AA." + parts[2]
	for name, tok := range map[string]string{"forged": forged, "tampered": tampered, "wrong event": wrongEvent,
		"expired": expired, "alg none": none, "garbage": "x.y.z", "missing": ""} {
		hdr := []string{}
		if tok != "" {
			hdr = []string{"Authorization", "Bearer " + tok}
		}
		if st := g.do(t, &http.Client{Transport: g.client.Transport}, "GET", g.path("/queue/status"), "", hdr...); st.status != 401 || st.body["error"] != "invalid_queue_token" {
			t.Errorf("%s queue token: %d %s; want 401", name, st.status, st.raw)
		}
	}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", g.path("/queue"), 405}, {"POST", g.path("/queue/status"), 405}, {"POST", "/v1/events/abc/queue", 404},
		{"POST", "/v1/events/404/queue", 404}, {"GET", "/nowhere", 404},
	} {
		if r := g.do(t, g.fan(), tc.method, tc.path, ""); r.status != tc.status || r.body["error"] == nil {
			t.Errorf("%s %s = %d %s; want %d with a JSON error", tc.method, tc.path, r.status, r.raw, tc.status)
		}
	}
}

func TestAdmin(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	g.dials(t, func(d *gateway.Dials) { d.NewUsersPerMinute = 0 })
	path := fmt.Sprintf("/admin/v1/events/%d", g.event)
	if r := g.do(t, nil, "GET", path, ""); r.status != 401 {
		t.Fatalf("admin without a token = %d", r.status)
	}
	if r := g.do(t, nil, "GET", path, "", "Authorization", "Bearer wrong"); r.status != 401 {
		t.Fatalf("admin with a wrong token = %d", r.status)
	}
	auth := []string{"Authorization", "Bearer " + adminToken}
	for _, bad := range []string{`{"new_users_per_minute":-1}`, `{"claim_seconds":1}`, `{"session_seconds":5}`, `{"nope":1}`, `{`, `{"closes_at":"2000-01-01T00:00:00Z"}`} {
		if r := g.do(t, nil, "PATCH", path, bad, auth...); r.status != 400 {
			t.Errorf("PATCH %s = %d %s; want 400", bad, r.status, r.raw)
		}
	}
	if r := g.do(t, nil, "PATCH", path, `{"onsale_at":"2030-01-01T00:00:00Z"}`, auth...); r.status != 409 {
		t.Errorf("moving onsale after the pre-queue froze = %d %s; want 409", r.status, r.raw)
	}
	fan := g.fan()
	g.do(t, fan, "POST", g.path("/queue"), "")
	r := g.do(t, nil, "PATCH", path, `{"paused":true,"new_users_per_minute":6000}`, auth...)
	if r.status != 200 || r.body["dials"].(map[string]any)["paused"] != true {
		t.Fatalf("PATCH paused = %d %s", r.status, r.raw)
	}
	if st := g.do(t, fan, "GET", g.path("/queue/status"), ""); st.body["state"] != gateway.StatePaused || st.body["poll_after_ms"].(float64) > 6250 {
		t.Fatalf("fan status while paused = %s; want paused, polling again within about 5 s", st.raw)
	}
	g.do(t, nil, "PATCH", path, `{"paused":false}`, auth...)
	deadline := time.Now().Add(3 * time.Second)
	for {
		st := g.do(t, fan, "GET", g.path("/queue/status"), "")
		if st.body["state"] == gateway.StateAdmitted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not admitted after resuming: %s", st.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var stats map[string]any
	for range 20 { // the stats are as of the last tick
		time.Sleep(60 * time.Millisecond)
		stats = g.do(t, nil, "GET", path, "", auth...).body["stats"].(map[string]any)
		if stats["active"] == 1.0 {
			break
		}
	}
	if stats["active"] != 1.0 || stats["queue_length"] != 1.0 || stats["queued"] != 0.0 {
		t.Fatalf("stats = %v; want 1 active, 1 in line, none waiting", stats)
	}
}

func TestIdentity(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), func(c *gwhttp.Config) { c.Accounts = accountVerifier() })
	g.dials(t, func(d *gateway.Dials) { d.AccountRequired = true })
	acct := func(sub string, verified bool) string { return "Bearer " + accountJWT(t, sub, verified) }
	if r := g.do(t, g.fan(), "POST", g.path("/queue"), ""); r.status != 401 || r.body["error"] != gateway.EIdentity {
		t.Fatalf("join without identity = %d %s", r.status, r.raw)
	}
	if r := g.do(t, g.fan(), "POST", g.path("/queue"), "", "Authorization", acct("u1", false)); r.status != 403 {
		t.Fatalf("join with an unverified phone = %d %s", r.status, r.raw)
	}
	a := g.do(t, g.fan(), "POST", g.path("/queue"), "", "Authorization", acct("u1", true))
	b := g.do(t, g.fan(), "POST", g.path("/queue"), "", "Authorization", acct("u1", true)) // another device
	if a.status != 200 || b.body["position"] != a.body["position"] {
		t.Fatalf("one account on two devices: %s / %s; want one place", a.raw, b.raw)
	}
	q, err := token.NewQueueSigner([]byte(strings.Repeat("q", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := q.Verify(a.body["queue_token"].(string), g.event); err != nil || tok.Identity() != "acct:u1" {
		t.Fatalf("queue token of an account = %+v, %v; want identity acct:u1", tok, err)
	}
	// The operators turn the dial off: guests join, each with a visitor id
	// the gateway minted.
	g.dials(t, func(d *gateway.Dials) { d.AccountRequired = false })
	if r := g.do(t, g.fan(), "POST", g.path("/queue"), ""); r.status != 200 {
		t.Fatalf("a guest's join with account_required off = %d %s", r.status, r.raw)
	}
}

// Joins past the burst (20) are refused: at a rate too slow for the test's
// speed to matter (slowLimits).
func TestRateLimit(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), slowLimits)
	g.dials(t, func(d *gateway.Dials) {})
	limited := 0
	for range 40 {
		r := g.do(t, g.fan(), "POST", g.path("/queue"), "")
		if r.status == 429 {
			limited++
			if r.header.Get("Retry-After") == "" || r.body["error"] != "rate_limited" {
				t.Fatalf("429 without Retry-After or JSON: %v %s", r.header, r.raw)
			}
		}
	}
	if limited == 0 {
		t.Fatal("40 joins from one address in a row were never limited")
	}
}

func TestSeatmap(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	key := seatmap.Key(g.event)
	if r := g.do(t, nil, "GET", g.path("/seatmap"), ""); r.status != 404 {
		t.Fatalf("seat map before the core wrote one = %d %s", r.status, r.raw)
	}
	// The core's bitmap: seats 0-7 free but seat 2, seats 8-11 taken.
	g.store.Client().Set(ctx, key, []byte{0b11011111, 0b00000000}, time.Minute)
	t.Cleanup(func() { g.store.Client().Del(ctx, key) })
	r := g.do(t, nil, "GET", g.path("/seatmap"), "")
	if r.status != 200 || r.body["available_count"] != 7.0 || r.body["available"] != "3wA=" || r.header.Get("Cache-Control") != "public, max-age=1, stale-while-revalidate=1" {
		t.Fatalf("seat map = %d %v %s", r.status, r.header.Get("Cache-Control"), r.raw)
	}
	// Cached for a second: a change shows after at most that.
	g.store.Client().SetBit(ctx, key, 2, 1)
	if r := g.do(t, nil, "GET", g.path("/seatmap"), ""); r.body["available_count"] != 7.0 {
		t.Fatalf("seat map read Redis again within a second: %s", r.raw)
	}
	time.Sleep(1100 * time.Millisecond)
	if r := g.do(t, nil, "GET", g.path("/seatmap"), ""); r.body["available_count"] != 8.0 {
		t.Fatalf("seat map after a second = %s; want the change", r.raw)
	}
	l := g.do(t, nil, "GET", g.path("/layout"), "")
	if l.status != 200 || l.body["capacity"] != 12.0 || !strings.Contains(l.header.Get("Cache-Control"), "immutable") {
		t.Fatalf("layout = %d %v %s", l.status, l.header, l.raw)
	}
}

// A fan who is done hands the room on: with one session allowed, the fan
// behind waits while the first shops (the control: still waiting after
// several ticks) and is admitted right after the first leaves. Bad leaves
// (no token, a forged one, a non-numeric event, a wrong method) are refused
// with JSON and change nothing.
func TestLeaveHandsTheRoomOn(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	g.dials(t, func(d *gateway.Dials) { d.NewUsersPerMinute, d.TotalActiveUsers = 60000, 1 })
	first, second := g.fan(), g.fan()
	g.do(t, first, "POST", g.path("/queue"), "")
	g.do(t, second, "POST", g.path("/queue"), "")
	waitState := func(c *http.Client, want string, within time.Duration) resp {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			st := g.do(t, c, "GET", g.path("/queue/status"), "")
			if st.body["state"] == want || time.Now().After(deadline) {
				return st
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if st := waitState(first, gateway.StateAdmitted, 3*time.Second); st.body["state"] != gateway.StateAdmitted {
		t.Fatalf("first fan not admitted: %s", st.raw)
	}
	if st := waitState(second, gateway.StateAdmitted, 600*time.Millisecond); st.body["state"] != gateway.StateWaiting {
		t.Fatalf("second fan while the only session is taken = %s; want waiting", st.raw)
	}

	other, _ := token.NewQueueSigner([]byte(strings.Repeat("z", 32)))
	forged, _ := other.Sign(g.event, "vis:x", 1, 0, "")
	bare := &http.Client{Transport: g.client.Transport}
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
	}{
		{"no token", "DELETE", g.path("/queue"), nil, 401},
		{"forged token", "DELETE", g.path("/queue"), []string{"Authorization", "Bearer " + forged}, 401},
		{"non-numeric event", "DELETE", "/v1/events/abc/queue", nil, 404},
		{"wrong method", "PUT", g.path("/queue"), nil, 405},
	} {
		if r := g.do(t, bare, tc.method, tc.path, "", tc.hdr...); r.status != tc.status || r.body["error"] == nil {
			t.Errorf("%s: %d %s; want %d with a JSON error", tc.name, r.status, r.raw, tc.status)
		}
	}
	if st := waitState(second, gateway.StateAdmitted, 300*time.Millisecond); st.body["state"] != gateway.StateWaiting {
		t.Fatalf("after refused leaves the second fan = %s; want still waiting", st.raw)
	}

	r := g.do(t, first, "DELETE", g.path("/queue"), "")
	if r.status != 200 || r.body["outcome"] != string(gateway.LeaveEnded) || !strings.Contains(strings.ToLower(r.header.Get("Set-Cookie")), "max-age=0") {
		t.Fatalf("leave = %d %v %s; want ended and the cookie cleared", r.status, r.header, r.raw)
	}
	if st := waitState(second, gateway.StateAdmitted, 3*time.Second); st.body["state"] != gateway.StateAdmitted {
		t.Fatalf("second fan after the first left = %s; want admitted", st.raw)
	}
	if j := g.do(t, first, "POST", g.path("/queue"), ""); j.status != 410 || j.body["error"] != "session_ended" {
		t.Fatalf("rejoin after leaving = %d %s; want 410 session_ended", j.status, j.raw)
	}
	m := g.do(t, nil, "GET", "/metrics", "")
	if !strings.Contains(m.raw, `onsale_gateway_leaves_total{outcome="ended"} 1`) {
		t.Errorf("metrics do not count the leave:\n%s", grep(m.raw, "leaves_total"))
	}
}

// However many fans ask for the seat counts at once, the core is asked
// about once a second (the control: a second later the count moves on).
func TestCountsCached(t *testing.T) {
	g := newGateway(t, redistest.Addrs(t, false), nil)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := g.do(t, g.fan(), "GET", g.path("/stats"), ""); r.status != 200 || r.body["available"] == nil {
				t.Errorf("stats = %d %s", r.status, r.raw)
			}
		}()
	}
	wg.Wait()
	if n := g.statsAsked.Load(); n < 1 || n > 3 {
		t.Fatalf("50 concurrent requests asked the core %d times; want about once", n)
	}
	first := g.do(t, nil, "GET", g.path("/stats"), "").body["available"]
	time.Sleep(1100 * time.Millisecond)
	if later := g.do(t, nil, "GET", g.path("/stats"), "").body["available"]; later == first {
		t.Fatalf("counts after a second still %v; want a fresh answer", later)
	}
	if r := g.do(t, nil, "GET", "/v1/events/abc/stats", ""); r.status != 404 || r.body["error"] == nil {
		t.Fatalf("stats of a non-numeric event = %d %s", r.status, r.raw)
	}
}

// A fan who joined the pre-queue and left polls after onsale with its old
// token: it is told its session is over (410 session_ended, as a claim
// tells it). The position script once answered such a fan a reply Redis
// cut short, and the store's indexing of it killed the gateway.
func TestLeftFanPollsAfterOnsale(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(map[bool]string{false: "single", true: "cluster"}[cluster], func(t *testing.T) {
			g := newGateway(t, redistest.Addrs(t, cluster), nil)
			g.dials(t, func(d *gateway.Dials) {
				d.PrequeueAt, d.OnsaleAt = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
			})
			fan := g.fan()
			j := g.do(t, fan, "POST", g.path("/queue"), "")
			if j.status != 200 || j.body["state"] != gateway.StatePrequeue {
				t.Fatalf("join before onsale = %d %s", j.status, j.raw)
			}
			bearer := []string{"Authorization", "Bearer " + j.body["queue_token"].(string)}
			if l := g.do(t, fan, "DELETE", g.path("/queue"), "", bearer...); l.status != 200 || l.body["outcome"] != string(gateway.LeaveLeft) {
				t.Fatalf("leave = %d %s; want 200 left", l.status, l.raw)
			}
			g.dials(t, func(d *gateway.Dials) { d.OnsaleAt = time.Now().Add(-time.Second) })
			st := g.do(t, fan, "GET", g.path("/queue/status"), "", bearer...)
			if st.status != 410 || st.body["error"] != gateway.ESessionEnded {
				t.Fatalf("status of a fan who left, after onsale = %d %s; want 410 session_ended", st.status, st.raw)
			}
			if h := g.do(t, nil, "GET", "/healthz", ""); h.status != 200 {
				t.Fatalf("healthz after the poll = %d; want 200", h.status)
			}
		})
	}
}

// A paused sale stays paused when Redis loses the room: the gateway saved
// the operator's change in the core's record and sets the room up again
// from it. The control, a gateway without the record, comes back unpaused
// (the defaults): the loss the record repairs.
func TestPauseSurvivesRedisLoss(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record bool
	}{{"saved in the core", true}, {"control: no record", false}} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, redistest.Addrs(t, false), func(c *gwhttp.Config) {
				if !tc.record {
					c.Room.WithRecord(nil)
				}
			})
			path := fmt.Sprintf("/admin/v1/events/%d", g.event)
			auth := []string{"Authorization", "Bearer " + adminToken}
			if r := g.do(t, nil, "GET", path, "", auth...); r.status != 200 { // the room is set up
				t.Fatalf("GET = %d %s", r.status, r.raw)
			}
			if r := g.do(t, nil, "PATCH", path, `{"paused":true,"new_users_per_minute":4321}`, auth...); r.status != 200 {
				t.Fatalf("PATCH = %d %s", r.status, r.raw)
			}
			// Redis loses the room (a restart without persistence, a failover
			// to an empty replica): every key of the event is gone.
			if err := g.store.Forget(ctx, g.event); err != nil {
				t.Fatal(err)
			}
			g.room.Forget(g.event)
			fan := g.fan()
			if r := g.do(t, fan, "POST", g.path("/queue"), ""); r.status != 200 && r.status != 202 {
				t.Fatalf("join after the loss = %d %s", r.status, r.raw)
			}
			d, err := g.store.Dials(ctx, g.event)
			if err != nil {
				t.Fatal(err)
			}
			if d.Paused != tc.record || (d.NewUsersPerMinute == 4321) != tc.record {
				t.Errorf("after the loss: paused %v, new_users_per_minute %d; want paused %v (record %v)", d.Paused, d.NewUsersPerMinute, tc.record, tc.record)
			}
			if !tc.record {
				return
			}
			if r := g.do(t, nil, "GET", path, "", auth...); r.body["dials"].(map[string]any)["paused"] != true {
				t.Errorf("admin GET after the loss = %s; want paused", r.raw)
			}
			if st := g.do(t, fan, "GET", g.path("/queue/status"), ""); st.body["state"] != gateway.StatePaused {
				t.Errorf("a fan's status after the loss = %s; want paused", st.raw)
			}
		})
	}
}
