package paysim_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// TestOutage: inside an outage window the API answers 503 with
// Retry-After and webhooks wait; when the outage ends they go out without
// having spent an attempt.
func TestOutage(t *testing.T) {
	e := newEnv(t, quiet, nil)
	p := e.pay(t, upi("booking-1", 100))
	beh := quiet
	now := time.Now()
	beh.Outages = []paysim.Window{{Start: now.Add(-time.Minute), End: now.Add(90 * time.Second)}}
	if err := e.sim.SetBehaviour(beh); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/v1/payments", "/v1/payments/" + p.ID} {
		method := "GET"
		var body any
		if path == "/v1/payments" {
			method, body = "POST", upi("booking-2", 100)
		}
		r := e.call(t, method, path, body)
		secs, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != http.StatusServiceUnavailable || r.errorCode() != paysim.EUnavailable || secs < 85 || secs > 90 {
			t.Errorf("%s %s in an outage = %d %s, Retry-After %q; want 503 unavailable, about 90", method, path, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	if r := e.call(t, "GET", "/v1/payments?reference=booking-2", nil); r.status != 503 {
		t.Errorf("list during outage = %d", r.status)
	}

	// The payer approves during the outage: the webhook waits. Wait until
	// the scheduler has looked at the queued webhook (a wrong scheduler
	// would have taken it off the queue and sent it by then).
	var sawQueued atomic.Bool
	paysim.SetAfterDue(e.sim, func(queued int) {
		if queued > 0 {
			sawQueued.Store(true)
		}
	})
	if _, err := e.sim.Settle(p.ID, true); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.FlushWebhooks(); n != 0 {
		t.Errorf("flush in an outage sent %d", n)
	}
	eventually(t, sawQueued.Load, "the scheduler to look at the queued webhook")
	if d := e.sim.Deliveries(); len(e.recv.all()) != 0 || len(d) != 1 || d[0].State != paysim.DeliveryQueued || d[0].Attempts != 0 {
		t.Fatalf("in an outage: %d received, deliveries %+v; want none, one queued", len(e.recv.all()), d)
	}
	// The ledger (for the checker) stays readable.
	if r := e.call(t, "GET", "/v1/ledger", nil); r.status != 200 {
		t.Errorf("ledger in an outage = %d", r.status)
	}

	// The outage ends early.
	beh.Outages = nil
	if err := e.sim.SetBehaviour(beh); err != nil {
		t.Fatal(err)
	}
	got := e.recv.wait(t, 1)
	// The receiver has the webhook before the simulator has its answer:
	// wait for the delivery to be answered before counting its attempts.
	eventually(t, func() bool { return e.sim.Deliveries()[0].State == paysim.DeliveryDelivered }, "the delivery answered")
	if got[0].event.Type != paysim.EventPaymentSucceeded || e.sim.Deliveries()[0].Attempts != 1 {
		t.Errorf("after the outage: %+v, %+v; want payment.succeeded at the first attempt", got[0].event, e.sim.Deliveries()[0])
	}
	if r := e.call(t, "POST", "/v1/payments", upi("booking-2", 100)); r.status != 201 || len(e.sim.Ledger().Entries) != 1 {
		t.Errorf("after the outage: POST = %d, %d entries; want 201, 1 (nothing recorded during it)", r.status, len(e.sim.Ledger().Entries))
	}
}

// TestOutageWindowOpensLater: a window in the future does nothing yet, and
// webhooks raised before it are held until it ends.
func TestOutageWindowOpensLater(t *testing.T) {
	beh := quiet
	start := time.Now().Add(300 * time.Millisecond)
	beh.Outages = []paysim.Window{{Start: start, End: start.Add(200 * time.Millisecond)}}
	beh.ReorderWindow = 0
	e := newEnv(t, beh, nil)
	p := e.pay(t, upi("booking-1", 100))
	time.Sleep(time.Until(start)) // the window opens at a time of day: wait for that time itself
	if r := e.call(t, "GET", "/v1/payments/"+p.ID, nil); r.status != 503 {
		t.Fatalf("GET in the window = %d; want 503", r.status)
	}
	e.sim.Settle(p.ID, true)
	got := e.recv.wait(t, 1)
	if got[0].at.Before(start.Add(200 * time.Millisecond)) {
		t.Errorf("webhook at %v, before the window ended at %v", got[0].at, start.Add(200*time.Millisecond))
	}
}

// TestTimeout: the provider carries out the request but answers after the
// client gave up. Retrying with the same Idempotency-Key returns the stored
// payment; the control retries without a key and pays twice.
func TestTimeout(t *testing.T) {
	tests := []struct {
		name         string
		key          string
		wantPayments int
	}{
		{"retry with the same key", "charge:H7", 1},
		{"control: retry without a key", "", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			beh := quiet
			beh.TimeoutRate, beh.TimeoutDelay = 1, time.Minute
			e := newEnv(t, beh, nil)
			hdr := []string{"Authorization", "Bearer " + testKey}
			if tc.key != "" {
				hdr = append(hdr, paysim.IdempotencyKeyHeader, tc.key)
			}
			impatient := &http.Client{Timeout: 100 * time.Millisecond}
			if r, err := e.try(impatient, "POST", "/v1/payments", card("booking-7", 4200, "automatic"), hdr...); err == nil {
				t.Fatalf("first attempt answered %d %s; want a client timeout", r.status, r.body)
			}
			// The payment exists, though the client never heard of it.
			if n := len(e.sim.Ledger().Entries); n != 1 {
				t.Fatalf("%d ledger entries after the timed-out request; want 1", n)
			}
			r, err := e.try(impatient, "POST", "/v1/payments", card("booking-7", 4200, "automatic"), hdr...)
			if tc.key != "" {
				if err != nil || r.status != 201 || r.header.Get(paysim.ReplayedHeader) != "true" {
					t.Fatalf("retry = %d %s (err %v); want the stored 201 at once", r.status, r.body, err)
				}
				if p := r.payment(t); p.Status != paysim.StatusSucceeded || p.Amount != 4200 {
					t.Errorf("stored payment %+v", p)
				}
			}
			l := e.sim.Ledger()
			if len(l.Entries) != tc.wantPayments || l.Totals["booking-7"].Captured != int64(4200*tc.wantPayments) {
				t.Errorf("ledger %+v; want %d charges", l.Totals["booking-7"], tc.wantPayments)
			}
		})
	}
}

// TestCloseReleasesHeldResponses: Close answers a response held back by
// TimeoutRate at once instead of after TimeoutDelay.
func TestCloseReleasesHeldResponses(t *testing.T) {
	beh := quiet
	beh.TimeoutRate, beh.TimeoutDelay = 1, time.Hour
	e := newEnv(t, beh, nil)
	done := make(chan response, 1)
	go func() {
		r, _ := e.try(http.DefaultClient, "POST", "/v1/payments", upi("booking-1", 100), "Authorization", "Bearer "+testKey)
		done <- r
	}()
	eventually(t, func() bool {
		return len(decodeAs[struct{ Data []paysim.Payment }](t, e.call(t, "GET", "/v1/payments", nil).body).Data) == 1
	}, "the payment")
	closed := make(chan struct{})
	go func() { e.sim.Close(); close(closed) }()
	select {
	case r := <-done:
		if r.status != 201 {
			t.Errorf("released response = %d %s; want 201", r.status, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held response not released by Close")
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
}
