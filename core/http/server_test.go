package http_test

import (
	"bytes"
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
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
)

var ctx = context.Background()

type fixture struct {
	srv    *httptest.Server
	admin  *httptest.Server // the operators' listener (AdminHandler): /metrics
	db     *postgres.DB
	signer *admission.Signer
	event  int64 // the cinema show (seated, 250 seats)
	ga     int64 // the GA show
	other  int64 // another event, for wrong-event tokens

	keys *token.Keys // the core's own tokens (withAccounts)
	sms  *smsSink    // the code SMS (withAccounts)
}

// newFixture starts the server on a fresh database (or dbURL); opts adjust
// the server before it starts.
func newFixture(t *testing.T, dbURL string, opts ...func(*fixture, *corehttp.Server)) *fixture {
	t.Helper()
	if dbURL == "" {
		dbURL = postgrestest.NewURL(t)
	}
	db, err := postgres.Open(ctx, dbURL, postgres.Options{MaxConns: 8, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, signer: admission.NewSigner(priv)}
	mk := func(name, layout string, starts time.Time) int64 {
		id, err := db.CreateEvent(ctx, seed.EventSpec{Name: name, Kind: core.KindMovie, Layout: seed.MustLayout(layout),
			StartsAt: starts, OnsaleAt: time.Now().Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Next year's Christmas Eve: shows still to come, as the catalog lists by default.
	y := fixtureYear()
	f.event = mk("Monsoon Nights", "cinema", time.Date(y, 12, 24, 18, 30, 0, 0, seed.IST))
	f.ga = mk("Open Air", "amphitheatre", time.Date(y, 12, 25, 20, 0, 0, 0, seed.IST))
	f.other = mk("Monsoon Nights", "cinema", time.Date(y, 12, 24, 21, 45, 0, 0, seed.IST))
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(f.signer.PublicKey()),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New()}
	for _, o := range opts {
		o(f, s)
	}
	f.srv = served(t, s.Handler())
	t.Cleanup(f.srv.Close)
	f.admin = served(t, s.AdminHandler())
	t.Cleanup(f.admin.Close)
	return f
}

// fixtureYear is the year of the fixture's shows: next year.
func fixtureYear() int { return time.Now().Year() + 1 }

func (f *fixture) token(t *testing.T, account string, event int64) string {
	t.Helper()
	tok, err := f.signer.Admit(account, event, 0, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func itoa(n int64) string { return jsonString(n) }
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

type response struct {
	status int
	header http.Header
	body   map[string]any
}

func (f *fixture) do(t *testing.T, method, path, token string, body any, hdr ...string) response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := response{status: resp.StatusCode, header: resp.Header}
	ct, want := resp.Header.Get("Content-Type"), "application/json"
	if resp.StatusCode >= 400 {
		want = "application/problem+json" // RFC 9457
	}
	if ct != want {
		t.Fatalf("%s %s = %d: Content-Type %q; want %s", method, path, resp.StatusCode, ct, want)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out.body); err != nil {
		t.Fatalf("%s %s: body is not JSON: %v", method, path, err)
	}
	if id := resp.Header.Get("X-Request-Id"); id == "" {
		t.Fatalf("%s %s: no X-Request-Id in the answer", method, path)
	}
	if resp.StatusCode >= 400 && (out.body["type"] != "urn:onsale:problem:"+fmt.Sprint(out.body["error"]) || out.body["title"] == "" ||
		out.body["status"] != float64(resp.StatusCode) || out.body["detail"] != out.body["message"] || out.body["request_id"] != resp.Header.Get("X-Request-Id")) {
		t.Fatalf("%s %s = %d: %v; want an RFC 9457 problem with the error code, the status and the request id", method, path, resp.StatusCode, out.body)
	}
	return out
}

func holdsPath(ev int64) string { return "/v1/events/" + itoa(ev) + "/holds" }

// TestBadInput sends each malformed request and checks its status and error
// code, then that none of them changed anything.
func TestBadInput(t *testing.T) {
	f := newFixture(t, "")
	good := f.token(t, "alice", f.event)
	pub := f.signer.PublicKey()
	future := time.Now().Add(time.Hour)
	claims := func(aud string, exp time.Time) admission.Claims {
		return admission.Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: admission.Issuer, Audience: jwt.ClaimStrings{aud},
			Subject: "alice", ExpiresAt: jwt.NewNumericDate(exp)}, EventID: f.event}
	}
	expired, _ := f.signer.Sign(claims(admission.Audience, time.Now().Add(-time.Minute)))
	wrongAud, _ := f.signer.Sign(claims("billing", future))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(admission.Audience, future)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	hsTok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(admission.Audience, future))
	hsTok.Header["kid"] = f.signer.KeyID()
	hs, _ := hsTok.SignedString([]byte(pub))
	seats65 := make([]string, 65)
	for i := range seats65 {
		seats65[i] = "AUD-A-1"
	}

	tests := []struct {
		name   string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"malformed JSON", holdsPath(f.event), good, `{"seats":["AUD-A-1"`, 400, core.EInvalid},
		{"not an object", holdsPath(f.event), good, `["AUD-A-1"]`, 400, core.EInvalid},
		{"trailing data", holdsPath(f.event), good, `{"seats":["AUD-A-1"]} {}`, 400, core.EInvalid},
		{"unknown field", holdsPath(f.event), good, `{"seat":["AUD-A-1"]}`, 400, core.EInvalid},
		{"a member named in another case", holdsPath(f.event), good, `{"Seats":["AUD-A-1"]}`, 400, core.EInvalid},
		{"a nested member named in another case", holdsPath(f.event), good, `{"best_available":{"Band":"PRIME","count":1}}`, 400, core.EInvalid},
		{"empty body", holdsPath(f.event), good, ``, 400, core.EInvalid},
		{"body over 64 KiB", holdsPath(f.event), good, `{"seats":["` + strings.Repeat("A", 70<<10) + `"]}`, 413, core.ETooLarge},
		{"empty seat list", holdsPath(f.event), good, `{"seats":[]}`, 400, core.EInvalid},
		{"null seat list", holdsPath(f.event), good, `{"seats":null}`, 400, core.EInvalid},
		{"oversized seat list", holdsPath(f.event), good, map[string]any{"seats": seats65}, 400, core.EInvalid},
		{"empty seat id", holdsPath(f.event), good, `{"seats":[""]}`, 400, core.EInvalid},
		{"unknown event", holdsPath(987654), f.token(t, "alice", 987654), `{"seats":["AUD-A-1"]}`, 404, core.ENotFound},
		{"non-numeric event", "/v1/events/abc/holds", good, `{"seats":["AUD-A-1"]}`, 404, core.ENotFound},
		{"token for another event", holdsPath(f.event), f.token(t, "alice", f.other), `{"seats":["AUD-A-1"]}`, 403, core.EWrongEvent},
		{"expired token", holdsPath(f.event), expired, `{"seats":["AUD-A-1"]}`, 401, core.ETokenExpired},
		{"alg none", holdsPath(f.event), none, `{"seats":["AUD-A-1"]}`, 401, core.EUnauthorized},
		{"HS256 signed with the public key", holdsPath(f.event), hs, `{"seats":["AUD-A-1"]}`, 401, core.EUnauthorized},
		{"wrong audience", holdsPath(f.event), wrongAud, `{"seats":["AUD-A-1"]}`, 401, core.EUnauthorized},
		{"missing token", holdsPath(f.event), "", `{"seats":["AUD-A-1"]}`, 401, core.EUnauthorized},
		{"garbage token", holdsPath(f.event), "x.y.z", `{"seats":["AUD-A-1"]}`, 401, core.EUnauthorized},
		{"zero quantity", holdsPath(f.ga), f.token(t, "alice", f.ga), `{"quantity":0}`, 400, core.EInvalid},
		{"negative quantity", holdsPath(f.ga), f.token(t, "alice", f.ga), `{"quantity":-2}`, 400, core.EInvalid},
		{"quantity not a number", holdsPath(f.ga), f.token(t, "alice", f.ga), `{"quantity":"2"}`, 400, core.EInvalid},
		{"quantity on a seated event", holdsPath(f.event), good, `{"quantity":2}`, 400, core.EInvalid},
		{"seats on a GA event", holdsPath(f.ga), f.token(t, "alice", f.ga), `{"seats":["AUD-A-1"]}`, 400, core.EInvalid},
		{"both seats and best_available", holdsPath(f.event), good, `{"seats":["AUD-A-1"],"best_available":{"band":"PRIME","count":2}}`, 400, core.EInvalid},
		{"nothing asked", holdsPath(f.event), good, `{}`, 400, core.EInvalid},
		{"best_available zero count", holdsPath(f.event), good, `{"best_available":{"band":"PRIME","count":0}}`, 400, core.EInvalid},
		{"best_available unknown band", holdsPath(f.event), good, `{"best_available":{"band":"GOLD","count":2}}`, 400, core.EInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, "POST", tc.path, tc.token, tc.body)
			if r.status != tc.status || r.body["error"] != tc.code {
				t.Fatalf("POST %s = %d %v; want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
			}
			if msg, _ := r.body["message"].(string); msg == "" {
				t.Errorf("%s: no message in %v", tc.name, r.body)
			}
			if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
			}
		})
	}
	var holds, accounts, held int
	err := f.db.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM holds), (SELECT count(*) FROM account_tickets),
		(SELECT count(*) FROM seats WHERE status <> 'AVAILABLE')`).Scan(&holds, &accounts, &held)
	if err != nil || holds+accounts+held != 0 {
		t.Fatalf("bad input changed state: %d holds, %d account rows, %d seats not available (%v)", holds, accounts, held, err)
	}

	// Routes and methods that do not exist also answer in JSON.
	if r := f.do(t, "GET", "/v1/nowhere", "", nil); r.status != 404 || r.body["error"] != core.ENotFound {
		t.Errorf("unknown route = %d %v", r.status, r.body)
	}
	if r := f.do(t, "PUT", holdsPath(f.event), good, `{}`); r.status != 405 || r.body["error"] != "method_not_allowed" {
		t.Errorf("PUT holds = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/events?date=tomorrow", "", nil); r.status != 400 {
		t.Errorf("bad date = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/holds/not-a-uuid/extend", good, nil); r.status != 404 {
		t.Errorf("extend of a malformed hold id = %d %v", r.status, r.body)
	}
	if r := f.do(t, "DELETE", "/v1/holds/00000000-0000-4000-8000-000000000000", good, nil, "If-Match", "soon"); r.status != 400 {
		t.Errorf("bad If-Match = %d %v", r.status, r.body)
	}
}

func TestHoldLifecycle(t *testing.T) {
	f := newFixture(t, "")
	alice, bob := f.token(t, "alice", f.event), f.token(t, "bob", f.event)

	r := f.do(t, "POST", holdsPath(f.event), alice, `{"seats":["AUD-E-3","AUD-E-4"]}`)
	if r.status != 201 || r.body["version"] != 1.0 || r.body["hold_id"] == nil || r.body["expires_at"] == nil {
		t.Fatalf("hold = %d %v", r.status, r.body)
	}
	id := r.body["hold_id"].(string)
	if loc := r.header.Get("Location"); loc != "/v1/holds/"+id {
		t.Errorf("Location = %q", loc)
	}

	r = f.do(t, "POST", holdsPath(f.event), bob, `{"seats":["AUD-E-4","AUD-E-5","AUD-Q-1"]}`)
	if r.status != 409 || r.body["error"] != core.ESeatsTaken {
		t.Fatalf("overlapping hold = %d %v", r.status, r.body)
	}
	if got := jsonString(r.body["seats"]); got != `["AUD-E-4","AUD-Q-1"]` {
		t.Errorf("409 names %s; want the taken and the unknown seat", got)
	}

	if r := f.do(t, "GET", "/v1/holds/"+id, bob, nil); r.status != 403 {
		t.Errorf("GET by another account = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/holds/"+id, f.token(t, "alice", f.other), nil); r.status != 403 || r.body["error"] != core.EWrongEvent {
		t.Errorf("GET with another event's token = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/holds/"+id, alice, nil); r.status != 200 || r.body["status"] != core.HoldActive {
		t.Errorf("GET = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/holds/"+id+"/extend", alice, nil, "If-Match", `"9"`); r.status != 412 {
		t.Errorf("extend with a stale version = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/holds/"+id+"/extend", alice, nil, "If-Match", `"1"`); r.status != 200 || r.body["version"] != 2.0 || r.body["extended"] != true {
		t.Errorf("extend = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/holds/"+id+"/extend", alice, nil); r.status != 409 || r.body["error"] != core.EAlreadyExtended {
		t.Errorf("second extend = %d %v", r.status, r.body)
	}
	if r := f.do(t, "DELETE", "/v1/holds/"+id, bob, nil); r.status != 403 {
		t.Errorf("DELETE by another account = %d %v", r.status, r.body)
	}
	if r := f.do(t, "DELETE", "/v1/holds/"+id, alice, nil); r.status != 200 || r.body["status"] != core.HoldReleased {
		t.Errorf("DELETE = %d %v", r.status, r.body)
	}
	if r := f.do(t, "DELETE", "/v1/holds/"+id, alice, nil); r.status != 409 || r.body["error"] != core.EHoldNotActive {
		t.Errorf("second DELETE = %d %v", r.status, r.body)
	}

	// Limit: 6 per account.
	if r := f.do(t, "POST", holdsPath(f.event), bob, `{"best_available":{"band":"PRIME","count":5}}`); r.status != 201 {
		t.Fatalf("best available = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", holdsPath(f.event), bob, `{"seats":["AUD-A-1","AUD-A-2"]}`); r.status != 422 || r.body["error"] != core.ELimitExceeded || r.body["limit"] != 6.0 {
		t.Errorf("over the limit = %d %v", r.status, r.body)
	}
	// GA.
	if r := f.do(t, "POST", holdsPath(f.ga), f.token(t, "carol", f.ga), `{"quantity":3}`); r.status != 201 || r.body["quantity"] != 3.0 {
		t.Errorf("GA hold = %d %v", r.status, r.body)
	}
}

func TestCatalog(t *testing.T) {
	f := newFixture(t, "")
	list := func(q string) []any {
		r := f.do(t, "GET", "/v1/events"+q, "", nil)
		if r.status != 200 {
			t.Fatalf("GET /v1/events%s = %d %v", q, r.status, r.body)
		}
		return r.body["events"].([]any)
	}
	if n := len(list("")); n != 3 {
		t.Errorf("all events: %d; want 3", n)
	}
	if n := len(list(fmt.Sprintf("?city=mumbai&date=%d-12-24", fixtureYear()))); n != 2 {
		t.Errorf("Mumbai on 24 Dec: %d events; want the two shows", n)
	}
	if n := len(list("?city=Delhi")); n != 0 {
		t.Errorf("Delhi: %d events; want 0", n)
	}
	if n := len(list(fmt.Sprintf("?kind=movie&date=%d-12-25", fixtureYear()))); n != 1 {
		t.Errorf("movies on 25 Dec: %d; want 1", n)
	}
	r := f.do(t, "GET", "/v1/events/"+itoa(f.event), "", nil)
	if r.status != 200 || r.body["capacity"] != 250.0 || r.body["seated"] != true || r.body["max_per_account"] != 6.0 ||
		r.body["hold_seconds"] != 480.0 || len(r.body["price_bands"].([]any)) != 3 {
		t.Fatalf("GET event = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/events/424242", "", nil); r.status != 404 {
		t.Errorf("unknown event = %d", r.status)
	}
}

// proxy is a TCP relay to PostgreSQL that the test can cut and restore, to
// make the database unreachable from the core's point of view.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	up     bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, up: true}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.up {
				p.mu.Unlock()
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() { p.mu.Lock(); p.up = true; p.mu.Unlock() }

// TestFailsClosed cuts the database off: holds get 503 with Retry-After and
// /readyz reports not ready; when it returns, holds work again.
func TestFailsClosed(t *testing.T) {
	direct, err := url.Parse(postgrestest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, direct.Host)
	viaProxy := *direct
	viaProxy.Host = p.ln.Addr().String()
	f := newFixture(t, viaProxy.String())
	tok := f.token(t, "alice", f.event)

	p.cut()
	r := f.do(t, "POST", holdsPath(f.event), tok, `{"seats":["AUD-B-1"]}`)
	if r.status != 503 || r.body["error"] != core.EUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("hold with the database cut off = %d %v (Retry-After %q); want 503 with Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := f.do(t, "GET", "/readyz", "", nil); r.status != 503 {
		t.Errorf("/readyz with the database cut off = %d", r.status)
	}
	if r := f.do(t, "GET", "/healthz", "", nil); r.status != 200 {
		t.Errorf("/healthz = %d; the process itself is healthy", r.status)
	}
	p.restore()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = f.do(t, "POST", holdsPath(f.event), tok, `{"seats":["AUD-B-1"]}`)
		if r.status == 201 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval: the loop waits on the hold itself succeeding
	}
	if r.status != 201 {
		t.Fatalf("hold after the database returned = %d %v", r.status, r.body)
	}
	resp, err := http.Get(f.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`onsale_core_holds_total{outcome="unavailable"} 1`, `onsale_core_holds_total{outcome="created"} 1`,
		`onsale_core_http_request_duration_seconds_bucket{code="201",route="POST /v1/events/{event}/holds"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
