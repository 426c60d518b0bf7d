package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// The fans' listener (Handler) does not serve the operators' API, its page
// or /metrics: they answer 404 there, even with the right token; the
// operators' listener (AdminHandler) serves them and the public routes.
func TestAdminOnItsOwnListener(t *testing.T) {
	f := newFake(t, openDials())
	auth := []string{"Authorization", "Bearer " + adminToken}
	admin := fmt.Sprintf("/admin/v1/events/%d", fakeEvent)
	for _, tc := range []struct{ method, path string }{
		{"GET", admin}, {"PATCH", admin}, {"GET", "/metrics"}, {"GET", "/admin"}, {"GET", "/admin/"},
	} {
		body := func(v string) string { // a PATCH's: a GET has none
			if tc.method != "PATCH" {
				return ""
			}
			return v
		}
		ctx := request(tc.method, tc.path, body(`{"paused":true}`), auth...)
		f.handler(ctx)
		if st, code := answer(ctx); st != 404 || code != gateway.ENotFound {
			t.Errorf("fans' listener: %s %s = %d %s; want 404 not_found", tc.method, tc.path, st, code)
		}
		ctx = request(tc.method, tc.path, body(`{"paused":false}`), auth...)
		f.admin(ctx)
		if st := ctx.Response.StatusCode(); st != 200 {
			t.Errorf("operators' listener: %s %s = %d %s; want 200", tc.method, tc.path, st, ctx.Response.Body())
		}
	}
	if d, _ := f.store.Dials(context.Background(), fakeEvent); d.Paused {
		t.Errorf("a PATCH to the fans' listener paused the sale")
	}
	// The operators' page reads the catalog and the counts: served there too.
	ctx := request("GET", fmt.Sprintf("/v1/events/%d/queue/status", fakeEvent), "")
	f.admin(ctx)
	if st, code := answer(ctx); st != 401 || code != gateway.EQueueToken {
		t.Errorf("operators' listener, public route = %d %s; want the public route's own 401", st, code)
	}
}

// The operators' API takes operators' session tokens only: an account
// token, an expired operator token, one signed by another key, and the
// old shared admin token are refused.
func TestAdminTakesOperatorTokens(t *testing.T) {
	f := newFake(t, openDials())
	other, _ := admission.GenerateKey()
	foreign, _ := account.NewSigner(other).Sign(account.OperatorClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: account.Issuer,
		Audience: jwt.ClaimStrings{account.OperatorAudience}, Subject: "mallory", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"operator", adminToken, 200},
		{"sale desk", operatorJWT("desk", "sale_desk", time.Hour), 200},
		{"account token", accountJWT(t, "42", true), 401},
		{"expired operator token", operatorJWT("ops", "admin", -time.Minute), 401},
		{"another key's operator token", foreign, 401},
		{"a shared secret", "admin-secret-of-at-least-32-bytes!", 401},
	} {
		ctx := request("GET", fmt.Sprintf("/admin/v1/events/%d", fakeEvent), "", "Authorization", "Bearer "+tc.token)
		f.admin(ctx)
		if st, code := answer(ctx); st != tc.want {
			t.Errorf("%s: GET = %d %s; want %d", tc.name, st, code, tc.want)
		}
	}
}

// Failed admin tokens are limited per address: after the burst an address
// is answered 429 rate_limited, even with the right token, while another
// address with the right token is served. A right token spends nothing.
func TestAdminFailuresLimited(t *testing.T) {
	f := newFake(t, openDials())
	admin := fmt.Sprintf("/admin/v1/events/%d", fakeEvent)
	from := func(ip string, hdr ...string) (int, string, *fasthttp.RequestCtx) {
		ctx := request("GET", admin, "", hdr...)
		ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(ip), Port: 1234})
		f.admin(ctx)
		st, code := answer(ctx)
		return st, code, ctx
	}
	good := []string{"Authorization", "Bearer " + adminToken}
	for range 20 { // a right token spends none of the failures' budget
		if st, code, _ := from("192.0.2.1", good...); st != 200 {
			t.Fatalf("right token = %d %s; want 200", st, code)
		}
	}
	wrong := []string{"Authorization", "Bearer " + strings.Repeat("x", len(adminToken))}
	refused := 0
	for range 10 {
		if st, _, _ := from("192.0.2.1", wrong...); st == 401 {
			refused++
		}
	}
	if refused != 10 {
		t.Fatalf("the first 10 wrong tokens: %d answered 401; want 10", refused)
	}
	st, code, ctx := from("192.0.2.1", wrong...)
	if st != 429 || code != gateway.ERateLimited || len(ctx.Response.Header.Peek("Retry-After")) == 0 {
		t.Fatalf("11th wrong token = %d %s (Retry-After %q); want 429 rate_limited with Retry-After", st, code, ctx.Response.Header.Peek("Retry-After"))
	}
	if st, code, _ := from("192.0.2.1", good...); st != 429 || code != gateway.ERateLimited {
		t.Errorf("right token from the locked address = %d %s; want 429 rate_limited", st, code)
	}
	if st, code, _ := from("192.0.2.1"); st != 429 {
		t.Errorf("no token from the locked address = %d %s; want 429", st, code)
	}
	if st, code, _ := from("192.0.2.2", good...); st != 200 {
		t.Errorf("right token from another address = %d %s; want 200", st, code)
	}
}

// Every dial change is logged with who, from where, and each dial named
// with its value before and after.
func TestAdminAuditLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	d := openDials()
	f := newFakeWith(t, d, fakeOpts{log: log})
	ctx := request("PATCH", fmt.Sprintf("/admin/v1/events/%d", fakeEvent), `{"paused":true,"new_users_per_minute":250}`,
		"Authorization", "Bearer "+adminToken)
	ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP("192.0.2.9"), Port: 1})
	f.admin(ctx)
	if st := ctx.Response.StatusCode(); st != 200 {
		t.Fatalf("PATCH = %d %s", st, ctx.Response.Body())
	}
	var rec struct {
		Msg, Audit, Actor, Addr, Role string
		Event                         int64
		Changes                       []gateway.DialChange
	}
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if strings.Contains(line, `"dials changed"`) {
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []gateway.DialChange{
		{Dial: "new_users_per_minute", Before: float64(d.NewUsersPerMinute), After: float64(250)},
		{Dial: "paused", Before: false, After: true},
	}
	if rec.Audit != "dials" || rec.Actor != "ops" || rec.Role != "box_office" || rec.Addr != "192.0.2.9" || rec.Event != fakeEvent || fmt.Sprint(rec.Changes) != fmt.Sprint(want) {
		t.Errorf("audit record = %+v; want actor, addr 192.0.2.9, event %d, changes %v\nlog: %s", rec, fakeEvent, want, buf.String())
	}
}

// request is a request context for a handler called directly.
func request(method, path, body string, hdr ...string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(path)
	ctx.Request.SetBodyString(body)
	for i := 0; i+1 < len(hdr); i += 2 {
		ctx.Request.Header.Set(hdr[i], hdr[i+1])
	}
	return ctx
}

// answer is a response's status and error code ("" when none).
func answer(ctx *fasthttp.RequestCtx) (int, string) {
	var b struct{ Error string }
	json.Unmarshal(ctx.Response.Body(), &b)
	return ctx.Response.StatusCode(), b.Error
}
