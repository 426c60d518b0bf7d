package proof

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Experiment: an operator cancels a show with confirmed bookings, and the
// core is killed with SIGKILL while the refunds are under way. After a
// restart every booking is refunded exactly once (the provider's ledger:
// one refund each, nothing kept), every holder was told by SMS, a payment
// still in flight at the cancellation is refunded when it lands, and every
// ticket is revoked at the gate. The control runs a naive cancellation
// (mark the bookings refunded, then call the provider in a loop, no
// outbox) killed the same way: the same checks find the bookings whose
// money never went back.
func TestCancelShowRefundsEachBookingOnce(t *testing.T) {
	s := newStack(t, stackOpts{sms: true, coreEnv: []string{"ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=100ms"}})
	const n = 30
	bookings := s.confirmedBookings(t, "cancel", n)
	// A payment in flight: paid for, the provider has not said yet.
	hold := s.hold(t, "cancel-late", "WU2-A-1")
	late, latePay := s.pay(t, "cancel-late", hold, map[string]any{"phone": "+919811100099"})
	// A hold not yet paid for.
	s.hold(t, "cancel-holder", "WU2-A-2")

	// The box office's figures before: 30 sold, the unpaid holds held, 30
	// attendees with their phones, as JSON and as CSV.
	sales := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/sales", s.event), nil)
	total, _ := sales.body["total"].(map[string]any)
	if sales.status != 200 || total["sold"] != float64(n) || total["held"].(float64) < 2 || total["refunded"] != 0.0 {
		t.Errorf("sales before = %d %s; want %d sold, the 2 unpaid holds held, none refunded", sales.status, sales.raw, n)
	}
	att := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/attendees", s.event), nil)
	if list, _ := att.body["attendees"].([]any); att.status != 200 || len(list) != n || list[0].(map[string]any)["phone"] == "" {
		t.Errorf("attendees = %d, %d; want %d tickets with their holders' phones", att.status, len(list), n)
	}
	csv := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/attendees?format=csv", s.event), nil)
	if lines := strings.Count(string(csv.raw), "\n"); csv.status != 200 || lines != n+1 || csv.header.Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Errorf("attendees CSV = %d, %d lines, %s; want a header and %d rows", csv.status, lines, csv.header.Get("Content-Type"), n)
	}
	// The provider answers slowly (each refund is carried out, its answer
	// held back a second), so the kill finds refunds done and refunds not.
	beh := s.sim.Behaviour()
	beh.TimeoutRate, beh.TimeoutDelay = 1, time.Second
	s.sim.SetBehaviour(beh)
	r := s.operatorCall(t, "POST", fmt.Sprintf("/operator/v1/events/%d/cancel", s.event), `{"reason":"The artist is unwell."}`)
	if r.status != 200 {
		t.Fatalf("cancel = %d %s", r.status, r.raw)
	}
	c := r.body["cancellation"].(map[string]any)
	if c["bookings"] != float64(n) || c["refund_due"] != float64(n) || c["still_confirmed"] != 0.0 {
		t.Fatalf("cancellation at once = %v; want %d bookings due back, none confirmed", c, n)
	}
	eventually(t, "some refunds at the provider", func() bool { return s.refundedAtProvider(bookings) >= 3 })
	if err := s.apps.Core.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := s.refundedAtProvider(bookings)
	t.Logf("SIGKILL with %d of %d refunds at the provider", atKill, n)
	if atKill == n {
		t.Fatalf("every refund was done before the kill: the experiment killed nothing midway")
	}
	beh.TimeoutRate = 0
	s.sim.SetBehaviour(beh)
	if err := s.apps.Core.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The payment in flight lands after the cancellation: refunded, its payer told.
	if _, err := s.sim.Settle(latePay, true); err != nil {
		t.Fatal(err)
	}
	eventuallyFor(t, 60*time.Second, "every booking refunded and told", func() bool {
		r := s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/cancellation", s.event), nil)
		return r.status == 200 && r.body["done"] == true
	})
	eventually(t, "the late payment refunded", func() bool { return s.bookingStatus(t, late) == bookingRefunded })
	sales = s.operatorCall(t, "GET", fmt.Sprintf("/operator/v1/events/%d/sales?format=csv", s.event), nil)
	var totalLine string
	for _, l := range strings.Split(string(sales.raw), "\n") {
		if strings.HasPrefix(l, "TOTAL,") {
			totalLine = l
		}
	}
	// band,name,price,capacity,sold,held,available,revenue,refunded,refunded_inr
	if f := strings.Split(totalLine, ","); len(f) != 10 || f[4] != "0" || f[5] != "0" || f[7] != "0.00" || f[8] != fmt.Sprint(n) {
		t.Errorf("sales after, as CSV:\n%s\nwant nothing sold or held, the %d tickets refunded (the late payment booked none)", sales.raw, n)
	}
	if bad := s.notRefundedOnce(append(bookings, late)); len(bad) > 0 {
		t.Errorf("not refunded exactly once: %v", bad)
	}
	// Every holder told once or more (an SMS is at least once: a kill
	// after the send, before its job was marked, sends it again).
	for i := range n {
		if got := s.smsContaining(fmt.Sprintf("+9198111%05d", i), "CANCELLED"); got < 1 {
			t.Errorf("holder %d got no cancellation SMS", i)
		}
	}
	// The payer whose money came after the cancellation is told too.
	if got := s.smsContaining("+919811100099", "no ticket will be issued"); got < 1 {
		t.Errorf("the late payer got no cancellation SMS")
	}
	// The gate: every ticket of the show is on the revoked list.
	var live int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED'`, s.event).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if live != 0 {
		t.Errorf("%d bookings still CONFIRMED: their tickets would open the gate", live)
	}
	// The show takes no more holds.
	if r := s.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), "cancel-after", map[string]any{"seats": []string{"WU2-A-3"}}); r.status != 409 {
		t.Errorf("a hold in the cancelled show = %d %s; want 409 not_on_sale", r.status, r.raw)
	}
	// Cancelling again changes nothing.
	if r := s.operatorCall(t, "POST", fmt.Sprintf("/operator/v1/events/%d/cancel", s.event), `{}`); r.status != 409 {
		t.Errorf("cancel twice = %d %s; want 409", r.status, r.raw)
	}
}

// The control: a naive cancellation that marks every booking REFUNDED in
// one transaction and then refunds at the provider in a loop, killed after
// a third of them. Nothing resumes the rest (the database says they are
// done): the experiment's check finds them.
func TestCancelShowControlLosesRefunds(t *testing.T) {
	s := newStack(t, stackOpts{})
	const n = 12
	bookings := s.confirmedBookings(t, "naive", n)
	if _, err := s.db.Exec(ctx, `UPDATE bookings SET status = 'REFUNDED' WHERE id = ANY($1)`, bookings); err != nil {
		t.Fatal(err)
	}
	for i, b := range bookings {
		if i == n/3 {
			break // SIGKILL: the loop's process is gone, its work with it
		}
		var pay string
		if err := s.db.QueryRow(ctx, `SELECT payment_id FROM bookings WHERE id = $1`, b).Scan(&pay); err != nil {
			t.Fatal(err)
		}
		if err := s.refundAtProvider(pay); err != nil {
			t.Fatal(err)
		}
	}
	bad := s.notRefundedOnce(bookings)
	if len(bad) != n-n/3 {
		t.Fatalf("the check found %d bookings not refunded once: %v; want the %d the naive loop never reached", len(bad), bad, n-n/3)
	}
	t.Logf("control: the check finds %d of %d bookings marked REFUNDED with their money kept", len(bad), n)
}

// confirmedBookings makes n confirmed UPI bookings of one seat each in the
// west upper stand, fans prefix-0..n-1 with phones +9198111<i>.
func (s *proofStack) confirmedBookings(t *testing.T, prefix string, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range n {
		fan := fmt.Sprintf("%s-%d", prefix, i)
		hold := s.hold(t, fan, fmt.Sprintf("WU1-%s-%d", []string{"A", "B", "C", "D"}[i/25], 1+i%25))
		id, pay := s.pay(t, fan, hold, map[string]any{"phone": fmt.Sprintf("+9198111%05d", i)})
		if _, err := s.sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	for _, id := range ids {
		eventually(t, "confirmed", func() bool { return s.bookingStatus(t, id) == bookingConfirmed })
	}
	return ids
}

// refundedAtProvider counts the bookings with a refund in the ledger.
func (s *proofStack) refundedAtProvider(bookings []int64) int {
	n := 0
	for _, b := range bookings {
		if s.refunds(bookingReference(b)) > 0 {
			n++
		}
	}
	return n
}

// notRefundedOnce lists the bookings whose provider ledger is not exactly
// one refund giving back all that was taken, with what it found.
func (s *proofStack) notRefundedOnce(bookings []int64) []string {
	var bad []string
	for _, b := range bookings {
		ref := bookingReference(b)
		if got, tot := s.refunds(ref), s.totals(ref); got != 1 || tot.Net() != 0 {
			bad = append(bad, fmt.Sprintf("booking %d: %d refunds, net %d paise kept", b, got, tot.Net()))
		}
	}
	return bad
}

// refundAtProvider refunds a payment in full at the provider, with no
// idempotency key (the naive canceller's call).
func (s *proofStack) refundAtProvider(payment string) error {
	return s.atProvider(payment, "refunds", "")
}

// operatorCall sends a JSON request to the core's operators' API as the
// stack's operator.
func (s *proofStack) operatorCall(t *testing.T, method, path string, body any) reply {
	t.Helper()
	var r io.Reader
	if b, ok := body.(string); ok {
		r = strings.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.coreURL+path, r)
	req.Header.Set("Authorization", "Bearer "+s.apps.OperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode, header: resp.Header}
	out.raw, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(out.raw, &out.body)
	return out
}

// smsContaining counts the texts to phone that contain text.
func (s *proofStack) smsContaining(phone, text string) int {
	n := 0
	for _, m := range s.sim.SMS() {
		if m.To == phone && strings.Contains(m.Body, text) {
			n++
		}
	}
	return n
}

// eventuallyFor polls cond every 50 ms for up to d.
func eventuallyFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
