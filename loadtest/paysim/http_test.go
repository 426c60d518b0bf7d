package paysim_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// TestBadInput: every refusal is a 4xx JSON error, and nothing is recorded.
func TestBadInput(t *testing.T) {
	auth := []string{"Authorization", "Bearer " + testKey}
	tests := []struct {
		name      string
		body      string
		hdr       []string
		wantCode  int
		wantError string
	}{
		{"malformed JSON", `{"amount":100,`, auth, 400, paysim.EInvalid},
		{"not an object", `[1,2]`, auth, 400, paysim.EInvalid},
		{"trailing data", `{"amount":100,"currency":"INR","reference":"b","method":"upi"} {}`, auth, 400, paysim.EInvalid},
		{"empty body", ``, auth, 400, paysim.EInvalid},
		{"amount zero", `{"amount":0,"currency":"INR","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"amount negative", `{"amount":-100,"currency":"INR","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"amount missing", `{"currency":"INR","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"amount fractional", `{"amount":10.5,"currency":"INR","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"amount a string", `{"amount":"100","currency":"INR","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"unknown method", `{"amount":100,"currency":"INR","reference":"b","method":"cash"}`, auth, 400, paysim.EInvalid},
		{"no method", `{"amount":100,"currency":"INR","reference":"b"}`, auth, 400, paysim.EInvalid},
		{"other currency", `{"amount":100,"currency":"USD","reference":"b","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"no reference", `{"amount":100,"currency":"INR","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"reference too long", `{"amount":100,"currency":"INR","reference":"` + strings.Repeat("x", 201) + `","method":"upi"}`, auth, 400, paysim.EInvalid},
		{"card token not a token", `{"amount":100,"currency":"INR","reference":"b","method":"card","payment_token":"4111111111111111"}`, auth, 400, paysim.EInvalid},
		{"card with a bad token", `{"amount":100,"currency":"INR","reference":"b","method":"card","payment_token":"4242424242424242"}`, auth, 400, paysim.EInvalid},
		{"upi with a token", `{"amount":100,"currency":"INR","reference":"b","method":"upi","payment_token":"tok_x"}`, auth, 400, paysim.EInvalid},
		{"upi manual capture", `{"amount":100,"currency":"INR","reference":"b","method":"upi","capture":"manual"}`, auth, 400, paysim.EInvalid},
		{"unknown capture", `{"amount":100,"currency":"INR","reference":"b","method":"card","payment_token":"tok_x","capture":"later"}`, auth, 400, paysim.EInvalid},
		{"unknown field", `{"amount":100,"currency":"INR","reference":"b","method":"upi","amout":5}`, auth, 400, paysim.EInvalid},
		{"body too large", `{"reference":"` + strings.Repeat("x", paysim.MaxBodyBytes) + `"}`, auth, 413, paysim.ETooLarge},
		{"missing auth", `{"amount":100,"currency":"INR","reference":"b","method":"upi"}`, nil, 401, paysim.EUnauthorized},
		{"wrong key", `{"amount":100,"currency":"INR","reference":"b","method":"upi"}`, []string{"Authorization", "Bearer sk_wrong"}, 401, paysim.EUnauthorized},
		{"not a bearer", `{"amount":100,"currency":"INR","reference":"b","method":"upi"}`, []string{"Authorization", "Basic " + testKey}, 401, paysim.EUnauthorized},
	}
	e := newEnv(t, paysim.Behaviour{}, nil) // UPI would settle at once: nothing may be pending
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := append(tc.hdr[:len(tc.hdr):len(tc.hdr)], paysim.IdempotencyKeyHeader, "k-"+tc.name)
			r, err := e.try(http.DefaultClient, "POST", "/v1/payments", tc.body, hdr...)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.wantCode || r.errorCode() != tc.wantError || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("POST /v1/payments %s = %d %s; want %d %s", tc.body, r.status, r.body, tc.wantCode, tc.wantError)
			}
			if !strings.Contains(string(r.body), `"message":"`) {
				t.Errorf("error body %s has no message", r.body)
			}
		})
	}
	if r := e.call(t, "GET", "/v1/ledger", nil); r.status != 200 || strings.Contains(string(r.body), `"seq"`) {
		t.Errorf("ledger after bad input = %d %s; want no entries", r.status, r.body)
	}
	if got := decodeAs[struct{ Data []paysim.Payment }](t, e.call(t, "GET", "/v1/payments", nil).body).Data; len(got) != 0 {
		t.Errorf("payments after bad input: %+v", got)
	}
	if d := e.sim.Deliveries(); len(d) != 0 {
		t.Errorf("webhooks after bad input: %+v", d)
	}
	// The keys were not spent: a good request under one of them is fresh.
	r := e.call(t, "POST", "/v1/payments", card("b", 100, "automatic"), paysim.IdempotencyKeyHeader, "k-amount zero")
	if r.status != 201 || r.header.Get(paysim.ReplayedHeader) != "" {
		t.Errorf("good request under a refused key = %d %s; want a fresh 201", r.status, r.body)
	}
}

// TestRoutes: unknown routes and methods, health, and the other reads
// that need the key.
func TestRoutes(t *testing.T) {
	e := newEnv(t, quiet, nil)
	tests := []struct {
		method, path string
		auth         bool
		wantCode     int
		wantError    string
	}{
		{"GET", "/healthz", false, 200, ""},
		{"GET", "/v1/nothing", true, 404, paysim.ENotFound},
		{"DELETE", "/v1/payments", true, 405, paysim.EMethodNotAllowed},
		{"GET", "/v1/payments/pay_x/capture", true, 405, paysim.EMethodNotAllowed},
		{"GET", "/v1/payments", false, 401, paysim.EUnauthorized},
		{"GET", "/v1/payments/pay_x", false, 401, paysim.EUnauthorized},
		{"GET", "/v1/ledger", false, 401, paysim.EUnauthorized},
		{"GET", "/v1/ledger", true, 200, ""},
		{"GET", "/sms", false, 200, ""},
		{"GET", "/_sim/config", false, 200, ""},
	}
	for _, tc := range tests {
		var hdr []string
		if tc.auth {
			hdr = []string{"Authorization", "Bearer " + testKey}
		}
		r, err := e.try(http.DefaultClient, tc.method, tc.path, nil, hdr...)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != tc.wantCode || r.errorCode() != tc.wantError || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s = %d %s; want %d %q", tc.method, tc.path, r.status, r.body, tc.wantCode, tc.wantError)
		}
	}
}

// TestControl: /_sim/config reads and partly updates the behaviour,
// refuses nonsense, and without Control the whole of /_sim/ is absent.
func TestControl(t *testing.T) {
	e := newEnv(t, quiet, nil)
	r := e.call(t, "PUT", "/_sim/config", `{"fail_rate":0.25,"upi_delay_min":"2s","upi_delay_max":"1m30s","outage":[{"start":"2030-01-01T12:00:00Z","end":"2030-01-01T18:05:00+05:30"}]}`)
	if r.status != 200 {
		t.Fatalf("PUT /_sim/config = %d %s", r.status, r.body)
	}
	got := e.sim.Behaviour()
	want := quiet
	want.FailRate, want.UPIDelayMin, want.UPIDelayMax = 0.25, 2*time.Second, 90*time.Second
	want.TimeoutDelay, want.WebhookRetryBase, want.WebhookRetryMax, want.WebhookMaxAttempts = 30*time.Second, time.Second, time.Minute, 12
	if len(got.Outages) != 1 || !got.Outages[0].End.Equal(time.Date(2030, 1, 1, 12, 35, 0, 0, time.UTC)) {
		t.Errorf("outages = %+v", got.Outages)
	}
	got.Outages = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("behaviour = %+v; want %+v", got, want)
	}
	if body := string(e.call(t, "GET", "/_sim/config", nil).body); !strings.Contains(body, `"upi_delay_max":"1m30s"`) || !strings.Contains(body, `"fail_rate":0.25`) {
		t.Errorf("GET /_sim/config = %s", body)
	}

	for _, bad := range []string{
		`{"fail_rate":1.5}`,
		`{"duplicate_rate":-0.1}`,
		`{"upi_delay_min":"5m"}`, // above the max
		`{"upi_delay_max":90}`,   // not a duration string
		`{"reorder_window":"-1s"}`,
		`{"outage":[{"start":"2030-01-01T12:00:00Z","end":"2030-01-01T11:00:00Z"}]}`,
		`{"fail_rat":0.1}`,
		`{`,
	} {
		if r := e.call(t, "PUT", "/_sim/config", bad); r.status != 400 || r.errorCode() != paysim.EInvalid {
			t.Errorf("PUT /_sim/config %s = %d %s; want 400", bad, r.status, r.body)
		}
	}
	if b := e.sim.Behaviour(); b.FailRate != 0.25 || b.UPIDelayMin != 2*time.Second || len(b.Outages) != 1 {
		t.Errorf("refused updates changed the behaviour: %+v", b)
	}

	sim, err := paysim.New(paysim.Config{APIKey: testKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	for _, path := range []string{"/_sim/config", "/_sim/webhooks"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("GET %s without Control = %d; want 404", path, resp.StatusCode)
		}
	}

	if _, err := paysim.New(paysim.Config{Behaviour: paysim.Behaviour{FailRate: 2}}, nil); err == nil {
		t.Error("New with fail rate 2 succeeded")
	}
}

func TestSMS(t *testing.T) {
	e := newEnv(t, quiet, nil)
	tests := []struct {
		body     string
		wantCode int
	}{
		{`{"to":"+919812345678","body":"Your tickets for Coldplay: https://t.onsale.in/abc"}`, 202},
		{`{"to":"+919800000001","body":"OTP 123456"}`, 202},
		{`{"to":"+919812345678","body":"second to the same phone"}`, 202},
		{`{"to":"9812345678","body":"no plus"}`, 202},
		{`{"to":"+91 98123","body":"a space"}`, 400},
		{`{"to":"","body":"no number"}`, 400},
		{`{"to":"+919812345678","body":""}`, 400},
		{`{"to":"+919812345678","body":"` + strings.Repeat("x", 1601) + `"}`, 400},
		{`{"to":"+919812345678"`, 400},
	}
	for _, tc := range tests {
		r, err := e.try(http.DefaultClient, "POST", "/sms", tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if r.status != tc.wantCode || (tc.wantCode == 400) != (r.errorCode() == paysim.EInvalid) {
			t.Errorf("POST /sms %.60s = %d %s; want %d", tc.body, r.status, r.body, tc.wantCode)
		}
	}
	all := decodeAs[struct{ Messages []paysim.SMS }](t, e.call(t, "GET", "/sms", nil).body).Messages
	if len(all) != 4 || all[0].Body != "Your tickets for Coldplay: https://t.onsale.in/abc" || all[0].ID == "" || all[0].Received.IsZero() {
		t.Errorf("GET /sms = %+v; want the 4 accepted, oldest first", all)
	}
	one := decodeAs[struct{ Messages []paysim.SMS }](t, e.call(t, "GET", "/sms?to=%2B919812345678", nil).body).Messages
	if len(one) != 2 || one[1].Body != "second to the same phone" {
		t.Errorf("GET /sms?to= = %+v; want the 2 to that number", one)
	}
	if got := e.sim.SMS(); len(got) != 4 {
		t.Errorf("SMS() = %d messages; want 4", len(got))
	}
	none := e.call(t, "GET", "/sms?to=%2B910000000000", nil).body
	if !strings.Contains(string(none), `"messages":[]`) {
		t.Errorf("GET /sms?to=<a number never texted> = %s; want an empty list", none)
	}
}

// TestSMSByNumber sends to many numbers, interleaved, and reads each back:
// every number gets exactly its own messages, oldest first (the index by
// number agrees with the full list).
func TestSMSByNumber(t *testing.T) {
	e := newEnv(t, quiet, nil)
	const numbers, each = 50, 3
	for i := range each {
		for n := range numbers {
			e.call(t, "POST", "/sms", fmt.Sprintf(`{"to":"+9198%08d","body":"message %d to %d"}`, n, i, n))
		}
	}
	if all := e.sim.SMS(); len(all) != numbers*each {
		t.Fatalf("SMS() = %d messages; want %d", len(all), numbers*each)
	}
	for n := range numbers {
		got := decodeAs[struct{ Messages []paysim.SMS }](t, e.call(t, "GET", fmt.Sprintf("/sms?to=%%2B9198%08d", n), nil).body).Messages
		if len(got) != each {
			t.Fatalf("GET /sms?to=+9198%08d = %d messages; want %d", n, len(got), each)
		}
		for i, m := range got {
			if want := fmt.Sprintf("message %d to %d", i, n); m.Body != want || m.To != fmt.Sprintf("+9198%08d", n) {
				t.Errorf("GET /sms?to=+9198%08d [%d] = %+v; want %q", n, i, m, want)
			}
		}
	}
}
