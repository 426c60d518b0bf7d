package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/paysig"
)

// kicks records the jobs the handler hands to the outbox.
type kicks struct {
	mu   sync.Mutex
	jobs []core.JobKind
}

func (k *kicks) RunNow(context.Context, core.JobKind, int64) bool { return false }

func (k *kicks) Kick(kind core.JobKind, _ int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.jobs = append(k.jobs, kind)
}

func (k *kicks) kicked() []core.JobKind {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.jobs)
}

// A payment webhook that arrives after the hold ran out queues the give-back
// of the booking's flow (a refund for UPI, a void for a card) and kicks that
// very job, so it runs now rather than at the next poll.
func TestLateWebhookKicksQueuedJob(t *testing.T) {
	for _, flow := range core.Flows {
		t.Run(string(flow), func(t *testing.T) {
			db := postgrestest.NewDB(t, postgres.Options{})
			ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "late", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
				StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "alice", Request: core.HoldRequest{Seats: []string{"AUD-E-7"}}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev}, flow, core.Contact{})
			if err != nil {
				t.Fatal(err)
			}
			pay := fmt.Sprintf("pay_%d", b.ID)
			if err := db.SetPaymentID(ctx, b.ID, pay); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Pool().Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 s' WHERE id = $1`, h.ID); err != nil {
				t.Fatal(err)
			}
			secret := []byte("whsec")
			k := &kicks{}
			priv, _ := admission.GenerateKey()
			s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(admission.NewSigner(priv).PublicKey()),
				Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
				Payments: &corehttp.Payments{Bookings: db, Keys: db, Outbox: k, WebhookSecret: secret}}
			srv := httptest.NewServer(s.Handler())
			t.Cleanup(srv.Close)

			body, _ := json.Marshal(map[string]any{"id": "evt_late", "type": "payment.succeeded",
				"data": map[string]any{"object": map[string]any{"id": pay, "status": "succeeded", "reference": core.BookingReference(b.ID)}}})
			req, _ := http.NewRequest("POST", srv.URL+"/v1/webhooks/payments", bytes.NewReader(body))
			req.Header.Set(paysig.Header, paysig.Sign(secret, time.Now(), body))
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("late webhook: %d; want 200", resp.StatusCode)
			}
			var queued []core.JobKind
			rows, _ := db.Pool().Query(ctx, `SELECT kind FROM outbox WHERE booking_id = $1 AND status = 'PENDING'`, b.ID)
			for rows.Next() {
				var kind core.JobKind
				rows.Scan(&kind)
				queued = append(queued, kind)
			}
			rows.Close()
			if len(queued) != 1 {
				t.Fatalf("late %s payment queued %v; want one give-back job", flow, queued)
			}
			if got := k.kicked(); !slices.Contains(got, queued[0]) {
				t.Fatalf("late %s payment queued %s but kicked %v", flow, queued[0], got)
			}
		})
	}
}

// Issue 13, item 15: settlement matches the webhook's payment to the
// booking's payment and checks its amount and currency; money the booking
// does not keep is refunded through the outbox (a refund_stray job naming
// that payment), never acknowledged and kept. Each case sends signed
// webhooks to the core's handler over HTTP, on real PostgreSQL; the first
// is the control: the booking's own payment confirms it.
func TestStrayMoneyIsRefunded(t *testing.T) {
	type hook struct {
		event, payment string
		amountDelta    int64  // added to the booking's amount
		currency       string // "": the booking's
	}
	for _, tc := range []struct {
		name        string
		hooks       []hook
		wantOutcome string // of the last webhook
		wantStatus  core.BookingStatus
		wantStrays  []string // payments with a refund_stray job
		wantBooked  bool     // the hold's seat booked under the booking
	}{
		{"control: the booking's payment", []hook{{"evt_1", "pay_A", 0, ""}},
			string(core.BookingConfirmed), core.BookingConfirmed, nil, true},
		{"second payment on a settled booking", []hook{{"evt_1", "pay_A", 0, ""}, {"evt_2", "pay_B", 0, ""}},
			core.OutcomeStrayRefund, core.BookingConfirmed, []string{"pay_B"}, true},
		{"second payment told twice is refunded once", []hook{{"evt_1", "pay_A", 0, ""}, {"evt_2", "pay_B", 0, ""}, {"evt_3", "pay_B", 0, ""}},
			core.OutcomeStrayRefund, core.BookingConfirmed, []string{"pay_B"}, true},
		{"payment id not the booking's", []hook{{"evt_1", "pay_B", 0, ""}},
			core.OutcomeStrayRefund, core.BookingPending, []string{"pay_B"}, false},
		{"amount short", []hook{{"evt_1", "pay_A", -1, ""}},
			core.OutcomeStrayRefund, core.BookingFailed, []string{"pay_A"}, false},
		{"amount over", []hook{{"evt_1", "pay_A", 100, ""}},
			core.OutcomeStrayRefund, core.BookingFailed, []string{"pay_A"}, false},
		{"other currency", []hook{{"evt_1", "pay_A", 0, "USD"}},
			core.OutcomeStrayRefund, core.BookingFailed, []string{"pay_A"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := postgrestest.NewDB(t, postgres.Options{})
			ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "stray", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
				StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "alice", Request: core.HoldRequest{Seats: []string{"AUD-E-7"}}})
			if err != nil {
				t.Fatal(err)
			}
			b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev}, core.FlowAsync, core.Contact{})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.SetPaymentID(ctx, b.ID, "pay_A"); err != nil {
				t.Fatal(err)
			}
			secret := []byte("whsec")
			k := &kicks{}
			priv, _ := admission.GenerateKey()
			s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(admission.NewSigner(priv).PublicKey()),
				Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
				Payments: &corehttp.Payments{Bookings: db, Keys: db, Outbox: k, WebhookSecret: secret}}
			srv := httptest.NewServer(s.Handler())
			t.Cleanup(srv.Close)

			var outcome string
			for _, hk := range tc.hooks {
				currency := hk.currency
				if currency == "" {
					currency = b.Currency
				}
				body, _ := json.Marshal(map[string]any{"id": hk.event, "type": "payment.succeeded",
					"data": map[string]any{"object": map[string]any{"id": hk.payment, "status": "succeeded", "reference": core.BookingReference(b.ID),
						"amount": b.AmountPaise + hk.amountDelta, "currency": currency}}})
				req, _ := http.NewRequest("POST", srv.URL+"/v1/webhooks/payments", bytes.NewReader(body))
				req.Header.Set(paysig.Header, paysig.Sign(secret, time.Now(), body))
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var got struct {
					Outcome string `json:"outcome"`
				}
				json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("webhook %s: %d; want 200 (acknowledged)", hk.event, resp.StatusCode)
				}
				outcome = got.Outcome
			}
			if outcome != tc.wantOutcome {
				t.Errorf("last webhook's outcome = %q; want %q", outcome, tc.wantOutcome)
			}
			after, err := db.Booking(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.Status != tc.wantStatus || after.PaymentID != "pay_A" {
				t.Errorf("booking %s with payment %q; want %s with pay_A", after.Status, after.PaymentID, tc.wantStatus)
			}
			var strays []string
			rows, _ := db.Pool().Query(ctx, `SELECT payment_id FROM outbox WHERE booking_id = $1 AND kind = 'refund_stray' ORDER BY id`, b.ID)
			for rows.Next() {
				var p string
				rows.Scan(&p)
				strays = append(strays, p)
			}
			rows.Close()
			if !slices.Equal(strays, tc.wantStrays) {
				t.Errorf("stray refunds queued for %v; want %v", strays, tc.wantStrays)
			}
			if len(tc.wantStrays) > 0 && !slices.Contains(k.kicked(), core.JobStrayRefund) {
				t.Errorf("kicked %v; want the stray refund run now", k.kicked())
			}
			var booked int
			if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM seats WHERE booking_id = $1 AND status = 'BOOKED'`, b.ID).Scan(&booked); err != nil {
				t.Fatal(err)
			}
			if (booked == 1) != tc.wantBooked {
				t.Errorf("%d seats booked; want booked %v", booked, tc.wantBooked)
			}
		})
	}
}
