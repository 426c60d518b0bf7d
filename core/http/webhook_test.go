package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/paysim"
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
				Payments: &corehttp.Payments{Bookings: db, Keys: db, Outbox: k, Provider: paysim.New("", "", secret)}}
			srv := served(t, s.Handler())
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
//
// A failure decides a booking only when it is of the booking's own payment:
// a payment.failed for another payment (OTHER_PAYMENT) leaves it pending,
// and the booking's own payment then confirms it; one that comes before
// the booking recorded any payment id (FAILURE_PARKED) is applied when
// SetPaymentID records that payment, and never when it records another.
// The provider re-telling a settled booking's own payment with another
// amount refunds nothing: the booking and its seats stay, and the
// contradiction is counted for an alert.
func TestStrayMoneyIsRefunded(t *testing.T) {
	for _, tc := range []strayCase{
		{name: "control: the booking's payment", hooks: []strayHook{{event: "evt_1", payment: "pay_A"}},
			wantOutcome: string(core.BookingConfirmed), wantStatus: core.BookingConfirmed, wantBooked: true},
		{name: "second payment on a settled booking", hooks: []strayHook{{event: "evt_1", payment: "pay_A"}, {event: "evt_2", payment: "pay_B"}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingConfirmed, wantStrays: []string{"pay_B"}, wantBooked: true},
		{name: "second payment told twice is refunded once",
			hooks:       []strayHook{{event: "evt_1", payment: "pay_A"}, {event: "evt_2", payment: "pay_B"}, {event: "evt_3", payment: "pay_B"}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingConfirmed, wantStrays: []string{"pay_B"}, wantBooked: true},
		{name: "payment id not the booking's", hooks: []strayHook{{event: "evt_1", payment: "pay_B"}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingPending, wantStrays: []string{"pay_B"}},
		{name: "amount short", hooks: []strayHook{{event: "evt_1", payment: "pay_A", amountDelta: -1}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingFailed, wantStrays: []string{"pay_A"}},
		{name: "amount over", hooks: []strayHook{{event: "evt_1", payment: "pay_A", amountDelta: 100}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingFailed, wantStrays: []string{"pay_A"}},
		{name: "other currency", hooks: []strayHook{{event: "evt_1", payment: "pay_A", currency: "USD"}},
			wantOutcome: core.OutcomeStrayRefund, wantStatus: core.BookingFailed, wantStrays: []string{"pay_A"}},

		// A failure decides a booking only when it is of the booking's
		// own payment.
		{name: "control: the booking's payment failed", hooks: []strayHook{{event: "evt_1", payment: "pay_A", failed: true}},
			wantOutcome: string(core.BookingFailed), wantStatus: core.BookingFailed},
		{name: "another payment failed, then the booking's succeeded", hooks: []strayHook{
			{event: "evt_1", payment: "pay_B", failed: true, want: core.OutcomeOtherPayment, wantStatus: core.BookingPending},
			{event: "evt_2", payment: "pay_A"}},
			wantOutcome: string(core.BookingConfirmed), wantStatus: core.BookingConfirmed, wantBooked: true},
		{name: "the booking's payment failed before it was recorded", unrecorded: true, hooks: []strayHook{
			{event: "evt_1", payment: "pay_A", failed: true, want: core.OutcomeFailureParked, wantStatus: core.BookingPending}},
			wantOutcome: core.OutcomeFailureParked, wantStatus: core.BookingFailed},
		{name: "another payment failed before the booking's was recorded", unrecorded: true, hooks: []strayHook{
			{event: "evt_1", payment: "pay_B", failed: true, want: core.OutcomeFailureParked, wantStatus: core.BookingPending}},
			wantOutcome: core.OutcomeFailureParked, wantStatus: core.BookingPending},

		// The provider re-telling a settled booking's own payment with
		// another amount or currency: nothing refunded, an alert.
		{name: "the booking's own payment re-told with another amount", hooks: []strayHook{
			{event: "evt_1", payment: "pay_A", want: string(core.BookingConfirmed), wantStatus: core.BookingConfirmed},
			{event: "evt_2", payment: "pay_A", amountDelta: 100}},
			wantOutcome: core.OutcomeOwnPaymentMismatch, wantStatus: core.BookingConfirmed, wantBooked: true, wantAlerts: 1},
		{name: "the booking's own payment re-told in another currency", hooks: []strayHook{
			{event: "evt_1", payment: "pay_A"}, {event: "evt_2", payment: "pay_A", currency: "USD"}},
			wantOutcome: core.OutcomeOwnPaymentMismatch, wantStatus: core.BookingConfirmed, wantBooked: true, wantAlerts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

// strayHook is one signed webhook of TestStrayMoneyIsRefunded.
type strayHook struct {
	event, payment string
	amountDelta    int64  // added to the booking's amount
	currency       string // "": the booking's
	failed         bool   // payment.failed rather than payment.succeeded
	// want, when set, is this webhook's outcome, and wantStatus the
	// booking's status right after it.
	want       string
	wantStatus core.BookingStatus
}

// strayCase is a pending UPI booking whose payment is pay_A, the webhooks
// sent for it, and what they must leave.
type strayCase struct {
	name        string
	unrecorded  bool // pay_A is recorded after the webhooks (SetPaymentID), not before
	hooks       []strayHook
	wantOutcome string // of the last webhook
	wantStatus  core.BookingStatus
	wantStrays  []string // payments with a refund_stray job
	wantBooked  bool     // the hold's seat booked under the booking
	wantAlerts  float64  // onsale_core_provider_contradictions_total{source="webhook"}
}

func (tc strayCase) run(t *testing.T) {
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
	if !tc.unrecorded {
		if err := db.SetPaymentID(ctx, b.ID, "pay_A"); err != nil {
			t.Fatal(err)
		}
	}
	secret := []byte("whsec")
	k := &kicks{}
	priv, _ := admission.GenerateKey()
	met := metrics.New()
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(admission.NewSigner(priv).PublicKey()),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: met,
		Payments: &corehttp.Payments{Bookings: db, Keys: db, Outbox: k, Provider: paysim.New("", "", secret)}}
	srv := served(t, s.Handler())
	t.Cleanup(srv.Close)

	var outcome string
	for _, hk := range tc.hooks {
		currency := hk.currency
		if currency == "" {
			currency = b.Currency
		}
		typ, status := "payment.succeeded", "succeeded"
		if hk.failed {
			typ, status = "payment.failed", "failed"
		}
		body, _ := json.Marshal(map[string]any{"id": hk.event, "type": typ,
			"data": map[string]any{"object": map[string]any{"id": hk.payment, "status": status, "reference": core.BookingReference(b.ID),
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
		if hk.want != "" {
			now, err := db.Booking(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if outcome != hk.want || now.Status != hk.wantStatus {
				t.Fatalf("webhook %s (%s of %s): outcome %q, booking %s; want %q, %s", hk.event, typ, hk.payment, outcome, now.Status, hk.want, hk.wantStatus)
			}
		}
	}
	if tc.unrecorded {
		// The core records its payment's id once the provider answered;
		// a parked failure of that payment is applied now.
		if err := db.SetPaymentID(ctx, b.ID, "pay_A"); err != nil {
			t.Fatal(err)
		}
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
	if n := testutil.ToFloat64(met.ProviderContradictions.WithLabelValues("webhook")); n != tc.wantAlerts {
		t.Errorf("provider contradictions counted %v; want %v", n, tc.wantAlerts)
	}
}
