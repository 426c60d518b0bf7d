package proof

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// The payment experiments once more with the core's Stripe adapter
// (ONSALE_PROVIDER=stripe, core/stripe on stripe-go) against the
// simulator's Stripe dialect: PaymentIntents with manual capture, Stripe's
// test cards, its idempotency (keys forgotten after a day), its events and
// Stripe-Signature. Money is conserved to the paisa in each.

// Stripe's test PaymentMethods.
const (
	pmVisa     = "pm_card_visa"
	pmDeclined = "pm_card_chargeDeclined"
	pm3DS      = "pm_card_threeDSecure2Required"
)

// confirmCard confirms a hold with a card under key.
func (s *proofStack) confirmCard(t *testing.T, account, hold, pm, key string) reply {
	t.Helper()
	return s.call(t, "POST", "/v1/holds/"+hold+"/confirm", account, map[string]any{"payment_token": pm}, "Idempotency-Key", key)
}

// threeDS confirms a hold with a card that needs 3-D Secure: 202, the
// booking waiting for the payer, and the page the fan is sent to. It
// returns the booking and the PaymentIntent.
func (s *proofStack) threeDS(t *testing.T, account, hold string) (int64, string) {
	t.Helper()
	r := s.confirmCard(t, account, hold, pm3DS, "3ds-"+hold)
	pay, _ := r.body["payment"].(map[string]any)
	bk, _ := r.body["booking"].(map[string]any)
	if r.status != 202 || pay == nil || bk == nil {
		t.Fatalf("confirm with a 3-D Secure card = %d %s; want 202 with the booking and the payment", r.status, r.raw)
	}
	page, _ := url.Parse(fmt.Sprint(pay["checkout_url"]))
	want := fmt.Sprintf("http://onsale.test/events/%d/book", s.event)
	if page == nil || !strings.Contains(page.Path, "/checkout/pi_") && !strings.Contains(page.Path, "/checkout/pay_") || page.Query().Get("return") != want {
		t.Fatalf("checkout_url %v; want the provider's page, returning the fan to %s", pay["checkout_url"], want)
	}
	return int64(bk["booking_id"].(float64)), pay["id"].(string)
}

func (s *proofStack) entries(typ, ref string) int {
	n := 0
	for _, e := range s.sim.Ledger().Entries {
		if e.Type == typ && e.Reference == ref {
			n++
		}
	}
	return n
}

// captured reports whether a booking is CONFIRMED and its money taken.
func (s *proofStack) captured(t *testing.T, id int64) bool {
	var ok bool
	s.db.QueryRow(ctx, `SELECT status = 'CONFIRMED' AND captured_at IS NOT NULL FROM bookings WHERE id = $1`, id).Scan(&ok)
	return ok
}

// balanced fails when any reference in the ledger keeps or holds money
// other than the confirmed bookings' captures.
func (s *proofStack) balanced(t *testing.T, keep map[string]int64) {
	t.Helper()
	for ref, tot := range s.sim.Ledger().Totals {
		if tot.Net() != keep[ref] || tot.Held() != 0 {
			t.Errorf("%s: ledger %+v; want %d kept, nothing held", ref, tot, keep[ref])
		}
	}
}

// Every card flow through the Stripe adapter: an authorization captured
// after the seats are booked (tickets at once), a declined card, a 3-D
// Secure step passed and failed, one passed after the hold ran out (the
// authorization cancelled), and a show cancelled after its capture (the
// money refunded). Money to the paisa at the end.
func TestStripeCardFlows(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectStripe})
	keep := map[string]int64{}

	t.Run("authorized, captured, ticketed", func(t *testing.T) {
		hold := s.hold(t, "visa", "NU2-F-3")
		r := s.confirmCard(t, "visa", hold, pmVisa, "v1")
		if r.status != 200 || r.body["status"] != bookingConfirmed || r.body["captured"] != true || len(r.body["tickets"].([]any)) != 1 {
			t.Fatalf("confirm = %d %s; want 200 CONFIRMED, captured, one ticket", r.status, r.raw)
		}
		ref := bookingReference(int64(r.body["booking_id"].(float64)))
		if again := s.confirmCard(t, "visa", hold, pmVisa, "v1"); again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the same confirm again = %d %s; want the stored answer", again.status, again.raw)
		}
		tot := s.totals(ref)
		if s.entries("authorization", ref) != 1 || tot.Captured != 450000 || tot.Authorized != 450000 {
			t.Fatalf("ledger %+v; want one authorization of 4,500 rupees, captured", tot)
		}
		keep[ref] = tot.Captured
	})

	t.Run("declined", func(t *testing.T) {
		hold := s.hold(t, "declined", "NU2-F-4")
		r := s.confirmCard(t, "declined", hold, pmDeclined, "d1")
		if r.status != 402 || r.body["error"] != ePaymentDeclined {
			t.Fatalf("declined card = %d %s; want 402 payment_declined", r.status, r.raw)
		}
		var status string
		s.db.QueryRow(ctx, `SELECT status FROM bookings WHERE hold_id = $1`, hold).Scan(&status)
		if status != bookingFailed {
			t.Fatalf("booking after the decline = %s; want FAILED", status)
		}
	})

	t.Run("3-D Secure passed", func(t *testing.T) {
		hold := s.hold(t, "3ds-ok", "NU2-F-5")
		booking, pi := s.threeDS(t, "3ds-ok", hold)
		if st := s.bookingStatus(t, booking); st != bookingPending {
			t.Fatalf("booking while the payer is at the bank = %s; want PAYMENT_PENDING", st)
		}
		if _, err := s.sim.Settle(pi, true); err != nil { // the payer passes the step
			t.Fatal(err)
		}
		eventually(t, "confirmed and captured by webhook and outbox", func() bool { return s.captured(t, booking) })
		ref := bookingReference(booking)
		keep[ref] = s.totals(ref).Captured
		if keep[ref] != 450000 {
			t.Fatalf("ledger %+v; want 4,500 rupees captured", s.totals(ref))
		}
	})

	t.Run("3-D Secure failed", func(t *testing.T) {
		hold := s.hold(t, "3ds-no", "NU2-F-6")
		booking, pi := s.threeDS(t, "3ds-no", hold)
		if _, err := s.sim.Settle(pi, false); err != nil {
			t.Fatal(err)
		}
		eventually(t, "FAILED by webhook", func() bool { return s.bookingStatus(t, booking) == bookingFailed })
	})

	t.Run("3-D Secure passed after the hold ran out", func(t *testing.T) {
		hold := s.hold(t, "3ds-late", "NU2-F-7")
		booking, pi := s.threeDS(t, "3ds-late", hold)
		s.expire(t, hold)
		if _, err := s.sim.Settle(pi, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the authorization cancelled", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		ref := bookingReference(booking)
		if tot := s.totals(ref); s.entries("void", ref) != 1 || tot.Captured != 0 || tot.Voided != tot.Authorized {
			t.Fatalf("ledger %+v; want the authorization cancelled once, nothing captured", tot)
		}
	})

	t.Run("a method Stripe does not take", func(t *testing.T) {
		hold := s.hold(t, "upi", "NU2-F-8")
		r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", "upi", `{}`, "Idempotency-Key", "u1")
		if r.status != 422 || r.body["error"] != "method_unavailable" {
			t.Fatalf("UPI through Stripe = %d %s; want 422 method_unavailable", r.status, r.raw)
		}
		var n int
		s.db.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE hold_id = $1`, hold).Scan(&n)
		if n != 0 {
			t.Fatalf("%d bookings for the refused payment; want none", n)
		}
	})

	// The fans' web pages: no token, the card typed on Stripe's page (a
	// Checkout Session), authorized there, captured after the seats are
	// booked; given up; or finished after the hold ran out.
	hosted := func(t *testing.T, account, seat string) (int64, string, string) {
		t.Helper()
		hold := s.hold(t, account, seat)
		r := s.call(t, "POST", "/v1/holds/"+hold+"/confirm", account, `{}`, "Idempotency-Key", "web-"+hold)
		pay, _ := r.body["payment"].(map[string]any)
		if r.status != 202 || pay == nil || !strings.HasPrefix(fmt.Sprint(pay["id"]), "cs_") || pay["checkout_url"] == nil {
			t.Fatalf("confirm without a token = %d %s; want 202 with a Checkout Session and its page", r.status, r.raw)
		}
		cs := pay["id"].(string)
		return int64(r.body["booking"].(map[string]any)["booking_id"].(float64)), hold, "pi_" + strings.TrimPrefix(cs, "cs_")
	}
	t.Run("the card typed on Stripe's page", func(t *testing.T) {
		booking, _, pi := hosted(t, "web", "NU2-F-9")
		if _, err := s.sim.Settle(pi, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "confirmed by checkout.session.completed, captured", func() bool { return s.captured(t, booking) })
		ref := bookingReference(booking)
		if tot := s.totals(ref); tot.Captured != 450000 || s.entries("capture", ref) != 1 {
			t.Fatalf("ledger %+v; want 4,500 rupees captured once", tot)
		}
		keep[ref] = 450000
	})
	t.Run("Stripe's page given up", func(t *testing.T) {
		booking, _, pi := hosted(t, "web-no", "NU2-F-10")
		s.givenUp(t, booking, pi, "checkout.session.expired")
	})
	t.Run("Stripe's page finished after the hold ran out", func(t *testing.T) {
		booking, hold, pi := hosted(t, "web-late", "NU2-F-11")
		s.expire(t, hold)
		if _, err := s.sim.Settle(pi, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the authorization cancelled", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		if ref := bookingReference(booking); s.entries("void", ref) != 1 || s.totals(ref).Captured != 0 {
			t.Fatalf("ledger %+v; want the authorization cancelled once", s.totals(ref))
		}
	})

	t.Run("show cancelled: the captured money refunded", func(t *testing.T) {
		r := s.operatorCall(t, "POST", fmt.Sprintf("/operator/v1/events/%d/cancel", s.event), `{"reason":"Rain."}`)
		if r.status != 200 {
			t.Fatalf("cancel = %d %s", r.status, r.raw)
		}
		eventuallyFor(t, 30*time.Second, "every refund settled", func() bool {
			r := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/cancellation", s.event), nil)
			return r.status == 200 && r.body["done"] == true
		})
		for ref := range keep {
			if n := s.entries("refund", ref); n != 1 {
				t.Errorf("%s: %d refunds; want one", ref, n)
			}
		}
		s.balanced(t, nil) // nothing kept by anyone
	})
}

// Experiment 1 with Stripe: every event delivered twice at the same
// moment. Each 3-D Secure payment confirms its booking once and is
// captured once; nothing is refunded.
func TestStripeDuplicateWebhooks(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectStripe})
	b := s.sim.Behaviour()
	b.DuplicateRate = 1
	s.sim.SetBehaviour(b)
	const n = 10
	bookings := make([]int64, n)
	keep := map[string]int64{}
	for i := range n {
		fan := fmt.Sprintf("dup-%d", i)
		var pi string
		bookings[i], pi = s.threeDS(t, fan, s.hold(t, fan, fmt.Sprintf("EL2-D-%d", i+1)))
		if _, err := s.sim.Settle(pi, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, bk := range bookings {
		eventually(t, "captured", func() bool { return s.captured(t, bk) })
		var amount int64
		s.db.QueryRow(ctx, `SELECT amount_paise FROM bookings WHERE id = $1`, bk).Scan(&amount)
		keep[bookingReference(bk)] = amount // the booking's price, taken once
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
	for _, bk := range bookings {
		if ref := bookingReference(bk); s.entries("capture", ref) != 1 || s.entries("refund", ref) != 0 {
			t.Errorf("booking %d: %d captures, %d refunds; want one capture, no refund", bk, s.entries("capture", ref), s.entries("refund", ref))
		}
	}
	s.balanced(t, keep)
	t.Logf("%d payments, %d deliveries of which %d duplicate copies", n, len(s.sim.Deliveries()), dups)
}

// Experiment 2 with Stripe: the payer passes the 3-D Secure step just
// after the hold ran out while a new fan asks for the seat at the same
// moment, 20 times: the fan gets the seat, and each late authorization is
// cancelled exactly once (nothing captured, nothing held).
func TestStripeLateAuthorizationReleasedOnce(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectStripe, policy: policyRefund})
	s.lateRaces(t, 20, s.threeDS, func(i int, ref string) {
		if tot := s.totals(ref); s.entries("void", ref) != 1 || tot.Captured != 0 {
			t.Errorf("race %d: %d voids, ledger %+v; want the authorization cancelled once", i, s.entries("void", ref), tot)
		}
	})
	s.balanced(t, nil)
}

// givenUp fails one attempt on the provider's page of a booking's pending
// payment (the page stays open: the booking stays PAYMENT_PENDING), then
// lets the page's time run out: the provider's event (expired) fails the
// booking.
func (s *proofStack) givenUp(t *testing.T, booking int64, pending, expired string) {
	t.Helper()
	if _, err := s.sim.Settle(pending, false); err != nil {
		t.Fatal(err)
	}
	s.sim.FlushWebhooks()
	if st := s.bookingStatus(t, booking); st != bookingPending {
		t.Fatalf("after a failed attempt on the open page: %s; want PAYMENT_PENDING (the payer may try again there)", st)
	}
	if _, err := s.sim.Expire(pending); err != nil {
		t.Fatal(err)
	}
	eventually(t, "FAILED by "+expired, func() bool { return s.bookingStatus(t, booking) == bookingFailed })
}

// lateRaces runs n races on a stack with the refund policy: a payment
// started (start: the booking and the payment its payer completes on the
// provider's page), its hold expired, then the payer completing it while a
// new fan asks for the seat at the same moment. The fan must get the seat
// and the booking end REFUNDED; check looks at each booking's ledger.
func (s *proofStack) lateRaces(t *testing.T, n int, start func(*testing.T, string, string) (int64, string), check func(i int, ref string)) {
	t.Helper()
	bookings, pending, seats := make([]int64, n), make([]string, n), make([]string, n)
	for i := range n {
		seats[i] = fmt.Sprintf("WU1-%s-%d", []string{"A", "B", "C", "D"}[i/25], 1+i%25)
		hold := s.hold(t, fmt.Sprintf("payer-%d", i), seats[i])
		bookings[i], pending[i] = start(t, fmt.Sprintf("payer-%d", i), hold)
		s.expire(t, hold)
	}
	time.Sleep(2500 * time.Millisecond) // the core's memory of taken seats catches up with the expiry (see TestLatePaymentRefundedOnce)
	got := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() { defer wg.Done(); s.sim.Settle(pending[i], true) }()
		go func() {
			defer wg.Done()
			r := s.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), fmt.Sprintf("fan-%d", i), map[string]any{"seats": []string{seats[i]}})
			got[i] = r.status == 201
		}()
	}
	wg.Wait()
	for i, bk := range bookings {
		if !got[i] {
			t.Errorf("race %d: the new fan did not get the seat", i)
		}
		eventually(t, "given back", func() bool { return s.bookingStatus(t, bk) == bookingRefunded })
		check(i, bookingReference(bk))
	}
}

// Experiment 4 with Stripe: the core is killed with SIGKILL while money
// goes back, and Stripe has forgotten the idempotency keys by the time it
// is restarted (a day passed: the simulator forgets them all). (a) A late
// authorization's cancel was carried out, its answer never came; after
// the restart the cancel is sent again, Stripe refuses it (the
// PaymentIntent is cancelled already) and the adapter, looking the
// PaymentIntent up, takes that as done: one void. (b) A show is cancelled
// with captured card bookings and the core killed midway through the
// refunds; after the restart, the refunds already made are refused by
// Stripe (nothing left to refund) and checked against the charge: one
// refund each.
func TestStripeGiveBackSurvivesSIGKILLAndForgottenKeys(t *testing.T) {
	s := newStack(t, stackOpts{provider: paysim.DialectStripe, coreEnv: []string{"ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=100ms"}})
	sim, c := s.sim, s.apps.Core
	killAndForget := func(t *testing.T) {
		t.Helper()
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		if sim.ForgetIdempotencyKeys() == 0 {
			t.Fatal("the simulator had no keys to forget: the experiment tests nothing")
		}
		beh := sim.Behaviour()
		beh.TimeoutRate = 0
		sim.SetBehaviour(beh)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the cancel of a late authorization", func(t *testing.T) {
		hold := s.hold(t, "crash-a", "NL1-A-3")
		booking, pi := s.threeDS(t, "crash-a", hold)
		s.expire(t, hold)
		ref := bookingReference(booking)
		beh := sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, 30*time.Second // carried out, answered late
		sim.SetBehaviour(beh)
		if _, err := sim.Settle(pi, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the cancel at the provider", func() bool { return s.entries("void", ref) == 1 })
		if st := s.bookingStatus(t, booking); st != bookingRefundDue {
			t.Fatalf("booking at the kill: %s; want REFUND_DUE (the cancel not yet recorded)", st)
		}
		before := sim.Refusals()["payment_intent_unexpected_state"]
		killAndForget(t)
		eventually(t, "REFUNDED after the restart", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		if sim.Refusals()["payment_intent_unexpected_state"] == before {
			t.Fatal("no cancel was refused after the restart: the retry past a day never reached Stripe, the experiment tested nothing")
		}
		if tot := s.totals(ref); s.entries("void", ref) != 1 || tot.Net() != 0 || tot.Held() != 0 {
			t.Fatalf("ledger %d voids, %+v; want one, nothing kept or held", s.entries("void", ref), tot)
		}
	})

	t.Run("the refunds of a cancelled show", func(t *testing.T) {
		const n = 12
		bookings := make([]int64, n)
		for i := range n {
			fan := fmt.Sprintf("crash-b-%d", i)
			r := s.confirmCard(t, fan, s.hold(t, fan, fmt.Sprintf("WU1-B-%d", i+1)), pmVisa, "b-"+fan)
			if r.status != 200 || r.body["captured"] != true {
				t.Fatalf("confirm = %d %s", r.status, r.raw)
			}
			bookings[i] = int64(r.body["booking_id"].(float64))
		}
		beh := sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, time.Second // each refund carried out, its answer a second late
		sim.SetBehaviour(beh)
		if r := s.operatorCall(t, "POST", fmt.Sprintf("/operator/v1/events/%d/cancel", s.event), `{"reason":"Flood."}`); r.status != 200 {
			t.Fatalf("cancel = %d %s", r.status, r.raw)
		}
		eventually(t, "some refunds at Stripe", func() bool { return s.refundedAtProvider(bookings) >= 2 })
		atKill := s.refundedAtProvider(bookings)
		before := sim.Refusals()["charge_already_refunded"]
		killAndForget(t)
		t.Logf("SIGKILL with %d of %d refunds at Stripe; keys forgotten", atKill, n)
		if atKill == n {
			t.Fatal("every refund was done before the kill: the experiment killed nothing midway")
		}
		eventuallyFor(t, 60*time.Second, "every refund settled", func() bool {
			r := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/cancellation", s.event), nil)
			return r.status == 200 && r.body["done"] == true
		})
		if bad := s.notRefundedOnce(bookings); len(bad) > 0 {
			t.Fatalf("not refunded exactly once: %v", bad)
		}
		if sim.Refusals()["charge_already_refunded"] == before {
			t.Fatal("no refund was refused after the restart: no refund made before the kill was sent again, the experiment tested nothing")
		}
		s.balanced(t, nil)
	})
}
