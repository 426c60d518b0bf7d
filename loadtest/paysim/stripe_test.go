package paysim_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/onsale/onsale/loadtest/paysim"
)

// stripeEnv is the simulator in its Stripe dialect, a stripe-go client of
// it, and a receiver of its webhooks.
type stripeEnv struct {
	*dialectEnv
	sc *stripe.Client
}

func newStripeEnv(t *testing.T) *stripeEnv {
	t.Helper()
	d := newDialectEnv(t, paysim.DialectStripe)
	b := stripe.NewBackendsWithConfig(&stripe.BackendConfig{URL: stripe.String(d.url), MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}})
	return &stripeEnv{dialectEnv: d, sc: stripe.NewClient(testKey, stripe.WithBackends(b))}
}

// dialectEnv is the simulator in a dialect behind a real HTTP server, and
// a receiver keeping every webhook it sends.
type dialectEnv struct {
	sim *paysim.Sim
	url string

	mu    sync.Mutex
	hooks []hook
}

type hook struct {
	header http.Header
	body   []byte
}

func newDialectEnv(t *testing.T, dialect string) *dialectEnv {
	t.Helper()
	e := &dialectEnv{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.hooks = append(e.hooks, hook{header: r.Header.Clone(), body: b})
		e.mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	sim, err := paysim.New(paysim.Config{APIKey: testKey, WebhookSecret: testSecret, WebhookURL: recv.URL, Control: true,
		Behaviour: quiet, Dialect: dialect}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); srv.Close() })
	e.sim, e.url = sim, srv.URL
	return e
}

// delivered flushes the webhooks and returns them once n have arrived (a
// delivery the scheduler had begun finishes after the flush), in any order.
func (e *dialectEnv) delivered(n int) []hook {
	e.sim.FlushWebhooks()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		got := len(e.hooks)
		e.mu.Unlock()
		if got >= n {
			break
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.hooks)
}

func (e *stripeEnv) create(t *testing.T, key, pm string, amount int64) (*stripe.PaymentIntent, error) {
	t.Helper()
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(amount), Currency: stripe.String("inr"),
		CaptureMethod: stripe.String("manual"), PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true),
		Metadata: map[string]string{"reference": "booking-1"}, ReturnURL: stripe.String("https://shop.example/back")}
	p.SetIdempotencyKey(key)
	return e.sc.V1PaymentIntents.Create(context.Background(), p)
}

func stripeCode(err error) (int, string) {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return 0, ""
	}
	if se.Code == "" {
		return se.HTTPStatusCode, string(se.Type)
	}
	return se.HTTPStatusCode, string(se.Code)
}

// The Stripe dialect answers stripe-go as Stripe would: a manual-capture
// PaymentIntent authorized, captured and refunded; Stripe's idempotency
// (replay, a key reused with other parameters refused, keys forgotten
// after a day so that a retry runs again and is refused by the
// PaymentIntent's state, never carried out twice); a declined card; a 3-D
// Secure step; unknown parameters refused.
func TestStripeDialect(t *testing.T) {
	e := newStripeEnv(t)
	ctx := context.Background()
	pi, err := e.create(t, "k1", "pm_card_visa", 150000)
	if err != nil || pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.AmountCapturable != 150000 || !strings.HasPrefix(pi.ID, "pi_") {
		t.Fatalf("create = %+v %v; want requires_capture of 150000", pi, err)
	}
	if again, err := e.create(t, "k1", "pm_card_visa", 150000); err != nil || again.ID != pi.ID {
		t.Fatalf("the same key again = %v %v; want the same PaymentIntent %s", again, err, pi.ID)
	}
	if _, err := e.create(t, "k1", "pm_card_visa", 150001); err == nil {
		t.Fatal("the same key with another amount was taken; want 400 idempotency_error")
	} else if st, code := stripeCode(err); st != 400 || code != "idempotency_error" {
		t.Fatalf("the same key with another amount = %d %s; want 400 idempotency_error", st, code)
	}
	capture := func(key string) (*stripe.PaymentIntent, error) {
		p := &stripe.PaymentIntentCaptureParams{}
		p.SetIdempotencyKey(key)
		return e.sc.V1PaymentIntents.Capture(ctx, pi.ID, p)
	}
	if c, err := capture("cap"); err != nil || c.Status != stripe.PaymentIntentStatusSucceeded || c.AmountReceived != 150000 {
		t.Fatalf("capture = %+v %v", c, err)
	}
	if _, err := capture("cap"); err != nil {
		t.Fatalf("the capture retried under its key = %v; want its answer replayed", err)
	}
	if e.sim.ForgetIdempotencyKeys() == 0 {
		t.Fatal("no keys to forget")
	}
	// A day later the key is gone: the retry runs, and the PaymentIntent's
	// state refuses it (what core/stripe reads as already_captured).
	if _, err := capture("cap"); err == nil {
		t.Fatal("a second capture after the key was forgotten succeeded")
	} else if st, code := stripeCode(err); st != 400 || code != "payment_intent_unexpected_state" {
		t.Fatalf("a second capture after the key was forgotten = %d %s; want 400 payment_intent_unexpected_state", st, code)
	}
	refund := func(key string) (*stripe.Refund, error) {
		p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
		p.SetIdempotencyKey(key)
		return e.sc.V1Refunds.Create(ctx, p)
	}
	if r, err := refund("ref"); err != nil || r.Amount != 150000 || r.Status != stripe.RefundStatusSucceeded {
		t.Fatalf("refund = %+v %v", r, err)
	}
	e.sim.ForgetIdempotencyKeys()
	if _, err := refund("ref"); err == nil {
		t.Fatal("a second refund after the key was forgotten succeeded")
	} else if st, code := stripeCode(err); st != 400 || code != "charge_already_refunded" {
		t.Fatalf("a second refund = %d %s; want 400 charge_already_refunded", st, code)
	}
	rp := &stripe.PaymentIntentRetrieveParams{}
	rp.AddExpand("latest_charge")
	got, err := e.sc.V1PaymentIntents.Retrieve(ctx, pi.ID, rp)
	if err != nil || got.LatestCharge == nil || got.LatestCharge.AmountRefunded != 150000 || got.LatestCharge.AmountCaptured != 150000 {
		t.Fatalf("retrieve = %+v %v; want the charge captured and refunded whole", got, err)
	}
	tot := e.sim.Ledger().Totals["booking-1"]
	if tot.Captured != 150000 || tot.Refunded != 150000 || tot.Authorized != 150000 {
		t.Fatalf("ledger %+v; want one authorization, one capture and one refund of 150000", tot)
	}

	// A declined card: 402 card_error naming the PaymentIntent.
	if _, err := e.create(t, "k2", "pm_card_chargeDeclined", 1000); err == nil {
		t.Fatal("a declined card was authorized")
	} else {
		var se *stripe.Error
		if !errors.As(err, &se) || se.HTTPStatusCode != 402 || se.Type != stripe.ErrorTypeCard || se.PaymentIntent == nil {
			t.Fatalf("declined = %v; want 402 card_error with the PaymentIntent", err)
		}
	}
	// A card that needs 3-D Secure: requires_action, redirecting to the
	// simulator's page and back to the return_url.
	tds, err := e.create(t, "k3", "pm_card_threeDSecure2Required", 1000)
	if err != nil || tds.Status != stripe.PaymentIntentStatusRequiresAction || tds.NextAction == nil || tds.NextAction.RedirectToURL == nil ||
		!strings.Contains(tds.NextAction.RedirectToURL.URL, "/checkout/"+tds.ID) || !strings.Contains(tds.NextAction.RedirectToURL.URL, "shop.example") {
		t.Fatalf("3-D Secure = %+v %v; want requires_action with a redirect to the checkout page", tds, err)
	}
	cancel := &stripe.PaymentIntentCancelParams{}
	cancel.SetIdempotencyKey("k3-cancel")
	if c, err := e.sc.V1PaymentIntents.Cancel(ctx, tds.ID, cancel); err != nil || c.Status != stripe.PaymentIntentStatusCanceled {
		t.Fatalf("cancel of a PaymentIntent waiting for its 3-D Secure step = %+v %v; want canceled", c, err)
	}
	if _, err := e.sim.Settle(tds.ID, true); err == nil {
		t.Fatal("the payer passed the 3-D Secure step of a cancelled PaymentIntent")
	}
	// Stripe refuses a parameter it does not know.
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(100), Currency: stripe.String("inr"), Confirm: stripe.Bool(true),
		PaymentMethod: stripe.String("pm_card_visa")}
	p.AddExtra("capture_mode", "manual")
	if _, err := e.sc.V1PaymentIntents.Create(ctx, p); err == nil {
		t.Fatal("an unknown parameter was taken")
	} else if st, code := stripeCode(err); st != 400 || code != "parameter_unknown" {
		t.Fatalf("an unknown parameter = %d %s; want 400 parameter_unknown", st, code)
	}
}

// The dialect's webhooks are Stripe events that stripe-go's own verifier
// accepts (the signature in Stripe-Signature with the endpoint's secret),
// one per step: authorized, captured, refunded.
func TestStripeDialectWebhooks(t *testing.T) {
	e := newStripeEnv(t)
	ctx := context.Background()
	pi, err := e.create(t, "w1", "pm_card_visa", 2000)
	if err != nil {
		t.Fatal(err)
	}
	cp := &stripe.PaymentIntentCaptureParams{}
	cp.SetIdempotencyKey("w1-capture")
	if _, err := e.sc.V1PaymentIntents.Capture(ctx, pi.ID, cp); err != nil {
		t.Fatal(err)
	}
	rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
	rp.SetIdempotencyKey("w1-refund")
	if _, err := e.sc.V1Refunds.Create(ctx, rp); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, h := range e.delivered(3) {
		ev, err := webhook.ConstructEventWithOptions(h.body, h.header.Get("Stripe-Signature"), testSecret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		if err != nil {
			t.Fatalf("stripe-go refuses the simulator's webhook: %v\n%s", err, h.body)
		}
		types = append(types, string(ev.Type))
		if strings.HasPrefix(string(ev.Type), "payment_intent.") {
			var got stripe.PaymentIntent
			if err := got.UnmarshalJSON(ev.Data.Raw); err != nil || got.ID != pi.ID || got.Metadata["reference"] != "booking-1" {
				t.Fatalf("%s carries %+v %v; want the PaymentIntent with its reference", ev.Type, got, err)
			}
		}
		// The control: the same body under another secret does not verify.
		if _, err := webhook.ConstructEventWithOptions(h.body, h.header.Get("Stripe-Signature"), "whsec_other", webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true}); err == nil {
			t.Fatal("a webhook verified with the wrong secret")
		}
	}
	slices.Sort(types) // delivered concurrently: in any order, as Stripe's
	want := "charge.refunded payment_intent.amount_capturable_updated payment_intent.succeeded"
	if strings.Join(types, " ") != want {
		t.Fatalf("webhooks %v; want %s", types, want)
	}
}
