package stripe_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/stripe"
	"github.com/onsale/onsale/shared/servicetest"
)

// stripeMock starts github.com/stripe/stripe-mock (ONSALE_STRIPE_MOCK, or
// stripe-mock on PATH; make test installs it from the Go module proxy) on
// loopback ports it picks, and returns its HTTP address. Missing, the test
// is skipped, or fails under ONSALE_REQUIRE_SERVICES=1 (servicetest).
func stripeMock(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ONSALE_STRIPE_MOCK")
	if bin == "" {
		bin, _ = exec.LookPath("stripe-mock")
	}
	if bin == "" {
		servicetest.Missing(t, "no stripe-mock (ONSALE_STRIPE_MOCK or PATH; make test installs it: go install github.com/stripe/stripe-mock@v0.203.0)")
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Listening for HTTP at address: (\S+)`)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(20 * time.Second):
		t.Fatal("stripe-mock did not say where it listens within 20 s")
	}
	return ""
}

// recorder keeps every request the adapter sends.
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

type sent struct {
	method, path, key string
	form              url.Values
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sent{method: req.Method, path: req.URL.Path, key: req.Header.Get("Idempotency-Key")}
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		s.form, _ = url.ParseQuery(string(b))
		req.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, s)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) last() sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// Every call the adapter makes is one Stripe's API description accepts
// (stripe-mock validates each request against it and answers its shape),
// and every answer is read. stripe-mock keeps no state, so this proves
// shapes, not flows (the flows run against the simulator's Stripe mode).
func TestAgainstStripeMock(t *testing.T) {
	base := stripeMock(t)
	rec := &recorder{}
	c, err := stripe.New(stripe.Config{Key: "sk_test_123", WebhookSecret: "whsec_x", URL: base, HTTP: &http.Client{Transport: rec, Timeout: 10 * time.Second},
		Site: "tickets.example"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	p, err := c.CreatePayment(ctx, "charge:h1", core.PaymentRequest{Amount: 150000, Currency: "INR", Reference: "booking-7", Method: "card",
		PaymentToken: "pm_card_visa", Capture: "manual", ReturnURL: "https://tickets.example/events/3/book"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.HasPrefix(p.ID, "pi_") || p.Status == "" {
		t.Fatalf("create answered %+v; want a PaymentIntent read", p)
	}
	r := rec.last()
	want := map[string]string{"amount": "150000", "currency": "inr", "capture_method": "manual", "confirm": "true",
		"payment_method": "pm_card_visa", "metadata[reference]": "booking-7", "metadata[onsale_site]": "tickets.example",
		"return_url": "https://tickets.example/events/3/book"}
	for k, v := range want {
		if got := r.form.Get(k); got != v {
			t.Errorf("create sent %s=%q; want %q (%v)", k, got, v, r.form)
		}
	}
	if r.method != "POST" || r.path != "/v1/payment_intents" || r.key != "tickets.example charge:h1" {
		t.Errorf("create was %s %s key %q; want POST /v1/payment_intents key charge:h1", r.method, r.path, r.key)
	}

	id := p.ID
	if got, err := c.Payment(ctx, id); err != nil || got.ID == "" {
		t.Fatalf("retrieve: %+v %v", got, err)
	}
	if r := rec.last(); r.method != "GET" || r.path != "/v1/payment_intents/"+id {
		t.Errorf("retrieve was %s %s", r.method, r.path)
	}
	if list, err := c.PaymentsFor(ctx, core.PaymentLookup{Reference: "booking-7", Key: "charge:h1", PaymentID: id}); err != nil || len(list) != 1 {
		t.Fatalf("payments for a recorded id: %+v %v", list, err)
	}
	n := len(rec.reqs)
	if list, err := c.PaymentsFor(ctx, core.PaymentLookup{Reference: "booking-7", Key: "charge:h1"}); err != nil || len(list) != 0 || len(rec.reqs) != n {
		t.Fatalf("payments for no recorded id: %+v %v (%d calls); want none, no call", list, err, len(rec.reqs)-n)
	}
	for _, call := range []struct {
		name, path, key string
		do              func() error
	}{
		{"capture", "/v1/payment_intents/" + id + "/capture", "tickets.example capture:7", func() error { _, err := c.Capture(ctx, "capture:7", id); return err }},
		{"cancel", "/v1/payment_intents/" + id + "/cancel", "tickets.example void:7", func() error { _, err := c.Cancel(ctx, "void:7", id); return err }},
		{"refund", "/v1/refunds", "tickets.example refund:7", func() error { _, err := c.Refund(ctx, "refund:7", id); return err }},
	} {
		if err := call.do(); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if r := rec.last(); r.method != "POST" || r.path != call.path || r.key != call.key {
			t.Errorf("%s was %s %s key %q; want POST %s key %s", call.name, r.method, r.path, r.key, call.path, call.key)
		}
	}
	if got := rec.last().form.Get("payment_intent"); got != id {
		t.Errorf("refund named payment_intent %q; want %s", got, id)
	}

	// The card typed on Stripe's page: a Checkout Session, read and
	// expired.
	cs, err := c.CreatePayment(ctx, "charge:h2", core.PaymentRequest{Amount: 150000, Currency: "INR", Reference: "booking-8", Method: "card",
		Capture: "manual", ReturnURL: "https://tickets.example/events/3/book"})
	if err != nil || !strings.HasPrefix(cs.ID, "cs_") {
		t.Fatalf("checkout session: %+v %v", cs, err)
	}
	r = rec.last()
	for k, v := range map[string]string{"mode": "payment", "client_reference_id": "booking-8", "success_url": "https://tickets.example/events/3/book",
		"line_items[0][price_data][unit_amount]": "150000", "line_items[0][price_data][currency]": "inr", "line_items[0][quantity]": "1",
		"payment_intent_data[capture_method]": "manual", "payment_intent_data[metadata][onsale_checkout]": "1",
		"metadata[onsale_site]": "tickets.example", "payment_intent_data[metadata][onsale_site]": "tickets.example"} {
		if got := r.form.Get(k); got != v {
			t.Errorf("checkout session sent %s=%q; want %q", k, got, v)
		}
	}
	if r.path != "/v1/checkout/sessions" || r.key != "tickets.example charge:h2" {
		t.Errorf("checkout session was %s key %q", r.path, r.key)
	}
	if got, err := c.Payment(ctx, cs.ID); err != nil || got.ID != cs.ID {
		t.Fatalf("retrieve session: %+v %v", got, err)
	}
	n = len(rec.reqs)
	if _, err := c.Cancel(ctx, "void:8", cs.ID); err != nil {
		var pe *core.ProviderError
		if !errors.As(err, &pe) || pe.Status != http.StatusConflict { // stripe-mock's fixed session may read as expired or complete
			t.Fatalf("cancel session: %v", err)
		}
	}
	if last := rec.last(); len(rec.reqs) == n || last.method != "POST" || !strings.HasSuffix(last.path, "/expire") && !strings.HasSuffix(last.path, "/cancel") {
		t.Errorf("cancel of a session ended with %s %s; want its expiry (open) or its PaymentIntent's cancel (complete)", last.method, last.path)
	}

	// A refusal is in the core's terms: stripe-mock refuses an unknown
	// parameter (400) as Stripe does; here an id of the wrong kind.
	_, err = c.Payment(ctx, "not an id/..")
	var pe *core.ProviderError
	if err == nil || !errors.As(err, &pe) || pe.Status < 400 {
		t.Fatalf("retrieve of a bad id = %v; want a ProviderError", err)
	}
}

// The control: stripe-mock refuses a request Stripe's API description does
// not allow (an unknown parameter, a capture method Stripe does not have),
// so the test above would see an adapter that drifts from the API.
func TestStripeMockRefusesDrift(t *testing.T) {
	base := stripeMock(t)
	for name, form := range map[string]string{
		"unknown parameter": "amount=100&currency=inr&capture_mode=manual",
		"unknown capture":   "amount=100&currency=inr&capture_method=later",
	} {
		req, _ := http.NewRequest("POST", base+"/v1/payment_intents", strings.NewReader(form))
		req.Header.Set("Authorization", "Bearer sk_test_123")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: stripe-mock answered %d; want 400", name, resp.StatusCode)
		}
	}
}
