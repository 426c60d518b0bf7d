package proof

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// The payment experiments once more with the core's Razorpay adapter
// (ONSALE_PROVIDER=razorpay, core/razorpay) against the simulator's
// Razorpay dialect: UPI through Payment Links, no idempotency key but the
// refund's, X-Razorpay-Signature and X-Razorpay-Event-Id. Money is
// conserved to the paisa in each.

// payLink starts a UPI payment and checks the page the fan is sent to.
func (s *proofStack) payLink(t *testing.T, account, hold string) (int64, string) {
	t.Helper()
	r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", account, nil, "Idempotency-Key", "pay-"+hold)
	pay, _ := r.body["payment"].(map[string]any)
	if r.status != 201 || pay == nil {
		t.Fatalf("pay = %d %s", r.status, r.raw)
	}
	page, _ := url.Parse(fmt.Sprint(pay["checkout_url"]))
	want := fmt.Sprintf("http://onsale.test/events/%d/book", s.event)
	if page == nil || page.Query().Get("return") != want {
		t.Fatalf("checkout_url %v; want the link's page, returning the fan to %s", pay["checkout_url"], want)
	}
	return int64(r.body["booking"].(map[string]any)["booking_id"].(float64)), pay["id"].(string)
}

// Every UPI flow through the Razorpay adapter: a link paid, a link given
// up, a create whose answer was lost and is retried (the adapter finds the
// link the first attempt made: Razorpay has no idempotency key for links),
// a payment after the hold ran out (refunded once), a card refused.
func TestRazorpayUPIFlows(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectRazorpay})
	keep := map[string]int64{}

	t.Run("paid", func(t *testing.T) {
		hold := s.hold(t, "paid", "NU2-F-3")
		booking, link := s.payLink(t, "paid", hold)
		if _, err := s.sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "confirmed by payment_link.paid", func() bool { return s.captured(t, booking) })
		ref := bookingReference(booking)
		if tot := s.totals(ref); tot.Charged != 450000 || s.entries("charge", ref) != 1 {
			t.Fatalf("ledger %+v; want one charge of 4,500 rupees", tot)
		}
		keep[ref] = 450000
	})

	t.Run("given up", func(t *testing.T) {
		hold := s.hold(t, "gave-up", "NU2-F-4")
		booking, link := s.payLink(t, "gave-up", hold)
		s.givenUp(t, booking, link, "payment_link.expired")
	})

	t.Run("the create's answer lost", func(t *testing.T) {
		hold := s.hold(t, "lost", "NU2-F-5")
		beh := s.sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, 15*time.Second // made, answered after the core gave up (10 s)
		s.sim.SetBehaviour(beh)
		r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", "lost", nil, "Idempotency-Key", "lost-1")
		beh.TimeoutRate = 0
		s.sim.SetBehaviour(beh)
		if r.status != 502 {
			t.Fatalf("pay while the answer is lost = %d %s; want 502 provider_unavailable", r.status, r.raw)
		}
		before := s.sim.Refusals()["payment link creation with reference ID already attempted"]
		booking, link := s.payLink(t, "lost", hold) // the fan presses Pay again (another key: the page's retry)
		if s.sim.Refusals()["payment link creation with reference ID already attempted"] == before {
			t.Fatal("the retry's create was not refused: it did not reach Razorpay, the experiment tested nothing")
		}
		ref := bookingReference(booking)
		if _, err := s.sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "confirmed", func() bool { return s.captured(t, booking) })
		if tot := s.totals(ref); s.entries("charge", ref) != 1 || tot.Charged != 450000 {
			t.Fatalf("ledger %+v; want one link paid once", tot)
		}
		keep[ref] = 450000
	})

	t.Run("paid after the hold ran out", func(t *testing.T) {
		hold := s.hold(t, "late", "NU2-F-6")
		booking, link := s.payLink(t, "late", hold)
		s.expire(t, hold)
		if _, err := s.sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "refunded", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		if ref := bookingReference(booking); s.refunds(ref) != 1 || s.totals(ref).Net() != 0 {
			t.Fatalf("ledger %+v; want one refund, nothing kept", s.totals(ref))
		}
	})

	t.Run("a method Razorpay does not take here", func(t *testing.T) {
		hold := s.hold(t, "card", "NU2-F-7")
		r := s.confirmCard(t, "card", hold, "tok_visa", "c1")
		if r.status != 422 || r.body["error"] != "method_unavailable" {
			t.Fatalf("a card through Razorpay = %d %s; want 422 method_unavailable", r.status, r.raw)
		}
	})
	s.balanced(t, keep)
}

// Experiment 1 with Razorpay: every event delivered twice at the same
// moment: each booking confirmed once, nothing refunded.
func TestRazorpayDuplicateWebhooks(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectRazorpay})
	b := s.sim.Behaviour()
	b.DuplicateRate = 1
	s.sim.SetBehaviour(b)
	const n = 10
	keep := map[string]int64{}
	bookings := make([]int64, n)
	for i := range n {
		fan := fmt.Sprintf("dup-%d", i)
		var link string
		bookings[i], link = s.payLink(t, fan, s.hold(t, fan, fmt.Sprintf("EL2-D-%d", i+1)))
		if _, err := s.sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, bk := range bookings {
		eventually(t, "confirmed", func() bool { return s.captured(t, bk) })
		var amount int64
		s.db.QueryRow(ctx, `SELECT amount_paise FROM bookings WHERE id = $1`, bk).Scan(&amount)
		keep[bookingReference(bk)] = amount
	}
	s.sim.FlushWebhooks()
	dups := 0
	for _, d := range s.sim.Deliveries() {
		if d.Copy > 1 {
			dups++
		}
	}
	if dups == 0 {
		t.Fatal("no duplicate deliveries: the experiment tested nothing")
	}
	var events int
	s.db.QueryRow(ctx, `SELECT count(*) FROM payment_events`).Scan(&events)
	if events != n { // payment_link.paid, each once (payment.captured is acknowledged, not recorded)
		t.Errorf("%d distinct events recorded; want %d", events, n)
	}
	s.balanced(t, keep)
}

// Experiment 2 with Razorpay: a payment just after the hold ran out while
// a new fan asks for the seat at the same moment, 20 times: the fan gets
// the seat, the payer is refunded exactly once.
func TestRazorpayLatePaymentRefundedOnce(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectRazorpay, policy: policyRefund})
	s.lateRaces(t, 20, s.payLink, func(i int, ref string) {
		if n := s.refunds(ref); n != 1 {
			t.Errorf("race %d: %d refunds; want one", i, n)
		}
	})
	s.balanced(t, nil)
}

// Experiment 4 with Razorpay: the core is killed with SIGKILL between a
// late payment's REFUND_DUE and the refund's record. (a) The refund was
// carried out, its answer never came, and Razorpay has forgotten the
// refund's key by the restart: the adapter reads the payment first, finds
// it refunded whole and makes no second refund. (b) No refund had reached
// Razorpay (an outage): after the restart exactly one is made.
func TestRazorpayRefundSurvivesSIGKILL(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectRazorpay, coreEnv: []string{"ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=100ms"}})
	sim, c := s.sim, s.apps.Core
	late := func(account, seat string) (int64, string) {
		hold := s.hold(t, account, seat)
		booking, link := s.payLink(t, account, hold)
		s.expire(t, hold)
		return booking, link
	}
	restart := func(t *testing.T) {
		t.Helper()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("killed after Razorpay refunded, keys forgotten", func(t *testing.T) {
		booking, link := late("crash-a", "NL1-A-3")
		ref := bookingReference(booking)
		beh := sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, 30*time.Second
		sim.SetBehaviour(beh)
		if _, err := sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the refund at Razorpay", func() bool { return s.refunds(ref) == 1 })
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		if st := s.bookingStatus(t, booking); st != bookingRefundDue {
			t.Fatalf("booking at the kill: %s; want REFUND_DUE", st)
		}
		if sim.ForgetIdempotencyKeys() == 0 {
			t.Fatal("no refund key to forget: the experiment tests nothing")
		}
		beh.TimeoutRate = 0
		sim.SetBehaviour(beh)
		restart(t)
		eventually(t, "REFUNDED after the restart", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger %d refunds, %+v; want one, nothing kept", n, tot)
		}
	})

	t.Run("killed before any refund reached Razorpay", func(t *testing.T) {
		booking, link := late("crash-b", "NL1-A-4")
		ref := bookingReference(booking)
		sim.SetWebhookURL("") // Razorpay's own webhook waits; the test delivers one itself
		if _, err := sim.Settle(link, true); err != nil {
			t.Fatal(err)
		}
		beh := sim.Behaviour()
		beh.Outages = []paysim.Window{{Start: time.Now().Add(-time.Second), End: time.Now().Add(time.Hour)}}
		sim.SetBehaviour(beh)
		var amount int64
		s.db.QueryRow(ctx, `SELECT amount_paise FROM bookings WHERE id = $1`, booking).Scan(&amount)
		body := fmt.Sprintf(`{"entity":"event","account_id":"acc_paysim","event":"payment_link.paid","contains":["payment_link","payment"],`+
			`"payload":{"payment_link":{"entity":{"id":%q,"amount":%d,"currency":"INR","status":"paid","reference_id":"x",`+
			`"notes":{"reference":%q,"site":"onsale.test"}}},`+
			`"payment":{"entity":{"id":"pay_x","amount":%[2]d,"currency":"INR","status":"captured"}}},"created_at":%[4]d}`, link, amount, ref, time.Now().Unix())
		r := s.call(t, "POST", s.webhook, "", body, "X-Razorpay-Signature", hmacHex(webhookSecret, body), "X-Razorpay-Event-Id", "evt_crash_b")
		if r.status != 200 || r.body["outcome"] != bookingRefundDue {
			t.Fatalf("webhook = %d %s", r.status, r.raw)
		}
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		if n := s.refunds(ref); n != 0 {
			t.Fatalf("at the kill: %d refunds; want none yet", n)
		}
		beh.Outages = nil
		sim.SetBehaviour(beh)
		restart(t)
		eventually(t, "REFUNDED after the restart", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		sim.SetWebhookURL(s.coreURL + s.webhook) // Razorpay's own copies arrive at last: nothing more happens
		sim.FlushWebhooks()
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger %d refunds, %+v; want one, nothing kept", n, tot)
		}
	})
	s.balanced(t, nil)
}

// hmacHex is X-Razorpay-Signature: hex HMAC-SHA256 of body with secret.
func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}
