package proof

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology/lagproxy"
	"github.com/onsale/onsale/shared/paysig"
	"github.com/onsale/onsale/shared/servicetest"
)

// Every route of the real core, with its database gone (every connection
// cut, new ones refused: a primary's machine dying), answers what it can
// without the database and 503 unavailable with Retry-After for the rest;
// never 500. When the database is back the same process serves again.
func TestDatabaseGoneAnswers503(t *testing.T) {
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "dbdown")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	// The core reaches the database through a proxy the test can pull.
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := lagproxy.New("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	addr := proxy.Addr()
	t.Cleanup(func() { proxy.Close() })
	via := *u
	via.Host = addr
	s := newHAStack(t, via.String(), 1)

	hold := s.hold(t, "down-1", "NL1-A-1")
	booking, pay := s.pay(t, "down-1", hold, nil)
	held := s.hold(t, "down-2", "NL1-A-2")
	ev := fmt.Sprint(s.event)
	webhook := fmt.Sprintf(`{"id":"evt_down","type":"payment.succeeded","created":%d,"data":{"object":{"id":%q,"status":"succeeded","reference":%q}}}`,
		time.Now().Unix(), pay, bookingReference(booking))
	type call struct {
		method, path, account string
		body                  any
		hdr                   []string
	}
	calls := []call{
		{"GET", "/readyz", "", nil, nil},
		{"GET", "/v1/events", "", nil, nil},
		{"GET", "/v1/events/" + ev, "", nil, nil},
		{"GET", "/v1/events/" + ev + "/layout", "", nil, nil},
		{"GET", "/v1/events/" + ev + "/stats", "", nil, nil},
		{"POST", "/v1/events/" + ev + "/holds", "down-3", map[string]any{"seats": []string{"NL1-A-3"}}, nil},
		{"POST", "/v1/events/" + ev + "/holds", "down-3", map[string]any{"best_available": map[string]any{"band": "GA", "count": 2}}, nil},
		{"GET", "/v1/holds/" + held, "down-2", nil, nil},
		{"POST", "/v1/holds/" + held + "/extend", "down-2", nil, nil},
		{"DELETE", "/v1/holds/" + held, "down-2", nil, nil},
		{"POST", "/v1/holds/" + held + "/payment", "down-2", nil, []string{"Idempotency-Key", "k-pay"}},
		{"POST", "/v1/holds/" + held + "/confirm", "down-2", `{"payment_token":"tok_visa"}`, []string{"Idempotency-Key", "k-confirm"}},
		{"POST", "/v1/webhooks/payments", "", webhook, []string{paysig.Header, paysig.Sign([]byte(webhookSecret), time.Now(), []byte(webhook))}},
		{"GET", fmt.Sprintf("/v1/bookings/%d", booking), "down-1", nil, nil},
		{"POST", "/v1/auth/verify", "", map[string]any{"phone": "+919800000009", "code": "123456"}, nil},
	}
	hold2 := s.hold(t, "down-4", "NL1-A-4") // the pool is warm: connections to cut

	proxy.Close()
	for _, c := range calls {
		r := s.call(t, c.method, c.path, c.account, c.body, c.hdr...)
		switch {
		case r.status == http.StatusInternalServerError || r.status > 503:
			t.Errorf("%s %s with the database gone = %d %s; want 503 unavailable", c.method, c.path, r.status, r.raw)
		case r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "":
			t.Errorf("%s %s = 503 without Retry-After", c.method, c.path)
		case r.status == http.StatusServiceUnavailable && r.body["error"] != "unavailable":
			t.Errorf("%s %s = 503 %s; want error unavailable", c.method, c.path, r.raw)
		}
		t.Logf("database gone: %s %s = %d %v", c.method, c.path, r.status, r.body["error"])
	}

	// Back: the same process serves, on new connections.
	if proxy, err = lagproxy.New(addr, u.Host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	if !waitUntil(10*time.Second, func() bool {
		return s.call(t, "GET", "/v1/holds/"+hold2, "down-4", nil).status == http.StatusOK
	}) {
		t.Fatal("the core did not serve again once the database was back")
	}
	if r := s.call(t, "POST", "/v1/holds/"+hold2+"/confirm", "down-4", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "k-confirm"); r.status != 200 {
		t.Errorf("confirm after the database came back = %d %s", r.status, r.raw)
	}

	// A database that refuses writes (what a connection that reached a
	// standby sees: 25006 read_only_sql_transaction): reads answer, writes
	// are 503, never 500.
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := strings.TrimPrefix(u.Path, "/")
	readOnly := func(on bool) {
		t.Helper()
		stmt := "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " RESET default_transaction_read_only"
		if on {
			stmt = "ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " SET default_transaction_read_only = on"
		}
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
		// Every other session of the database ends (57P01), so the core's
		// next connections take the setting.
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	// The condition is real: the database refuses a write.
	probe, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = probe.Exec(ctx, `UPDATE seats SET version = version WHERE false`)
	probe.Close(ctx)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "25006" {
		t.Fatalf("a write to the read-only database = %v; want 25006", err)
	}
	// The pool's connections were cut by the terminate: each fails once
	// (503) and is replaced. A read answers once they are replaced.
	if !waitUntil(10*time.Second, func() bool { return s.call(t, "GET", "/v1/events/"+ev+"/stats", "", nil).status == http.StatusOK }) {
		t.Fatal("reads do not answer on a read-only database")
	}
	for range 20 {
		if r := s.call(t, "POST", "/v1/events/"+ev+"/holds", "down-5", map[string]any{"seats": []string{"NL1-A-5"}}); r.status != http.StatusServiceUnavailable || r.body["error"] != "unavailable" {
			t.Fatalf("a hold on a read-only database = %d %s; want 503 unavailable", r.status, r.raw)
		}
	}
	readOnly(false)
	if !waitUntil(10*time.Second, func() bool {
		return s.call(t, "POST", "/v1/events/"+ev+"/holds", "down-5", map[string]any{"seats": []string{"NL1-A-5"}}).status == http.StatusCreated
	}) {
		t.Error("holds did not succeed again once the database took writes")
	}

	select {
	case <-s.cores[0].Core.Done():
		t.Fatal("the core exited")
	default:
	}
}
