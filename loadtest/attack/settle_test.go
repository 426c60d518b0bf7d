package attack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/paysig"
)

// --- settlement matching (issue 13, item 15): the provider's word on a
// payment settles a booking only when the payment is the booking's; money
// the booking does not keep is refunded, a failure of another payment
// leaves the booking as it is.

// The core's answers to a webhook it acknowledged (core.Outcome*): the
// loadtest module does not import the core, so they are spelled here.
const (
	outcomeStrayRefund   = "STRAY_REFUND"
	outcomeOtherPayment  = "OTHER_PAYMENT"
	outcomeFailureParked = "FAILURE_PARKED"
)

// payAtProvider makes a UPI payment for reference ref at the simulator
// directly, as a fan paying a second time from another tab would, and
// returns its id (pending: the simulator settles none by itself for an
// hour).
func (s *attackStack) payAtProvider(t testing.TB, c *http.Client, key, ref string, amount int64, currency string) string {
	t.Helper()
	r := do(t, c, "POST", s.paysim+"/v1/payments",
		map[string]any{"amount": amount, "currency": currency, "reference": ref, "method": "upi", "capture": "automatic"},
		append(bearer(stack.ProviderKey), "Idempotency-Key", key)...)
	id, _ := r.body["id"].(string)
	if r.status != 201 || id == "" {
		t.Fatalf("payment at the provider = %s %s", r.seen(), r.raw)
	}
	return id
}

// succeedAtProvider approves a pending UPI payment at the simulator (its
// control API, as the payer approving it in the app) and returns the
// payment as the provider now reports it. The simulator also sends its own
// signed payment.succeeded to the core (the stack's webhook URL).
func (s *attackStack) succeedAtProvider(t testing.TB, c *http.Client, id string) paysim.Payment {
	t.Helper()
	r := do(t, c, "POST", s.paysim+"/_sim/payments/"+id+"/succeed", nil)
	var p paysim.Payment
	if r.status != 200 || json.Unmarshal(r.raw, &p) != nil || p.Status != paysim.StatusSucceeded {
		t.Fatalf("approving payment %s at the provider = %s %s", id, r.seen(), r.raw)
	}
	return p
}

// ledger is the simulator's ledger of one reference.
func (s *attackStack) ledger(t testing.TB, c *http.Client, ref string) paysim.Ledger {
	t.Helper()
	r := do(t, c, "GET", s.paysim+"/v1/ledger?reference="+url.QueryEscape(ref), nil, bearer(stack.ProviderKey)...)
	var l paysim.Ledger
	if r.status != 200 || json.Unmarshal(r.raw, &l) != nil {
		t.Fatalf("ledger of %s = %s %s", ref, r.seen(), r.raw)
	}
	return l
}

// refundsOf counts a payment's refund entries in a ledger.
func refundsOf(l paysim.Ledger, payment string) (n int, amount int64) {
	for _, e := range l.Entries {
		if e.Type == paysim.EntryRefund && e.PaymentID == payment {
			n++
			amount += e.Amount
		}
	}
	return n, amount
}

// deliver sends body as the provider does, genuinely signed now, through
// the gateway.
func (s *attackStack) deliver(t testing.TB, c *http.Client, body []byte) reply {
	t.Helper()
	return do(t, c, "POST", s.gateway+"/v1/webhooks/payments", body,
		paysig.Header, paysig.Sign([]byte(stack.WebhookSecret), time.Now(), body))
}

// waitFor polls cond every 100 ms until it holds, for at most 20 s: the
// core's own work after an answer (the simulator's webhook, a queued job).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after 20 s for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rowsBut fingerprints a table's rows but those where except holds ($1 is
// arg), by row (the outbox by its jobs, as snap does): what an
// acknowledged webhook must leave alone in a table it writes.
func (s *attackStack) rowsBut(t testing.TB, table, except string, arg any) string {
	t.Helper()
	row := "t::text"
	if p, ok := jobsOnly[table]; ok {
		row = p
	}
	var count int64
	var sum string
	q := `SELECT count(*), coalesce(md5(string_agg(` + row + `, '|' ORDER BY ` + row + `)), '') FROM ` + table + ` t WHERE NOT coalesce(` + except + `, false)`
	if err := s.db.QueryRow(ctx, q, arg).Scan(&count, &sum); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%s", count, sum)
}

// secondPaymentOnSettled: a booking confirmed by its own payment, then a
// second genuine payment for the same booking reference succeeds at the
// provider and its signed webhook comes through the gateway. The booking
// keeps its status and seats, the second payment is refunded whole, and
// nothing but that payment's event and refund job is written. (The
// simulator also delivers its own copy of the event to the core; whichever
// comes first queues the one refund job, and both answer STRAY_REFUND.)
func secondPaymentOnSettled(t *testing.T, s *attackStack) string {
	c := client(8)
	booking, own := s.pending(t, "fan-paid-twice")
	s.succeedAtProvider(t, c, own)
	waitFor(t, "the booking confirmed by its own payment", func() bool { return s.bookingStatus(t, booking) == "CONFIRMED" })
	var amount int64
	var currency string
	if err := s.db.QueryRow(ctx, `SELECT amount_paise, currency FROM bookings WHERE id = $1`, booking).Scan(&amount, &currency); err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("booking-%d", booking)
	before := s.settled(t, s.event)

	second := s.payAtProvider(t, c, "second-"+ref, ref, amount, currency)
	const otherJobs = `(t.kind = 'refund_stray' AND t.payment_id = $1)`
	const otherEvents = `(t.payment_id = $1)`
	jobsBefore, eventsBefore := s.rowsBut(t, "outbox", otherJobs, second), s.rowsBut(t, "payment_events", otherEvents, second)
	p := s.succeedAtProvider(t, c, second)
	obj, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"id":"evt_second_%s","type":"payment.succeeded","created":%d,"data":{"object":%s}}`, second, time.Now().Unix(), obj)
	r := s.deliver(t, c, body)
	if outcome, _ := r.body["outcome"].(string); r.status != 200 || outcome != outcomeStrayRefund {
		t.Errorf("second payment's webhook = %s %s; want 200 outcome %s", r.seen(), r.raw, outcomeStrayRefund)
	}
	waitFor(t, "the second payment refunded at the provider", func() bool {
		n, _ := refundsOf(s.ledger(t, c, ref), second)
		return n > 0
	})

	st := s.bookingStatus(t, booking)
	if st != "CONFIRMED" {
		t.Errorf("booking %d = %s after a second payment; want CONFIRMED", booking, st)
	}
	l := s.ledger(t, c, ref)
	if n, back := refundsOf(l, second); n != 1 || back != amount {
		t.Errorf("second payment %s: %d refunds of %d paise in all; want one of %d", second, n, back, amount)
	}
	if n, _ := refundsOf(l, own); n != 0 || l.Totals[ref].Net() != amount {
		t.Errorf("the booking's own payment %s: %d refunds, %d paise kept for %s; want none refunded, %d kept", own, n, l.Totals[ref].Net(), ref, amount)
	}
	var jobs int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'refund_stray' AND booking_id = $1 AND payment_id = $2`, booking, second).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Errorf("%d refund jobs for the second payment; want 1", jobs)
	}
	if after := s.rowsBut(t, "outbox", otherJobs, second); after != jobsBefore {
		t.Errorf("outbox jobs other than the second payment's refund changed: %s -> %s", jobsBefore, after)
	}
	if after := s.rowsBut(t, "payment_events", otherEvents, second); after != eventsBefore {
		t.Errorf("provider events other than the second payment's changed: %s -> %s", eventsBefore, after)
	}
	// Seats, holds, the booking row, its tickets, the room: as before.
	s.unchangedBut(t, before, []string{"outbox", "payment_events"}, s.event)
	return fmt.Sprintf("%s %s, second payment refunded, booking %s", r.seen(), r.body["outcome"], st)
}

// foreignPaymentFailure: a pending booking's reference, a genuinely signed
// payment.failed for a payment that is not the booking's. The failure says
// nothing of the booking's own payment (it may still succeed): the event is
// acknowledged and recorded, the booking stays pending with its seats.
func foreignPaymentFailure(t *testing.T, s *attackStack) string {
	c := client(8)
	booking, _ := s.pending(t, "fan-foreign-failure")
	foreign, evt := "pay_foreign_"+stackJTI(), "evt_foreign_"+stackJTI()
	before := s.snap(t, s.event)
	const thisEvent = `(t.id = $1)`
	eventsBefore := s.rowsBut(t, "payment_events", thisEvent, evt)
	body := fmt.Appendf(nil, `{"id":%q,"type":"payment.failed","created":%d,"data":{"object":{"id":%q,"status":"failed","reference":"booking-%d","failure_reason":"upi_declined"}}}`,
		evt, time.Now().Unix(), foreign, booking)
	r := s.deliver(t, c, body)
	outcome, _ := r.body["outcome"].(string)
	if r.status != 200 || (outcome != outcomeOtherPayment && outcome != outcomeFailureParked) {
		t.Errorf("foreign failure = %s %s; want 200 outcome %s or %s", r.seen(), r.raw, outcomeOtherPayment, outcomeFailureParked)
	}
	st := s.bookingStatus(t, booking)
	if st != "PAYMENT_PENDING" {
		t.Errorf("booking %d = %s after another payment's failure; want PAYMENT_PENDING", booking, st)
	}
	var recorded string
	if err := s.db.QueryRow(ctx, `SELECT coalesce(outcome, '') FROM payment_events WHERE id = $1`, evt).Scan(&recorded); err != nil {
		t.Fatalf("event %s not recorded: %v", evt, err)
	}
	if recorded != outcome {
		t.Errorf("event %s recorded with outcome %q; answered %q", evt, recorded, outcome)
	}
	if after := s.rowsBut(t, "payment_events", thisEvent, evt); after != eventsBefore {
		t.Errorf("provider events other than this one changed: %s -> %s", eventsBefore, after)
	}
	s.unchangedBut(t, before, []string{"payment_events"}, s.event)
	return fmt.Sprintf("%s %s, booking %s", r.seen(), outcome, st)
}
