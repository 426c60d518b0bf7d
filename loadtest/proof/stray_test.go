package proof

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// payAtProvider makes a UPI payment for an order reference at the
// provider directly, under its own idempotency key, as a fan paying a
// second time from another tab (or an app that lost the first) would.
func (s *proofStack) payAtProvider(t *testing.T, key, ref string, amount int64, currency string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"amount": amount, "currency": currency, "reference": ref, "method": "upi", "capture": "automatic"})
	req, _ := http.NewRequest("POST", s.simURL+"/v1/payments", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		ID string `json:"id"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(b, &p) != nil || p.ID == "" {
		t.Fatalf("payment at the provider = %d %s", resp.StatusCode, b)
	}
	return p.ID
}

// Issue 13, item 15, end to end (bin/core, the simulator's signed
// webhooks): money a booking does not keep is refunded, the booking's own
// is kept. A second payment on a confirmed booking is refunded and the
// booking stays confirmed; a payment of another amount for a pending
// booking is refunded, and the booking's own payment then confirms it. In
// the provider's ledger each reference ends with exactly the booking's
// price taken.
func TestStrayPaymentsRefunded(t *testing.T) {
	s := newStack(t, stackOpts{})
	price := func(booking int64) (int64, string) {
		var amount int64
		var currency string
		if err := s.db.QueryRow(ctx, `SELECT amount_paise, currency FROM bookings WHERE id = $1`, booking).Scan(&amount, &currency); err != nil {
			t.Fatal(err)
		}
		return amount, currency
	}

	t.Run("second payment on a confirmed booking", func(t *testing.T) {
		hold := s.hold(t, "stray-1", "NL1-D-10")
		booking, pay := s.pay(t, "stray-1", hold, nil)
		if _, err := s.sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "CONFIRMED", func() bool { return s.bookingStatus(t, booking) == bookingConfirmed })
		amount, currency := price(booking)
		ref := bookingReference(booking)
		second := s.payAtProvider(t, "second-"+hold, ref, amount, currency)
		if _, err := s.sim.Settle(second, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the second payment refunded", func() bool { return s.refunds(ref) == 1 })
		if st, tot := s.bookingStatus(t, booking), s.totals(ref); st != bookingConfirmed || tot.Net() != amount {
			t.Fatalf("booking %s, ledger %+v; want CONFIRMED with %d kept", st, tot, amount)
		}
	})

	t.Run("another amount before the booking's own payment", func(t *testing.T) {
		hold := s.hold(t, "stray-2", "NL1-D-11")
		booking, pay := s.pay(t, "stray-2", hold, nil)
		amount, currency := price(booking)
		ref := bookingReference(booking)
		odd := s.payAtProvider(t, "odd-"+hold, ref, amount+100, currency)
		if _, err := s.sim.Settle(odd, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the odd payment refunded", func() bool { return s.refunds(ref) == 1 })
		if st := s.bookingStatus(t, booking); st != bookingPending {
			t.Fatalf("after another amount: booking %s; want still pending", st)
		}
		if _, err := s.sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "CONFIRMED", func() bool { return s.bookingStatus(t, booking) == bookingConfirmed })
		if tot := s.totals(ref); tot.Net() != amount || s.refunds(ref) != 1 {
			t.Fatalf("ledger %+v, %d refunds; want %d kept, one refund", tot, s.refunds(ref), amount)
		}
	})
}
