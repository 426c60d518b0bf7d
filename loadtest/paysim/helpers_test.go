package paysim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/paysig"
)

const (
	testKey    = "sk_test_paysim"
	testSecret = "whsec_test_paysim"
)

// quiet is a provider whose UPI payers never approve by themselves: tests
// settle them with the hooks.
var quiet = paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour}

// env is a Sim behind a real HTTP server, sending webhooks to a receiver.
type env struct {
	sim  *paysim.Sim
	url  string
	recv *receiver
}

// newEnv starts a Sim with behaviour b; handle (nil: answer 200) decides
// the receiver's answer to its n-th webhook (1, 2, ...).
func newEnv(tb testing.TB, b paysim.Behaviour, handle func(n int, ev paysim.Event) int) *env {
	tb.Helper()
	recv := newReceiver(tb, handle)
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("PAYSIM_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	sim, err := paysim.New(paysim.Config{APIKey: testKey, WebhookSecret: testSecret, WebhookURL: recv.url, Control: true, Behaviour: b}, log)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	tb.Cleanup(func() {
		sim.Close() // first: releases held-back responses
		srv.Close()
	})
	return &env{sim: sim, url: srv.URL, recv: recv}
}

// response is one HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the "error" field of a JSON error body.
func (r response) errorCode() string {
	var e struct{ Error string }
	json.Unmarshal(r.body, &e)
	return e.Error
}

func (r response) payment(tb testing.TB) paysim.Payment {
	tb.Helper()
	var p paysim.Payment
	if err := json.Unmarshal(r.body, &p); err != nil || p.ID == "" {
		tb.Fatalf("not a payment (%d): %s", r.status, r.body)
	}
	return p
}

// call sends an API request with the test key; body is JSON-encoded unless
// it is a string; hdr are header name, value pairs.
func (e *env) call(tb testing.TB, method, path string, body any, hdr ...string) response {
	tb.Helper()
	r, err := e.try(http.DefaultClient, method, path, body, append([]string{"Authorization", "Bearer " + testKey}, hdr...)...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func (e *env) try(c *http.Client, method, path string, body any, hdr ...string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		return response{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// pay creates a payment and expects 201.
func (e *env) pay(tb testing.TB, req paysim.PaymentRequest, hdr ...string) paysim.Payment {
	tb.Helper()
	r := e.call(tb, "POST", "/v1/payments", req, hdr...)
	if r.status != http.StatusCreated {
		tb.Fatalf("POST /v1/payments %+v = %d %s; want 201", req, r.status, r.body)
	}
	return r.payment(tb)
}

func upi(ref string, amount int64) paysim.PaymentRequest {
	return paysim.PaymentRequest{Amount: amount, Currency: "INR", Reference: ref, Method: paysim.MethodUPI}
}

func card(ref string, amount int64, capture string) paysim.PaymentRequest {
	return paysim.PaymentRequest{Amount: amount, Currency: "INR", Reference: ref, Method: paysim.MethodCard, PaymentToken: "tok_visa", Capture: capture}
}

// entryTypes lists the types of the ledger's entries for ref.
func entryTypes(l paysim.Ledger, ref string) []string {
	var out []string
	for _, e := range l.Entries {
		if e.Reference == ref {
			out = append(out, e.Type)
		}
	}
	return out
}

// received is one webhook request as the receiver saw it.
type received struct {
	at        time.Time
	header    http.Header
	body      []byte
	event     paysim.Event
	verifyErr error // paysig.Verify on arrival
}

// receiver is a webhook endpoint that records what arrives.
type receiver struct {
	url    string
	handle func(n int, ev paysim.Event) int

	mu  sync.Mutex
	got []received
}

func newReceiver(tb testing.TB, handle func(n int, ev paysim.Event) int) *receiver {
	rc := &receiver{handle: handle}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := received{at: time.Now(), header: r.Header.Clone(), body: body,
			verifyErr: paysig.Verify([]byte(testSecret), r.Header.Get(paysig.Header), body, time.Now())}
		json.Unmarshal(body, &got.event)
		rc.mu.Lock()
		rc.got = append(rc.got, got)
		n := len(rc.got)
		rc.mu.Unlock()
		code := http.StatusOK
		if rc.handle != nil {
			code = rc.handle(n, got.event)
		}
		w.WriteHeader(code)
	}))
	tb.Cleanup(srv.Close)
	rc.url = srv.URL + "/v1/webhooks/payments"
	return rc
}

// all returns what arrived so far.
func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// wait returns once n webhooks have arrived, or fails after 5 seconds.
func (rc *receiver) wait(tb testing.TB, n int) []received {
	tb.Helper()
	eventually(tb, func() bool { return len(rc.all()) >= n }, "%d webhooks", n)
	return rc.all()
}

// eventually polls cond until it holds, or fails after 5 seconds.
func eventually(tb testing.TB, cond func() bool, format string, args ...any) {
	tb.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for "+format, args...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// object decodes an event's data.object.
func object[T any](tb testing.TB, ev paysim.Event) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(ev.Data.Object, &v); err != nil {
		tb.Fatalf("event %s object: %v", ev.ID, err)
	}
	return v
}

func decodeAs[T any](tb testing.TB, b []byte) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}
