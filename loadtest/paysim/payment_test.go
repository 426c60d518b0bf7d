package paysim_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// TestUPI follows a UPI payment from pending to its webhook, settled by
// each of the three ways a payer's answer arrives.
func TestUPI(t *testing.T) {
	tests := []struct {
		name       string
		beh        paysim.Behaviour
		settle     string // hook to call; "" waits for the drawn delay
		wantStatus string
		wantEvent  string
	}{
		{"succeed hook", quiet, "succeed", paysim.StatusSucceeded, paysim.EventPaymentSucceeded},
		{"fail hook", quiet, "fail", paysim.StatusFailed, paysim.EventPaymentFailed},
		{"payer approves after the delay", paysim.Behaviour{UPIDelayMax: 20 * time.Millisecond}, "", paysim.StatusSucceeded, paysim.EventPaymentSucceeded},
		{"payer declines (fail rate 1)", paysim.Behaviour{UPIDelayMax: 20 * time.Millisecond, FailRate: 1}, "", paysim.StatusFailed, paysim.EventPaymentFailed},
		{"slow payer (slow fraction 1)", paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour, UPISlowFraction: 1, UPISlowDelay: 30 * time.Millisecond}, "", paysim.StatusSucceeded, paysim.EventPaymentSucceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.beh, nil)
			p := e.pay(t, upi("booking-17", 250000))
			if p.Status != paysim.StatusPending || p.Method != paysim.MethodUPI || p.Amount != 250000 || p.Currency != "INR" ||
				p.Reference != "booking-17" || p.Created == 0 || len(p.ID) < 10 || p.ID[:4] != "pay_" {
				t.Fatalf("created = %+v; want a pending upi payment", p)
			}
			if tc.settle != "" {
				if r := e.call(t, "POST", "/_sim/payments/"+p.ID+"/"+tc.settle, nil); r.status != http.StatusOK {
					t.Fatalf("%s hook = %d %s", tc.settle, r.status, r.body)
				}
			}
			got := e.recv.wait(t, 1)[0]
			if got.verifyErr != nil {
				t.Errorf("paysig.Verify = %v; want nil", got.verifyErr)
			}
			if ct := got.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if got.event.Type != tc.wantEvent || len(got.event.ID) < 10 || got.event.ID[:4] != "evt_" || got.event.Created == 0 {
				t.Errorf("event = %+v; want %s", got.event, tc.wantEvent)
			}
			obj := object[paysim.Payment](t, got.event)
			now := e.call(t, "GET", "/v1/payments/"+p.ID, nil).payment(t)
			if obj.ID != p.ID || obj.Status != tc.wantStatus || now != obj {
				t.Errorf("webhook object = %+v, GET = %+v; want status %s", obj, now, tc.wantStatus)
			}
			wantEntries := []string(nil)
			if tc.wantStatus == paysim.StatusSucceeded {
				wantEntries = []string{paysim.EntryCharge}
				if obj.AmountCaptured != p.Amount {
					t.Errorf("amount_captured = %d; want %d", obj.AmountCaptured, p.Amount)
				}
			} else if obj.FailureReason == "" {
				t.Error("failed payment without failure_reason")
			}
			if got := entryTypes(e.sim.Ledger(), "booking-17"); !slices.Equal(got, wantEntries) {
				t.Errorf("ledger = %v; want %v", got, wantEntries)
			}
			// Settled once: the hooks now refuse, and nothing else arrives.
			if r := e.call(t, "POST", "/_sim/payments/"+p.ID+"/succeed", nil); r.status != http.StatusConflict || r.errorCode() != paysim.EInvalidState {
				t.Errorf("second settle = %d %s; want 409 invalid_state", r.status, r.body)
			}
			if n := e.sim.FlushWebhooks(); n != 0 || len(e.recv.all()) != 1 {
				t.Errorf("after flush: %d flushed, %d received; want 0, 1", n, len(e.recv.all()))
			}
		})
	}
}

// step is one API call of a scenario and what it must answer.
type step struct {
	path       string // after /v1/payments/{id}
	body       any
	wantCode   int
	wantError  string // error code, for 4xx
	wantStatus string // payment status, for 2xx
}

// TestCard walks card payments through authorize, capture, cancel and
// refusals, checking each answer and the ledger.
func TestCard(t *testing.T) {
	tests := []struct {
		name       string
		beh        paysim.Behaviour
		req        paysim.PaymentRequest
		wantStatus string
		steps      []step
		wantLedger []string
	}{
		{"authorize then capture", quiet, card("b1", 5000, "manual"), paysim.StatusRequiresCapture, []step{
			{"/capture", nil, 200, "", paysim.StatusSucceeded},
			{"/capture", nil, 409, paysim.EAlreadyCaptured, ""},
			{"/cancel", nil, 409, paysim.EAlreadyCaptured, ""},
		}, []string{"authorization", "capture"}},
		{"authorize then cancel", quiet, card("b1", 5000, "manual"), paysim.StatusRequiresCapture, []step{
			{"/cancel", nil, 200, "", paysim.StatusCanceled},
			{"/cancel", nil, 409, paysim.EAlreadyCanceled, ""},
			{"/capture", nil, 409, paysim.EAlreadyCanceled, ""},
			{"/refunds", nil, 409, paysim.EInvalidState, ""},
		}, []string{"authorization", "void"}},
		{"automatic capture", quiet, card("b1", 5000, "automatic"), paysim.StatusSucceeded, []step{
			{"/capture", nil, 409, paysim.EAlreadyCaptured, ""},
			{"/cancel", nil, 409, paysim.EAlreadyCaptured, ""},
		}, []string{"charge"}},
		{"capture defaults to automatic", quiet, card("b1", 5000, ""), paysim.StatusSucceeded, nil, []string{"charge"}},
		{"declined token", quiet, paysim.PaymentRequest{Amount: 5000, Currency: "INR", Reference: "b1", Method: "card", PaymentToken: paysim.DeclineToken, Capture: "manual"},
			paysim.StatusFailed, []step{
				{"/capture", nil, 409, paysim.EInvalidState, ""},
				{"/cancel", nil, 409, paysim.EInvalidState, ""},
			}, nil},
		{"fail rate 1", paysim.Behaviour{FailRate: 1}, card("b1", 5000, "automatic"), paysim.StatusFailed, nil, nil},
		{"pending upi cannot be captured", quiet, upi("b1", 5000), paysim.StatusPending, []step{
			{"/capture", nil, 409, paysim.EInvalidState, ""},
			{"/cancel", nil, 409, paysim.EInvalidState, ""},
			{"/refunds", nil, 409, paysim.EInvalidState, ""},
		}, nil},
		{"capture body must be empty", quiet, card("b1", 5000, "manual"), paysim.StatusRequiresCapture, []step{
			{"/capture", map[string]int{"amount": 10}, 400, paysim.EInvalid, ""},
			{"/capture", "{}", 200, "", paysim.StatusSucceeded},
		}, []string{"authorization", "capture"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.beh, nil)
			p := e.pay(t, tc.req)
			if p.Status != tc.wantStatus {
				t.Fatalf("created %+v; want status %s", p, tc.wantStatus)
			}
			for i, s := range tc.steps {
				r := e.call(t, "POST", "/v1/payments/"+p.ID+s.path, s.body)
				if r.status != s.wantCode || r.errorCode() != s.wantError {
					t.Fatalf("step %d POST %s = %d %s; want %d %q", i, s.path, r.status, r.body, s.wantCode, s.wantError)
				}
				if s.wantStatus != "" {
					if got := r.payment(t); got.Status != s.wantStatus {
						t.Fatalf("step %d POST %s: status %s; want %s", i, s.path, got.Status, s.wantStatus)
					}
				}
			}
			if got := entryTypes(e.sim.Ledger(), "b1"); !slices.Equal(got, tc.wantLedger) {
				t.Errorf("ledger = %v; want %v", got, tc.wantLedger)
			}
		})
	}

	t.Run("unknown payment", func(t *testing.T) {
		e := newEnv(t, quiet, nil)
		for _, path := range []string{"/capture", "/cancel", "/refunds"} {
			if r := e.call(t, "POST", "/v1/payments/pay_nope"+path, nil); r.status != 404 || r.errorCode() != paysim.ENotFound {
				t.Errorf("POST %s = %d %s; want 404 not_found", path, r.status, r.body)
			}
		}
		if r := e.call(t, "GET", "/v1/payments/pay_nope", nil); r.status != 404 || r.errorCode() != paysim.ENotFound {
			t.Errorf("GET = %d %s; want 404 not_found", r.status, r.body)
		}
	})
}

// TestRefunds checks that refunds never pass what was captured.
func TestRefunds(t *testing.T) {
	e := newEnv(t, quiet, nil)
	p := e.pay(t, card("booking-9", 10000, "automatic"))
	steps := []struct {
		body      any
		wantCode  int
		wantError string
		wantAmt   int64
	}{
		{map[string]int{"amount": 0}, 400, paysim.EInvalid, 0},
		{map[string]int{"amount": -5}, 400, paysim.EInvalid, 0},
		{map[string]int{"amount": 10001}, 409, paysim.ERefundExceedsCapture, 0},
		{map[string]int{"amount": 3000}, 201, "", 3000},
		{map[string]int{"amount": 7001}, 409, paysim.ERefundExceedsCapture, 0},
		{nil, 201, "", 7000}, // the rest
		{nil, 409, paysim.ERefundExceedsCapture, 0},
		{map[string]int{"amount": 1}, 409, paysim.ERefundExceedsCapture, 0},
	}
	var ids []string
	for i, s := range steps {
		r := e.call(t, "POST", "/v1/payments/"+p.ID+"/refunds", s.body)
		if r.status != s.wantCode || r.errorCode() != s.wantError {
			t.Fatalf("refund %d %v = %d %s; want %d %q", i, s.body, r.status, r.body, s.wantCode, s.wantError)
		}
		if s.wantCode == 201 {
			rf := decodeAs[paysim.Refund](t, r.body)
			if rf.Amount != s.wantAmt || rf.PaymentID != p.ID || rf.Status != "succeeded" || rf.ID[:3] != "re_" {
				t.Fatalf("refund %d = %+v; want %d of %s", i, rf, s.wantAmt, p.ID)
			}
			ids = append(ids, rf.ID)
		}
	}
	got := e.call(t, "GET", "/v1/payments/"+p.ID, nil).payment(t)
	if got.AmountRefunded != 10000 || got.AmountCaptured != 10000 {
		t.Errorf("payment = %+v; want 10000 captured and refunded", got)
	}
	l := e.sim.Ledger()
	if tot := l.Totals["booking-9"]; tot.Captured != 10000 || tot.Refunded != 10000 || tot.Net() != 0 {
		t.Errorf("totals = %+v; want 10000 captured and refunded", tot)
	}
	// payment.succeeded, then one refund.succeeded per refund.
	hooks := e.recv.wait(t, 3)
	var refunded []string
	for _, h := range hooks {
		if h.event.Type == paysim.EventRefundSucceeded {
			refunded = append(refunded, object[paysim.Refund](t, h.event).ID)
		}
	}
	slices.Sort(refunded)
	slices.Sort(ids)
	if !slices.Equal(refunded, ids) {
		t.Errorf("refund webhooks for %v; want %v", refunded, ids)
	}
}

// TestLedgerTotals runs every kind of money movement on separate
// references and checks entries and totals, over HTTP.
func TestLedgerTotals(t *testing.T) {
	e := newEnv(t, quiet, nil)
	a := e.pay(t, card("booking-1", 1000, "manual"))
	e.call(t, "POST", "/v1/payments/"+a.ID+"/capture", nil)
	e.call(t, "POST", "/v1/payments/"+a.ID+"/refunds", map[string]int{"amount": 300})
	e.pay(t, card("booking-2", 500, "automatic"))
	c := e.pay(t, card("booking-3", 800, "manual"))
	e.call(t, "POST", "/v1/payments/"+c.ID+"/cancel", nil)
	u := e.pay(t, upi("booking-4", 200))
	if _, err := e.sim.Settle(u.ID, true); err != nil {
		t.Fatal(err)
	}
	f := e.pay(t, upi("booking-5", 700))
	e.sim.Settle(f.ID, false)
	e.pay(t, card("booking-6", 900, "manual")) // authorized, never captured

	r := e.call(t, "GET", "/v1/ledger", nil)
	l := decodeAs[paysim.Ledger](t, r.body)
	want := map[string]paysim.Totals{
		"booking-1": {Authorized: 1000, Captured: 1000, Refunded: 300},
		"booking-2": {Charged: 500, Captured: 500},
		"booking-3": {Authorized: 800, Voided: 800},
		"booking-4": {Charged: 200, Captured: 200},
		"booking-6": {Authorized: 900},
	}
	if len(l.Totals) != len(want) {
		t.Errorf("totals for %d references; want %d: %+v", len(l.Totals), len(want), l.Totals)
	}
	for ref, w := range want {
		if l.Totals[ref] != w {
			t.Errorf("totals[%s] = %+v; want %+v", ref, l.Totals[ref], w)
		}
	}
	if n, h := l.Totals["booking-1"].Net(), l.Totals["booking-6"].Held(); n != 700 || h != 900 {
		t.Errorf("booking-1 net %d, booking-6 held %d; want 700, 900", n, h)
	}
	if h := l.Totals["booking-3"].Held(); h != 0 {
		t.Errorf("booking-3 held %d after the void; want 0", h)
	}
	wantTypes := []string{"authorization", "capture", "refund", "charge", "authorization", "void", "charge", "authorization"}
	for i, en := range l.Entries {
		if en.Seq != i+1 || i > 0 && en.Time.Before(l.Entries[i-1].Time) || en.PaymentID == "" || en.Amount <= 0 {
			t.Errorf("entry %d = %+v", i, en)
		}
		if i < len(wantTypes) && en.Type != wantTypes[i] {
			t.Errorf("entry %d type %s; want %s", i, en.Type, wantTypes[i])
		}
		if (en.Type == paysim.EntryRefund) != (en.RefundID != "") {
			t.Errorf("entry %d: refund_id %q on a %s", i, en.RefundID, en.Type)
		}
	}
	if len(l.Entries) != len(wantTypes) {
		t.Errorf("%d entries; want %d", len(l.Entries), len(wantTypes))
	}
	one := decodeAs[paysim.Ledger](t, e.call(t, "GET", "/v1/ledger?reference=booking-1", nil).body)
	if len(one.Entries) != 3 || len(one.Totals) != 1 {
		t.Errorf("ledger?reference=booking-1 = %+v; want 3 entries, 1 total", one)
	}
	list := decodeAs[struct{ Data []paysim.Payment }](t, e.call(t, "GET", "/v1/payments?reference=booking-5", nil).body)
	if len(list.Data) != 1 || list.Data[0].ID != f.ID || list.Data[0].Status != paysim.StatusFailed {
		t.Errorf("payments?reference=booking-5 = %+v; want the failed payment", list.Data)
	}
	all := decodeAs[struct{ Data []paysim.Payment }](t, e.call(t, "GET", "/v1/payments", nil).body)
	if len(all.Data) != 6 || all.Data[0].ID != a.ID {
		t.Errorf("payments = %d, first %+v; want 6, oldest first", len(all.Data), all.Data[0])
	}
}
