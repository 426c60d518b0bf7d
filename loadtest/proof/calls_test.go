package proof

import (
	"fmt"
	"strings"
	"testing"

	"github.com/onsale/onsale/loadtest/paysim"
)

// The provider calls a booking costs, per adapter and way to pay, counted
// by the simulator (every API request it answered, the ledger apart): for
// a confirmed booking, and for a payment that came after its hold ran out
// and went back. Five bookings each; the counts are exact (no retry is
// needed here), so a change that adds a call shows.
func TestProviderCallsPerBooking(t *testing.T) {
	type flow struct {
		provider, way string
		late          bool
		want          int // calls per booking
	}
	flows := []flow{
		{"paysim", "upi", false, 1}, {"paysim", "card", false, 2}, {"paysim", "card-page", false, 2},
		{"stripe", "card", false, 2}, {"stripe", "card-3ds", false, 2}, {"stripe", "card-page", false, 3},
		{"razorpay", "upi", false, 1},
		{"paysim", "upi", true, 2}, {"stripe", "card-3ds", true, 2}, {"stripe", "card-page", true, 3}, {"razorpay", "upi", true, 4},
	}
	const n = 5
	stacks := map[string]*proofStack{} // one per provider, for all its flows
	seats := map[string]int{}          // the next seat of each stack's
	for _, p := range []string{paysim.DialectPaysim, paysim.DialectStripe, paysim.DialectRazorpay} {
		stacks[p] = newStack(t, stackOpts{provider: p, policy: policyRefund})
	}
	for _, f := range flows {
		name := fmt.Sprintf("%s %s", f.provider, f.way)
		if f.late {
			name += " late"
		}
		t.Run(name, func(t *testing.T) {
			s := stacks[f.provider]
			before := s.sim.Calls()
			for i := range n {
				fan := fmt.Sprintf("%s-%s-%t-%d", f.provider, f.way, f.late, i)
				k := seats[f.provider]
				seats[f.provider]++
				hold := s.hold(t, fan, fmt.Sprintf("WU1-%s-%d", []string{"A", "B", "C", "D"}[k/25], 1+k%25))
				var booking int64
				var pending string // a payment the payer completes on the provider's page
				switch f.way {
				case "upi":
					if f.provider == "razorpay" {
						booking, pending = s.payLink(t, fan, hold)
					} else {
						booking, pending = s.pay(t, fan, hold, nil)
					}
				case "card":
					r := s.confirmCard(t, fan, hold, map[string]string{"paysim": "tok_visa", "stripe": pmVisa}[f.provider], "k-"+hold)
					if r.status != 200 {
						t.Fatalf("confirm = %d %s", r.status, r.raw)
					}
					booking = int64(r.body["booking_id"].(float64))
				case "card-3ds":
					booking, pending = s.threeDS(t, fan, hold)
				case "card-page":
					r := s.call(t, "POST", "/v1/holds/"+hold+"/confirm", fan, `{}`, "Idempotency-Key", "page-"+hold)
					if r.status != 202 {
						t.Fatalf("confirm without a token = %d %s", r.status, r.raw)
					}
					booking = int64(r.body["booking"].(map[string]any)["booking_id"].(float64))
					pending = r.body["payment"].(map[string]any)["id"].(string)
					pending = strings.Replace(pending, "cs_", "pi_", 1) // the simulator's payment behind a Checkout Session
				}
				if f.late {
					s.expire(t, hold)
				}
				if pending != "" {
					if _, err := s.sim.Settle(pending, true); err != nil {
						t.Fatal(err)
					}
				}
				if f.late {
					eventually(t, "given back", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
				} else {
					eventually(t, "confirmed and captured", func() bool { return s.captured(t, booking) })
				}
			}
			after, calls, detail := s.sim.Calls(), 0, []string{}
			for k, v := range after {
				if d := v - before[k]; d > 0 {
					calls += d
					detail = append(detail, fmt.Sprintf("%s %d", k, d))
				}
			}
			t.Logf("%s: %.1f provider calls per booking (%v)", name, float64(calls)/n, detail)
			if calls != f.want*n {
				t.Errorf("%s: %d calls for %d bookings; want %d each", name, calls, n, f.want)
			}
		})
	}
}
