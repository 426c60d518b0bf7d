package http_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/stripe"
	"github.com/onsale/onsale/shared/admission"
)

const stripeSecret = "whsec_test_endpoint"

// stripeEvent is a Stripe event about a PaymentIntent, in Stripe's shape.
func stripeEvent(id, typ, pi, ref string, amount int64, live bool) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-09-30.clover","created":%d,"livemode":%t,"type":%q,`+
		`"data":{"object":{"id":%q,"object":"payment_intent","amount":%d,"amount_capturable":%d,"amount_received":0,"currency":"inr",`+
		`"capture_method":"manual","status":"requires_capture","metadata":{"reference":%q,"onsale_site":"tickets.example"}}}}`,
		id, time.Now().Unix(), live, typ, pi, amount, amount, ref)
}

// Stripe's webhooks at /v1/webhooks/stripe, signed with stripe-go's own
// test helper (webhook.GenerateTestSignedPayload) and delivered to the
// core over HTTP on real PostgreSQL: a forged signature, a stale one, an
// event of the other mode and a body that is no event are refused and
// change nothing; an event for an unknown payment is acknowledged; the
// authorization confirms the card booking and queues its capture, once
// however often it is delivered; the amount and the payment are checked
// against the booking; an event the flows do not need is acknowledged.
func TestStripeWebhooks(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "stripe", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	booking := func(seat, pi string) *core.Booking {
		h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "alice-" + seat, Request: core.HoldRequest{Seats: []string{seat}}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "alice-" + seat, EventID: ev}, core.FlowSync, core.Contact{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPaymentID(ctx, b.ID, pi); err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := booking("AUD-E-7", "pi_A")
	short := booking("AUD-E-8", "pi_S")
	prov, err := stripe.New(stripe.Config{Key: "sk_test_core", WebhookSecret: stripeSecret, Site: "tickets.example"})
	if err != nil {
		t.Fatal(err)
	}
	priv, _ := admission.GenerateKey()
	k := &kicks{}
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(admission.NewSigner(priv).PublicKey()),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
		Payments: &corehttp.Payments{Bookings: db, Keys: db, Outbox: k, Provider: prov}}
	srv := served(t, s.Handler())
	t.Cleanup(srv.Close)
	deliver := func(body []byte, header string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/webhooks/stripe", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Stripe-Signature", header)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	signed := func(body []byte, secret string, at time.Time) string {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: at}).Header
	}
	events := func() int {
		var n int
		db.Pool().QueryRow(ctx, `SELECT count(*) FROM payment_events`).Scan(&n)
		return n
	}
	status := func(id int64) core.BookingStatus {
		got, err := db.Booking(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	auth := stripeEvent("evt_auth", "payment_intent.amount_capturable_updated", "pi_A", b.Reference(), b.AmountPaise, false)

	for _, c := range []struct {
		name, header string
		body         []byte
		want         string
	}{
		{"forged: another secret", signed(auth, "whsec_someone_else", time.Now()), auth, "invalid_signature"},
		{"stale: signed ten minutes ago", signed(auth, stripeSecret, time.Now().Add(-10*time.Minute)), auth, "invalid_signature"},
		{"no signature", "", auth, "invalid_signature"},
		{"a live event at a test key", "", stripeEvent("evt_live", "payment_intent.amount_capturable_updated", "pi_A", b.Reference(), b.AmountPaise, true), "invalid_request"},
		{"not an event", "", []byte(`{"object":"list"}`), "invalid_request"},
	} {
		h := c.header
		if h == "" && c.want != "invalid_signature" {
			h = signed(c.body, stripeSecret, time.Now())
		}
		code, out := deliver(c.body, h)
		if code != http.StatusBadRequest || !strings.Contains(out, `"error":"`+c.want+`"`) {
			t.Errorf("%s: %d %s; want 400 %s", c.name, code, out, c.want)
		}
	}
	if n, st := events(), status(b.ID); n != 0 || st != core.BookingPending {
		t.Fatalf("after the refused webhooks: %d events recorded, booking %s; want none, PAYMENT_PENDING", n, st)
	}

	unknown := stripeEvent("evt_unknown", "payment_intent.amount_capturable_updated", "pi_Z", "booking-999999", 100, false)
	if code, out := deliver(unknown, signed(unknown, stripeSecret, time.Now())); code != 200 || !strings.Contains(out, core.OutcomeUnknownOrder) {
		t.Errorf("an unknown payment: %d %s; want 200 %s", code, out, core.OutcomeUnknownOrder)
	}
	for i, want := range []string{string(core.BookingConfirmed), core.OutcomeDuplicate, core.OutcomeDuplicate} {
		code, out := deliver(auth, signed(auth, stripeSecret, time.Now())) // each delivery signed afresh, as Stripe's retries are
		if code != 200 || !strings.Contains(out, `"outcome":"`+want+`"`) {
			t.Fatalf("authorization, delivery %d: %d %s; want 200 %s", i+1, code, out, want)
		}
	}
	var captures int
	db.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE booking_id = $1 AND kind = 'capture'`, b.ID).Scan(&captures)
	if st := status(b.ID); st != core.BookingConfirmed || captures != 1 {
		t.Fatalf("after the authorization: %s with %d capture jobs; want CONFIRMED with one", st, captures)
	}
	// An authorization of less than the booking's price: failed, refunded.
	low := stripeEvent("evt_short", "payment_intent.amount_capturable_updated", "pi_S", short.Reference(), short.AmountPaise-1, false)
	if code, out := deliver(low, signed(low, stripeSecret, time.Now())); code != 200 || !strings.Contains(out, core.OutcomeStrayRefund) {
		t.Errorf("an authorization short of the price: %d %s; want 200 %s", code, out, core.OutcomeStrayRefund)
	}
	if st := status(short.ID); st != core.BookingFailed {
		t.Errorf("the booking paid short: %s; want FAILED", st)
	}
	refunded := []byte(`{"id":"evt_refunded","object":"event","created":1,"livemode":false,"type":"charge.refunded","data":{"object":{"id":"ch_1","object":"charge"}}}`)
	if code, out := deliver(refunded, signed(refunded, stripeSecret, time.Now())); code != 200 || !strings.Contains(out, `"outcome":"ignored"`) {
		t.Errorf("charge.refunded: %d %s; want 200 ignored", code, out)
	}
}
