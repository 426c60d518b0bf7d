package proof

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/paysig"
)

// smtpSink is an in-process SMTP server keeping what it receives.
type smtpSink struct {
	mu   sync.Mutex
	msgs []string
}

func (s *smtpSink) NewSession(*smtp.Conn) (smtp.Session, error) { return s, nil }
func (s *smtpSink) Mail(string, *smtp.MailOptions) error        { return nil }
func (s *smtpSink) Rcpt(string, *smtp.RcptOptions) error        { return nil }
func (s *smtpSink) Reset()                                      {}
func (s *smtpSink) Logout() error                               { return nil }
func (s *smtpSink) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.mu.Lock()
	s.msgs = append(s.msgs, string(b))
	s.mu.Unlock()
	return err
}

// newSMTPSink starts the sink and returns it with its address (host:port).
func newSMTPSink(t *testing.T) (*smtpSink, string) {
	sink := &smtpSink{}
	srv := smtp.NewServer(sink)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sink, ln.Addr().String()
}

// The async (UPI) flow end to end: hold, Pay, the payer approves, the signed
// webhook confirms, tickets are signed, mailed with QR codes and texted.
func TestUPIFlow(t *testing.T) {
	sink, smtpAddr := newSMTPSink(t)
	s := newStack(t, stackOpts{sms: true, smtp: smtpAddr})
	hold := s.hold(t, "fan-1", "NL1-C-10", "NL1-C-11")
	booking, pay := s.pay(t, "fan-1", hold, map[string]any{"email": "fan@example.com", "phone": "+919800000001"})
	if st := s.bookingStatus(t, booking); st != bookingPending {
		t.Fatalf("after Pay: %s", st)
	}
	var expires time.Time
	s.db.QueryRow(ctx, `SELECT expires_at FROM holds WHERE id = $1`, hold).Scan(&expires)
	if left := time.Until(expires); left < 9*time.Minute {
		t.Errorf("hold has %v left after Pay; want 8 + 2 minutes", left)
	}
	if _, err := s.sim.Settle(pay, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CONFIRMED", func() bool { return s.bookingStatus(t, booking) == bookingConfirmed })

	r := s.call(t, "GET", fmt.Sprintf("/v1/bookings/%d", booking), "fan-1", nil)
	if r.status != 200 {
		t.Fatalf("GET booking = %d %s", r.status, r.raw)
	}
	tickets := r.body["tickets"].([]any)
	if len(tickets) != 2 {
		t.Fatalf("%d tickets; want 2", len(tickets))
	}
	for _, x := range tickets {
		tk := x.(map[string]any)
		c, err := s.ticketClaims(t, tk["payload"].(string))
		if err != nil || c.Booking != booking || float64(c.N) != tk["n"] {
			t.Errorf("ticket %v: %+v, %v", tk["ticket_id"], c, err)
		}
		png := s.call(t, "GET", tk["qr"].(string), "fan-1", nil)
		if png.status != 200 || !strings.HasPrefix(string(png.raw), "\x89PNG") {
			t.Errorf("QR %s = %d", tk["qr"], png.status)
		}
	}
	if r := s.call(t, "GET", fmt.Sprintf("/v1/bookings/%d", booking), "someone-else", nil); r.status != 403 {
		t.Errorf("GET another's booking = %d", r.status)
	}
	eventually(t, "ticket email and SMS", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.msgs) == 1 && len(s.sim.SMS()) == 1
	})
	if !strings.Contains(sink.msgs[0], "ticket-") || !strings.Contains(s.sim.SMS()[0].Body, fmt.Sprint(booking)) {
		t.Errorf("email or SMS lacks the tickets")
	}
	tot := s.totals(bookingReference(booking))
	if tot.Captured != 2*1500000 || tot.Refunded != 0 {
		t.Errorf("ledger = %+v; want 30,000 rupees captured, nothing refunded", tot)
	}
}

// Idempotency-Key semantics on Pay: missing, replayed, reused with another
// body, and sent again while the first is still running.
func TestIdempotencyKeys(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "fan-2", "SL1-A-1")
	path := "/v1/holds/" + hold + "/payment"

	if r := s.call(t, "POST", path, "fan-2", `{}`); r.status != 400 || r.body["error"] != eIdemMissing {
		t.Fatalf("Pay without a key = %d %s", r.status, r.raw)
	}
	// The provider answers slowly: a second click with the same key, while
	// the first waits, is told the first is in flight.
	b := s.sim.Behaviour()
	b.TimeoutRate, b.TimeoutDelay = 1, 1500*time.Millisecond
	s.sim.SetBehaviour(b)
	first := make(chan reply)
	go func() { first <- s.call(t, "POST", path, "fan-2", `{"email":"a@b.c"}`, "Idempotency-Key", "k1") }()
	eventually(t, "the first request in flight", func() bool {
		var n int
		s.db.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE account = 'fan-2' AND key = 'k1' AND state = 'IN_FLIGHT'`).Scan(&n)
		return n == 1
	})
	if r := s.call(t, "POST", path, "fan-2", `{"email":"a@b.c"}`, "Idempotency-Key", "k1"); r.status != 409 || r.body["error"] != eIdemInFlight {
		t.Errorf("same key while in flight = %d %s", r.status, r.raw)
	}
	r1 := <-first
	b.TimeoutRate = 0
	s.sim.SetBehaviour(b)
	if r1.status != 201 {
		t.Fatalf("first Pay = %d %s", r1.status, r1.raw)
	}
	r2 := s.call(t, "POST", path, "fan-2", `{"email":"a@b.c"}`, "Idempotency-Key", "k1")
	if r2.status != 201 || r2.header.Get("Idempotent-Replayed") != "true" || string(r2.raw) != string(r1.raw) {
		t.Errorf("replay = %d %q (replayed %q); want the first answer again", r2.status, r2.raw, r2.header.Get("Idempotent-Replayed"))
	}
	if r := s.call(t, "POST", path, "fan-2", `{"email":"other@b.c"}`, "Idempotency-Key", "k1"); r.status != 422 || r.body["error"] != eIdemReused {
		t.Errorf("same key, other body = %d %s", r.status, r.raw)
	}
	// Another key for the same hold is the same booking and the same payment.
	r3 := s.call(t, "POST", path, "fan-2", `{}`, "Idempotency-Key", "k2")
	if r3.status != 201 || r3.body["payment"].(map[string]any)["id"] != r1.body["payment"].(map[string]any)["id"] {
		t.Errorf("Pay with a new key = %d %s; want the same payment", r3.status, r3.raw)
	}
	var payments int
	for _, e := range s.sim.Ledger().Entries {
		if e.Type != "refund" {
			payments++
		}
	}
	if n := len(s.sim.Deliveries()); payments != 0 || n != 0 {
		t.Errorf("ledger has %d entries and %d webhooks before the payer approved", payments, n)
	}
	var keys int
	s.db.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE expires_at BETWEEN now() + interval '23 hours' AND now() + interval '25 hours'`).Scan(&keys)
	if keys != 2 {
		t.Errorf("%d keys kept for 24 hours; want 2", keys)
	}
}

// Webhooks that do not verify change nothing; an unknown order is
// acknowledged and recorded.
func TestWebhookRejects(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "fan-3", "WL1-B-7")
	booking, pay := s.pay(t, "fan-3", hold, nil)
	body := fmt.Sprintf(`{"id":"evt_forged","type":"payment.succeeded","created":%d,"data":{"object":{"id":%q,"status":"succeeded","reference":%q}}}`,
		time.Now().Unix(), pay, bookingReference(booking))
	send := func(sig, b string) reply {
		return s.call(t, "POST", "/v1/webhooks/payments", "", b, paysig.Header, sig, "Content-Type", "application/json")
	}
	good := paysig.Sign([]byte(webhookSecret), time.Now(), []byte(body))
	tests := []struct {
		name, sig, body string
	}{
		{"no signature", "", body},
		{"wrong secret", paysig.Sign([]byte("guessed"), time.Now(), []byte(body)), body},
		{"tampered body", good, strings.Replace(body, "succeeded", "succeeded ", 1)},
		{"replayed after 6 minutes", paysig.Sign([]byte(webhookSecret), time.Now().Add(-6*time.Minute), []byte(body)), body},
		{"garbage header", "v1=abc", body},
	}
	for _, tc := range tests {
		if r := send(tc.sig, tc.body); r.status != 400 || r.body["error"] != eBadSignature {
			t.Errorf("%s: %d %s; want 400 invalid_signature", tc.name, r.status, r.raw)
		}
	}
	notJSON := `{"id":`
	if r := send(paysig.Sign([]byte(webhookSecret), time.Now(), []byte(notJSON)), notJSON); r.status != 400 {
		t.Errorf("signed garbage = %d %s", r.status, r.raw)
	}
	if st := s.bookingStatus(t, booking); st != bookingPending {
		t.Fatalf("rejected webhooks changed the booking to %s", st)
	}
	unknown := `{"id":"evt_unknown","type":"payment.succeeded","created":1,"data":{"object":{"id":"pay_nobody","status":"succeeded","reference":"booking-999999"}}}`
	r := send(paysig.Sign([]byte(webhookSecret), time.Now(), []byte(unknown)), unknown)
	if r.status != 200 || r.body["outcome"] != outcomeUnknown {
		t.Fatalf("unknown order = %d %s; want 200 UNKNOWN_ORDER", r.status, r.raw)
	}
	var outcome string
	s.db.QueryRow(ctx, `SELECT outcome FROM payment_events WHERE id = 'evt_unknown'`).Scan(&outcome)
	if outcome != outcomeUnknown {
		t.Errorf("unknown order recorded as %q", outcome)
	}
}

// Experiment 1, end to end: the provider delivers every webhook twice at
// the same moment: each booking is confirmed once and nothing is refunded.
func TestDuplicateDeliveries(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.sim.Behaviour()
	b.DuplicateRate = 1
	s.sim.SetBehaviour(b)
	const n = 20
	refs := make([]int64, n)
	for i := range n {
		hold := s.hold(t, fmt.Sprintf("fan-%d", i), fmt.Sprintf("EL2-D-%d", i+1))
		booking, pay := s.pay(t, fmt.Sprintf("fan-%d", i), hold, nil)
		refs[i] = booking
		if _, err := s.sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, bk := range refs {
		eventually(t, "confirmed", func() bool { return s.bookingStatus(t, bk) == bookingConfirmed })
	}
	s.sim.FlushWebhooks()
	var events, dups int
	s.db.QueryRow(ctx, `SELECT count(*) FROM payment_events`).Scan(&events)
	for _, d := range s.sim.Deliveries() {
		if d.Copy > 1 {
			dups++
		}
	}
	for _, bk := range refs {
		if tot := s.totals(bookingReference(bk)); tot.Refunded != 0 || tot.Captured == 0 {
			t.Errorf("booking %d: ledger %+v; want captured, nothing refunded", bk, tot)
		}
	}
	t.Logf("%d payments, %d webhook deliveries of which %d duplicate copies, %d distinct events recorded", n, len(s.sim.Deliveries()), dups, events)
}

// Experiment 2, end to end: a payment just after expiry while a new fan asks
// for the seat at the same moment, 100 times: the fan gets the seat, and the
// payer is refunded exactly once in the provider's ledger.
func TestLatePaymentRefundedOnce(t *testing.T) {
	s := newStack(t, stackOpts{policy: policyRefund})
	const n = 100
	type race struct {
		booking int64
		fanHold string
	}
	races := make([]race, n)
	seats, pays := make([]string, n), make([]string, n)
	for i := range n {
		seats[i] = fmt.Sprintf("WU1-%s-%d", []string{"A", "B", "C", "D"}[i/25], 1+i%25)
		hold := s.hold(t, fmt.Sprintf("payer-%d", i), seats[i])
		races[i].booking, pays[i] = s.pay(t, fmt.Sprintf("payer-%d", i), hold, nil)
		s.expire(t, hold)
	}
	// The holds ran out by a write to the database, not by time: the core's
	// memory of taken seats (core/seatmap.Taken) still has them held until
	// their real end, and refuses them without a statement until its next
	// snapshot shows the lapse, within a second or two (seatmap.Interval, DefaultMaxAge). A hold
	// that lapses by time is never refused from it; this test's time travel
	// waits that out once.
	time.Sleep(2500 * time.Millisecond)
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for i := range n {
		seat, pay := seats[i], pays[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var inner sync.WaitGroup
			inner.Add(2)
			go func() { defer inner.Done(); s.sim.Settle(pay, true) }()
			go func() {
				defer inner.Done()
				r := s.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), fmt.Sprintf("fan-%d", i), map[string]any{"seats": []string{seat}})
				if r.status == 201 {
					races[i].fanHold = r.body["hold_id"].(string)
				}
			}()
			inner.Wait()
		}()
	}
	wg.Wait()
	for i, r := range races {
		if r.fanHold == "" {
			t.Errorf("race %d: the new fan did not get the seat of an expired hold", i)
		}
		eventually(t, "refunded", func() bool { return s.bookingStatus(t, r.booking) == bookingRefunded })
		ref := bookingReference(r.booking)
		if got, tot := s.refunds(ref), s.totals(ref); got != 1 || tot.Net() != 0 {
			t.Errorf("race %d: %d refunds, ledger %+v; want exactly one refund and nothing kept", i, got, tot)
		}
	}
}

// Experiment 5: a double-clicked confirm (same Idempotency-Key, at the same
// moment), 20 times: one authorization and one capture each.
func TestDoubleClickedConfirm(t *testing.T) {
	s := newStack(t, stackOpts{})
	const n = 20
	for i := range n {
		account := fmt.Sprintf("card-fan-%d", i)
		hold := s.hold(t, account, fmt.Sprintf("SU2-K-%d", i+1), fmt.Sprintf("SU2-K-%d", i+21))
		var replies [2]reply
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[k] = s.call(t, "POST", "/v1/holds/"+hold+"/confirm", account, `{"payment_token":"tok_visa"}`, "Idempotency-Key", "click-"+hold)
			}()
		}
		wg.Wait()
		ok := 0
		for _, r := range replies {
			switch {
			case r.status == 200 && r.body["status"] == bookingConfirmed:
				ok++
			case r.status == 409 && r.body["error"] == eIdemInFlight:
			default:
				t.Fatalf("click = %d %s", r.status, r.raw)
			}
		}
		if ok == 0 {
			t.Fatalf("neither click confirmed: %s / %s", replies[0].raw, replies[1].raw)
		}
		// The click told "in flight" retries and gets the stored answer.
		again := s.call(t, "POST", "/v1/holds/"+hold+"/confirm", account, `{"payment_token":"tok_visa"}`, "Idempotency-Key", "click-"+hold)
		if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry after the double click = %d %s", again.status, again.raw)
		}
		ref := bookingReference(int64(again.body["booking_id"].(float64)))
		authorizations := 0
		for _, e := range s.sim.Ledger().Entries {
			if e.Reference == ref && e.Type == "authorization" {
				authorizations++
			}
		}
		eventually(t, "captured", func() bool { return s.totals(ref).Captured > 0 })
		if tot := s.totals(ref); authorizations != 1 || tot.Captured != tot.Authorized || tot.Refunded != 0 {
			t.Fatalf("hold %s: %d authorizations, ledger %+v; want one charge", hold, authorizations, tot)
		}
	}
}

// The card flow on an expired hold: 410, and the authorization is voided.
func TestConfirmExpiredHold(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "late-card", "EU1-Z-9")
	// Pay starts, then the hold runs out before the authorization comes back.
	r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", "late-card", `{}`, "Idempotency-Key", "p1")
	if r.status != 201 {
		t.Fatalf("pay = %d %s", r.status, r.raw)
	}
	s.expire(t, hold)
	r = s.call(t, "POST", "/v1/holds/"+hold+"/confirm", "late-card", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "c1")
	if r.status != 409 || r.body["error"] != ePaymentInProgress {
		t.Errorf("card confirm while a UPI payment is pending = %d %s; want 409 payment_in_progress", r.status, r.raw)
	}
	upi := int64(r.body["booking_id"].(float64))
	if st := s.bookingStatus(t, upi); st != bookingPending {
		t.Errorf("the UPI booking is %s after the refused card confirm; want it untouched, PAYMENT_PENDING", st)
	}
	// Confirm on a hold that expired already: 410 before any money moves.
	hold2 := s.hold(t, "late-card-2", "EU1-Z-10")
	s.expire(t, hold2)
	r = s.call(t, "POST", "/v1/holds/"+hold2+"/confirm", "late-card-2", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "c2")
	if r.status != 410 || r.body["error"] != eHoldExpired {
		t.Fatalf("confirm on an expired hold = %d %s; want 410 hold_expired", r.status, r.raw)
	}
	// The hold runs out while the bank is authorizing: the booking finds
	// its seats gone, the authorization is voided, the fan gets 410.
	hold3 := s.hold(t, "late-card-3", "EU1-Z-11")
	beh := s.sim.Behaviour()
	beh.TimeoutRate, beh.TimeoutDelay = 1, 800*time.Millisecond
	s.sim.SetBehaviour(beh)
	expired := make(chan struct{})
	go func() {
		defer close(expired)
		// After the Pay step's extension, before the authorization answers: the
		// provider has the authorization (its answer is 800 ms late).
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var ref string
			if s.db.QueryRow(ctx, `SELECT 'booking-' || id FROM bookings WHERE hold_id = $1`, hold3).Scan(&ref) == nil && s.ledgerHas("authorization", ref) {
				s.expire(t, hold3)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("the authorization never reached the provider")
	}()
	r = s.call(t, "POST", "/v1/holds/"+hold3+"/confirm", "late-card-3", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "c3")
	<-expired
	beh.TimeoutRate = 0
	s.sim.SetBehaviour(beh)
	if r.status != 410 || r.body["error"] != eHoldExpired {
		t.Fatalf("hold expired during authorization: %d %s; want 410 hold_expired", r.status, r.raw)
	}
	ref := bookingReference(int64(r.body["booking_id"].(float64)))
	eventually(t, "the void", func() bool { return s.totals(ref).Voided > 0 })
	if tot := s.totals(ref); tot.Authorized == 0 || tot.Voided != tot.Authorized || tot.Captured != 0 {
		t.Fatalf("ledger %+v; want the authorization voided, nothing captured", tot)
	}
	for ref, tot := range s.sim.Ledger().Totals {
		if tot.Net() != 0 || tot.Held() != 0 {
			t.Errorf("%s: ledger %+v; want nothing taken or held", ref, tot)
		}
	}
}

// A payment whose webhook never arrives is settled by the reconciler.
func TestReconcilerSettlesLostWebhook(t *testing.T) {
	s := newStack(t, stackOpts{coreEnv: []string{"ONSALE_RECONCILE_AFTER=1s"}})
	s.sim.SetWebhookURL("") // webhooks wait forever: lost, as far as the core knows
	hold := s.hold(t, "fan-r", "NU1-E-5")
	booking, pay := s.pay(t, "fan-r", hold, nil)
	if _, err := s.sim.Settle(pay, true); err != nil {
		t.Fatal(err)
	}
	// The core's reconciler asks the provider about bookings pending over a
	// second (ONSALE_RECONCILE_AFTER=1s): wait until it has settled one.
	eventually(t, "the reconciler", func() bool { return s.metric(t, "onsale_core_reconciled_bookings_total") >= 1 })
	if n := s.metric(t, "onsale_core_reconciled_bookings_total"); n != 1 {
		t.Fatalf("reconciled %v bookings; want 1 booking settled", n)
	}
	if st := s.bookingStatus(t, booking); st != bookingConfirmed {
		t.Fatalf("after reconcile: %s; want CONFIRMED", st)
	}
	// The webhook, delivered at last, is recognised as already settled.
	s.sim.SetWebhookURL(s.coreURL + "/v1/webhooks/payments")
	s.sim.FlushWebhooks()
	if st := s.bookingStatus(t, booking); st != bookingConfirmed || s.totals(bookingReference(booking)).Refunded != 0 {
		t.Fatalf("late webhook after reconcile: %s, ledger %+v", st, s.totals(bookingReference(booking)))
	}
}

// A declined card: 402, the booking FAILED, nothing charged. The fan tries
// another card while the hold lasts: a new booking (attempt 2, a new
// provider key), confirmed and captured, with its tickets.
func TestDeclinedCard(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "declined", "NU2-F-3")
	r := s.call(t, "POST", "/v1/holds/"+hold+"/confirm", "declined", `{"payment_token":"tok_decline"}`, "Idempotency-Key", "d1")
	if r.status != 402 || r.body["error"] != ePaymentDeclined {
		t.Fatalf("declined card = %d %s; want 402 payment_declined", r.status, r.raw)
	}
	var first int64
	var status string
	s.db.QueryRow(ctx, `SELECT id, status FROM bookings WHERE hold_id = $1 ORDER BY id LIMIT 1`, hold).Scan(&first, &status)
	if status != bookingFailed {
		t.Fatalf("booking after decline = %s; want FAILED", status)
	}
	r = s.call(t, "POST", "/v1/holds/"+hold+"/confirm", "declined", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "d2")
	if r.status != 200 || r.body["status"] != bookingConfirmed || r.body["attempt"] != 2.0 || len(r.body["tickets"].([]any)) != 1 {
		t.Fatalf("second card = %d %s; want 200 CONFIRMED, attempt 2, one ticket", r.status, r.raw)
	}
	second := int64(r.body["booking_id"].(float64))
	if tot := s.totals(bookingReference(first)); tot.Net() != 0 || tot.Held() != 0 {
		t.Errorf("declined booking: %+v; want nothing taken or held", tot)
	}
	if tot := s.totals(bookingReference(second)); tot.Captured != 450000 || tot.Refunded != 0 {
		t.Errorf("second booking: %+v; want 4,500 rupees captured", tot)
	}
}

// Bad input on the payment routes: each gets a 4xx JSON error and changes
// nothing (no booking, no payment at the provider).
func TestPaymentBadInput(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "fan-b", "SL2-M-4")
	pay, confirm := "/v1/holds/"+hold+"/payment", "/v1/holds/"+hold+"/confirm"
	tests := []struct {
		name, path, account, body string
		hdr                       []string
		status                    int
		code                      string
	}{
		{"no admit token", pay, "", `{}`, []string{"Idempotency-Key", "b1"}, 401, eUnauthorized},
		{"someone else's hold", pay, "intruder", `{}`, []string{"Idempotency-Key", "b2"}, 403, eForbidden},
		{"unknown hold", "/v1/holds/00000000-0000-4000-8000-000000000001/payment", "fan-b", `{}`, []string{"Idempotency-Key", "b3"}, 404, eNotFound},
		{"no idempotency key", pay, "fan-b", `{}`, nil, 400, eIdemMissing},
		{"idempotency key too long", pay, "fan-b", `{}`, []string{"Idempotency-Key", strings.Repeat("k", 300)}, 400, eIdemMissing},
		{"malformed JSON", pay, "fan-b", `{"email":`, []string{"Idempotency-Key", "b4"}, 400, eInvalid},
		{"unknown field", pay, "fan-b", `{"mail":"a@b.c"}`, []string{"Idempotency-Key", "b5"}, 400, eInvalid},
		{"email not an address", pay, "fan-b", `{"email":"fan at home"}`, []string{"Idempotency-Key", "b6"}, 400, eInvalid},
		{"phone with letters", pay, "fan-b", `{"phone":"call me"}`, []string{"Idempotency-Key", "b7"}, 400, eInvalid},
		{"payment token on the UPI route", pay, "fan-b", `{"payment_token":"tok_visa"}`, []string{"Idempotency-Key", "b8"}, 400, eInvalid},
		{"confirm with a card number for a token", confirm, "fan-b", `{"payment_token":"4111 1111 1111 1111"}`, []string{"Idempotency-Key", "b9"}, 400, eInvalid},
		{"confirm with the card's digits for a token", confirm, "fan-b", `{"payment_token":"4111111111111111"}`, []string{"Idempotency-Key", "b9"}, 400, eInvalid},
		{"body over 64 KiB", pay, "fan-b", `{"email":"` + strings.Repeat("a", 70<<10) + `"}`, []string{"Idempotency-Key", "b10"}, 413, eTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.call(t, "POST", tc.path, tc.account, tc.body, tc.hdr...)
			if r.status != tc.status || r.body["error"] != tc.code {
				t.Fatalf("%s = %d %s; want %d %s", tc.name, r.status, r.raw, tc.status, tc.code)
			}
		})
	}
	var bookings int
	s.db.QueryRow(ctx, `SELECT count(*) FROM bookings`).Scan(&bookings)
	if bookings != 0 || len(s.sim.Ledger().Entries) != 0 {
		t.Fatalf("bad input left %d bookings and %d ledger entries", bookings, len(s.sim.Ledger().Entries))
	}
}

// A messy provider: slow and failing payers, every other webhook
// duplicated, webhooks reordered, a fifth of the holds expiring before the
// payer approves. Every payment ends as a confirmed booking or a refund,
// and the money adds up to the paisa for every booking.
func TestMessyProvider(t *testing.T) {
	s := newStack(t, stackOpts{})
	b := s.sim.Behaviour()
	b.UPIDelayMin, b.UPIDelayMax = 50*time.Millisecond, 400*time.Millisecond
	b.FailRate, b.DuplicateRate, b.ReorderWindow = 0.2, 0.5, 200*time.Millisecond
	if err := s.sim.SetBehaviour(b); err != nil {
		t.Fatal(err)
	}
	const n = 60
	type order struct {
		booking int64
		amount  int64
		expired bool
	}
	orders := make([]order, n)
	for i := range n {
		account := fmt.Sprintf("messy-%d", i)
		hold := s.hold(t, account, fmt.Sprintf("NL2-%s-%d", []string{"P", "Q", "R"}[i/20], 1+i%20))
		r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", account, `{}`, "Idempotency-Key", "m-"+hold)
		if r.status != 201 {
			t.Fatalf("pay = %d %s", r.status, r.raw)
		}
		bk := r.body["booking"].(map[string]any)
		orders[i] = order{booking: int64(bk["booking_id"].(float64)), amount: int64(bk["amount_paise"].(float64))}
		if i%5 == 0 {
			// The payer may approve (50 ms at the soonest) before the test gets
			// here on a busy machine: a hold already booked is not expired after
			// the fact, and its order is judged as the unexpired one it was.
			orders[i].expired = s.expireActive(t, hold)
		}
	}
	counts := map[string]int{}
	expired := 0
	for _, o := range orders {
		if o.expired {
			expired++
		}
		eventually(t, "a final status", func() bool {
			st := s.bookingStatus(t, o.booking)
			return st == bookingConfirmed || st == bookingRefunded || st == bookingFailed
		})
		st := s.bookingStatus(t, o.booking)
		counts[st]++
		tot := s.totals(bookingReference(o.booking))
		switch {
		case st == bookingConfirmed && (o.expired || tot.Captured != o.amount || tot.Refunded != 0):
			t.Errorf("booking %d CONFIRMED (expired hold %v) with ledger %+v; want %d captured, nothing refunded", o.booking, o.expired, tot, o.amount)
		case st == bookingRefunded && (tot.Captured != o.amount || tot.Refunded != o.amount):
			t.Errorf("booking %d REFUNDED with ledger %+v; want %d taken and given back", o.booking, tot, o.amount)
		case st == bookingFailed && tot.Net() != 0:
			t.Errorf("booking %d FAILED with ledger %+v; want nothing kept", o.booking, tot)
		}
	}
	t.Logf("%d payments through a messy provider: %v; %d of %d holds expired before the payer approved", n, counts, expired, (n+4)/5)
	if expired == 0 {
		t.Errorf("no hold was expired before its payer approved: the expired-hold case was not exercised")
	}
}

// The card is authorized and the seats booked, but the capture is refused
// for good (the authorization was cancelled by the issuer meanwhile): no
// tickets were shown, the booking fails, the seats go back on sale and the
// account gets its quota back.
func TestCaptureRefused(t *testing.T) {
	s := newStack(t, stackOpts{})
	hold := s.hold(t, "card-x", "WL2-C-1", "WL2-C-2")
	beh := s.sim.Behaviour()
	// The authorization is answered late, so the outage below surely starts
	// before the core's capture.
	beh.TimeoutRate, beh.TimeoutDelay = 1, 800*time.Millisecond
	s.sim.SetBehaviour(beh)
	var r reply
	done := make(chan struct{})
	go func() {
		defer close(done)
		r = s.call(t, "POST", "/v1/holds/"+hold+"/confirm", "card-x", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "x1")
	}()
	// The provider goes down right after the authorization: the capture fails for now.
	eventually(t, "the authorization", func() bool {
		for _, e := range s.sim.Ledger().Entries {
			if e.Type == "authorization" {
				return true
			}
		}
		return false
	})
	beh.TimeoutRate = 0
	beh.Outages = []paysim.Window{{Start: time.Now().Add(-time.Second), End: time.Now().Add(time.Hour)}}
	s.sim.SetBehaviour(beh)
	<-done
	if r.status != 202 {
		t.Fatalf("confirm with the capture failing = %d %s; want 202 (confirmed, capture pending)", r.status, r.raw)
	}
	if _, ok := r.body["booking"].(map[string]any)["tickets"]; ok {
		t.Fatalf("tickets shown before the capture: %s", r.raw)
	}
	booking := int64(r.body["booking"].(map[string]any)["booking_id"].(float64))
	pay := r.body["booking"].(map[string]any)["payment_id"].(string)
	// The issuer cancels the authorization; the provider comes back.
	beh.Outages = nil
	s.sim.SetBehaviour(beh)
	if err := s.cancelAtProvider("issuer-cancel", pay); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the booking failed", func() bool { return s.bookingStatus(t, booking) == bookingFailed })
	var free, counted int
	s.db.QueryRow(ctx, `SELECT count(*) FROM seats WHERE seat_id IN ('WL2-C-1', 'WL2-C-2') AND status = 'AVAILABLE'`).Scan(&free)
	s.db.QueryRow(ctx, `SELECT tickets FROM account_tickets WHERE account = 'card-x'`).Scan(&counted)
	if free != 2 || counted != 0 {
		t.Fatalf("after the refused capture: %d of 2 seats free, account counts %d; want 2 and 0", free, counted)
	}
	if tot := s.totals(bookingReference(booking)); tot.Net() != 0 || tot.Held() != 0 {
		t.Fatalf("ledger %+v; want nothing taken or held", tot)
	}
	if g := s.call(t, "GET", fmt.Sprintf("/v1/bookings/%d", booking), "card-x", nil); g.status != 200 || g.body["tickets"] != nil {
		t.Fatalf("GET the failed booking = %d %s; want no tickets", g.status, g.raw)
	}
}
