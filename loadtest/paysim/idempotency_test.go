package paysim_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

func TestIdempotency(t *testing.T) {
	key := func(k string) []string { return []string{paysim.IdempotencyKeyHeader, k} }

	t.Run("replay", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		first := e.call(t, "POST", "/v1/payments", upi("booking-1", 100), key("k1")...)
		e.sim.Settle(first.payment(t).ID, true) // the payment changes; the replay must not
		// Same parameters, other key order and spacing.
		again := e.call(t, "POST", "/v1/payments", ` { "reference":"booking-1", "method":"upi", "currency":"INR", "amount":100 } `, key("k1")...)
		if again.status != first.status || string(again.body) != string(first.body) {
			t.Errorf("replay = %d %s; want %d %s", again.status, again.body, first.status, first.body)
		}
		if first.header.Get(paysim.ReplayedHeader) != "" || again.header.Get(paysim.ReplayedHeader) != "true" {
			t.Errorf("Idempotent-Replayed: first %q, replay %q; want \"\", true",
				first.header.Get(paysim.ReplayedHeader), again.header.Get(paysim.ReplayedHeader))
		}
		if n := len(e.sim.Ledger().Entries); n != 1 {
			t.Errorf("%d ledger entries; want 1", n)
		}
	})

	t.Run("errors are replayed too", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		p := e.pay(t, card("booking-1", 100, "automatic"))
		path := "/v1/payments/" + p.ID + "/refunds"
		r1 := e.call(t, "POST", path, map[string]int{"amount": 100}, key("r1")...)
		r2 := e.call(t, "POST", path, map[string]int{"amount": 100}, key("r2")...)
		r1again := e.call(t, "POST", path, map[string]int{"amount": 100}, key("r1")...)
		r2again := e.call(t, "POST", path, map[string]int{"amount": 100}, key("r2")...)
		if r1.status != 201 || r2.status != 409 || string(r1again.body) != string(r1.body) || r2again.status != 409 || string(r2again.body) != string(r2.body) {
			t.Errorf("refunds: %d, %d, replays %d %s, %d %s", r1.status, r2.status, r1again.status, r1again.body, r2again.status, r2again.body)
		}
		if got := e.sim.Ledger().Totals["booking-1"].Refunded; got != 100 {
			t.Errorf("refunded %d; want 100", got)
		}
	})

	t.Run("capture twice with one key", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		p := e.pay(t, card("booking-1", 100, "manual"))
		a := e.call(t, "POST", "/v1/payments/"+p.ID+"/capture", nil, key("cap")...)
		b := e.call(t, "POST", "/v1/payments/"+p.ID+"/capture", nil, key("cap")...)
		c := e.call(t, "POST", "/v1/payments/"+p.ID+"/capture", nil, key("cap-2")...)
		if a.status != 200 || b.status != 200 || b.header.Get(paysim.ReplayedHeader) != "true" || c.status != 409 || c.errorCode() != paysim.EAlreadyCaptured {
			t.Errorf("captures = %d, %d (replayed %q), %d %s; want 200, 200 replayed, 409 already_captured",
				a.status, b.status, b.header.Get(paysim.ReplayedHeader), c.status, c.body)
		}
	})

	t.Run("other parameters", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		e.pay(t, upi("booking-1", 100), key("k1")...)
		r := e.call(t, "POST", "/v1/payments", upi("booking-1", 101), key("k1")...)
		if r.status != http.StatusUnprocessableEntity || r.errorCode() != paysim.EKeyReused {
			t.Errorf("changed amount = %d %s; want 422 idempotency_key_reused", r.status, r.body)
		}
		if n := len(e.sim.Ledger().Entries) + len(decodeAs[struct{ Data []paysim.Payment }](t, e.call(t, "GET", "/v1/payments", nil).body).Data); n != 1 {
			t.Errorf("%d payments and entries; want the one payment", n)
		}
	})

	t.Run("scoped by path", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		a := e.pay(t, card("booking-1", 100, "manual"))
		b := e.pay(t, card("booking-2", 100, "manual"))
		for _, p := range []paysim.Payment{a, b} {
			if r := e.call(t, "POST", "/v1/payments/"+p.ID+"/capture", nil, key("same")...); r.status != 200 || r.header.Get(paysim.ReplayedHeader) != "" {
				t.Errorf("capture %s = %d %s; want a fresh 200", p.ID, r.status, r.body)
			}
		}
	})

	t.Run("refused input stores nothing", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		bad := upi("booking-1", 0)
		if r := e.call(t, "POST", "/v1/payments", bad, key("k1")...); r.status != 400 {
			t.Fatalf("amount 0 = %d %s; want 400", r.status, r.body)
		}
		if r := e.call(t, "POST", "/v1/payments", upi("booking-1", 100), key("k1")...); r.status != 201 || r.header.Get(paysim.ReplayedHeader) != "" {
			t.Errorf("corrected request with the same key = %d %s; want a fresh 201", r.status, r.body)
		}
	})

	t.Run("key too long", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		long := fmt.Sprintf("%0256d", 0)
		if r := e.call(t, "POST", "/v1/payments", upi("booking-1", 100), key(long)...); r.status != 400 || r.errorCode() != paysim.EInvalid {
			t.Errorf("256-character key = %d %s; want 400", r.status, r.body)
		}
	})
}

// TestIdempotencyConcurrent sends one request 50 times at once. With the
// same key exactly one payment must exist; the control without a key shows
// that the test would see duplicates.
func TestIdempotencyConcurrent(t *testing.T) {
	const n = 50
	tests := []struct {
		name         string
		key          bool
		wantPayments int
	}{
		{"same key", true, 1},
		{"control: no key", false, n},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, quiet, nil)
			// Each request takes a while, as at a real provider, so that
			// the duplicates arrive while the first still runs.
			paysim.SetBeforeExec(e.sim, func() { time.Sleep(20 * time.Millisecond) })
			var hdr []string
			if tc.key {
				hdr = []string{paysim.IdempotencyKeyHeader, "charge:H1"}
			}
			var (
				wg        sync.WaitGroup
				start     = make(chan struct{})
				responses = make([]response, n)
			)
			for i := range n {
				wg.Go(func() {
					<-start
					r, err := e.try(http.DefaultClient, "POST", "/v1/payments", card("booking-1", 100, "automatic"),
						append([]string{"Authorization", "Bearer " + testKey}, hdr...)...)
					if err != nil {
						t.Error(err)
					}
					responses[i] = r
				})
			}
			close(start)
			wg.Wait()
			fresh, inProgress, ids := 0, 0, map[string]bool{}
			for _, r := range responses {
				switch {
				case r.status == 201:
					ids[r.payment(t).ID] = true
					if r.header.Get(paysim.ReplayedHeader) == "" {
						fresh++
					}
				case r.status == 409 && r.errorCode() == paysim.EInProgress:
					inProgress++
				default:
					t.Errorf("response %d %s; want 201 or 409 request_in_progress", r.status, r.body)
				}
			}
			l := e.sim.Ledger()
			if fresh != tc.wantPayments || len(ids) != tc.wantPayments || len(l.Entries) != tc.wantPayments || l.Totals["booking-1"].Captured != int64(100*tc.wantPayments) {
				t.Errorf("%d fresh responses, %d payment ids, %d ledger entries, %+v; want %d", fresh, len(ids), len(l.Entries), l.Totals["booking-1"], tc.wantPayments)
			}
			t.Logf("%d created, %d replayed, %d in progress", fresh, n-fresh-inProgress, inProgress)
		})
	}
}
