package http_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/paysim"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
)

// fakeProvider accepts every payment as pending; the test settles it.
type fakeProvider struct{ n atomic.Int64 }

func (p *fakeProvider) CreatePayment(_ context.Context, key string, r core.PaymentRequest) (*core.Payment, error) {
	p.n.Add(1)
	return &core.Payment{ID: "pay_" + strings.ReplaceAll(key, ":", "_"), Status: core.PaymentPending, Amount: r.Amount,
		Currency: r.Currency, Reference: r.Reference, Method: r.Method}, nil
}

func (p *fakeProvider) Payment(_ context.Context, id string) (*core.Payment, error) {
	return &core.Payment{ID: id, Status: core.PaymentPending}, nil
}

func (p *fakeProvider) Name() string { return "paysim" }

func (p *fakeProvider) Takes(string) bool { return true }

// Webhook verifies as the simulator's client does, with the secret whsec.
func (p *fakeProvider) Webhook(h http.Header, body []byte, now time.Time) (*core.PaymentEvent, error) {
	return paysim.New("", "", []byte("whsec")).Webhook(h, body, now)
}

// withPayments wires the payment routes with a fake provider.
func withPayments(f *fixture, s *corehttp.Server) {
	priv, err := admission.GenerateKey()
	if err != nil {
		panic(err)
	}
	s.Payments = &corehttp.Payments{Bookings: f.db, Keys: f.db, Provider: &fakeProvider{}, Outbox: &kicks{},
		Tickets: ticket.NewSigner(priv)}
}

func (f *fixture) expiredAdmit(t *testing.T, identity string, event int64) string {
	t.Helper()
	tok, err := f.signer.Admit(identity, event, 0, -time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// hold holds seats with an admit token and returns the hold's answer.
func (f *fixture) hold(t *testing.T, identity string, seats ...string) response {
	t.Helper()
	r := f.do(t, "POST", holdsPath(f.event), f.token(t, identity, f.event), map[string]any{"seats": seats})
	if r.status != http.StatusCreated {
		t.Fatalf("hold %v = %d %v", seats, r.status, r.body)
	}
	return r
}

func (f *fixture) holdState(t *testing.T, id string) (string, int64) {
	t.Helper()
	h, err := f.db.Hold(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return h.Status, h.Version
}

// settle confirms a booking as the provider's webhook would.
func (f *fixture) settle(t *testing.T, booking int64) {
	t.Helper()
	b, err := f.db.Booking(ctx, booking)
	if err != nil {
		t.Fatal(err)
	}
	// The booking's own payment: another would be refunded, not kept.
	st, err := f.db.Settle(ctx, core.Settlement{BookingID: booking, PaymentID: b.PaymentID, Type: "payment.succeeded", Succeeded: true})
	if err != nil || st != core.BookingConfirmed {
		t.Fatalf("settle %d = %s, %v", booking, st, err)
	}
}

func bookingID(t *testing.T, r response) int64 {
	t.Helper()
	b, ok := r.body["booking"].(map[string]any)
	if !ok {
		b = r.body
	}
	id, ok := b["booking_id"].(float64)
	if !ok {
		t.Fatalf("no booking in %v", r.body)
	}
	return int64(id)
}

// A guest holds late in the session: after the admit token expired, the
// hold's grant still reads, extends and pays for the hold and reads the
// booking; the expired admit token alone does nothing.
func TestHoldGrantOutlivesSession(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}), withPayments)
	guest := "vis:late"
	h := f.hold(t, guest, "AUD-E-7", "AUD-E-8")
	grant, _ := h.body["hold_token"].(string)
	if grant == "" || h.body["amount_paise"].(float64) <= 0 {
		t.Fatalf("hold answer has no hold_token or amount: %v", h.body)
	}
	id := h.body["hold_id"].(string)
	expired := f.expiredAdmit(t, guest, f.event)

	if r := f.do(t, "POST", "/v1/holds/"+id+"/payment", expired, `{}`, "Idempotency-Key", "k1"); r.status != 401 || r.body["error"] != core.ETokenExpired {
		t.Fatalf("pay with the expired admit token = %d %v; want 401 token_expired", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/holds/"+id, grant, nil); r.status != 200 || r.body["hold_token"] == "" || r.body["amount_paise"] != h.body["amount_paise"] {
		t.Fatalf("GET hold with the grant = %d %v", r.status, r.body)
	}
	pay := f.do(t, "POST", "/v1/holds/"+id+"/payment", grant, `{}`, "Idempotency-Key", "k1")
	if pay.status != http.StatusCreated {
		t.Fatalf("pay with the grant after the session = %d %v; want 201", pay.status, pay.body)
	}
	b := bookingID(t, pay)
	// A retry with the same key under another credential of the same
	// owner (the account would be the same identity) replays.
	if r := f.do(t, "POST", "/v1/holds/"+id+"/payment", grant, `{}`, "Idempotency-Key", "k1"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay = %d %v", r.status, r.header)
	}
	f.settle(t, b)
	if _, err := f.db.Pool().Exec(ctx, `UPDATE bookings SET captured_at = now() WHERE id = $1`, b); err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "GET", "/v1/bookings/"+itoa(b), grant, nil)
	if r.status != 200 || r.body["status"] != "CONFIRMED" {
		t.Fatalf("GET booking with the grant = %d %v", r.status, r.body)
	}
	ev := r.body["event"].(map[string]any)
	venue := ev["venue"].(map[string]any)
	if ev["name"] != "Monsoon Nights" || ev["kind"] != core.KindMovie || ev["starts_at"] != fmt.Sprintf("%d-12-24T13:00:00Z", fixtureYear()) ||
		venue["name"] == "" || venue["city"] == "" || venue["timezone"] != "Asia/Kolkata" {
		t.Errorf("booking's event = %v", ev)
	}
	tickets := r.body["tickets"].([]any)
	if len(tickets) != 2 || !strings.HasSuffix(tickets[0].(map[string]any)["qr"].(string), "/qr.png") {
		t.Errorf("tickets = %v", tickets)
	}
}

// Every principal may do what its token allows and nothing else: a refused
// request answers 403 and changes nothing.
func TestPrincipals(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}), withPayments)
	acctTok, acctID := f.signIn(t, "+919811111111")
	otherTok, _ := f.signIn(t, "+919822222222")
	owner := "acct:" + itoa(acctID)

	// The signed-in fan holds H with an admit token (identity acct:<id>) and
	// H2 besides; a guest holds G.
	h := f.hold(t, owner, "AUD-A-1")
	hID, grantH := h.body["hold_id"].(string), h.body["hold_token"].(string)
	h2 := f.hold(t, owner, "AUD-A-2")
	h2ID := h2.body["hold_id"].(string)
	g := f.hold(t, "vis:guest", "AUD-B-1")
	gID, grantG := g.body["hold_id"].(string), g.body["hold_token"].(string)

	// The guest pays G and the booking is confirmed: a ticket link for it.
	pay := f.do(t, "POST", "/v1/holds/"+gID+"/payment", grantG, `{}`, "Idempotency-Key", "g1")
	gb := bookingID(t, pay)
	f.settle(t, gb)
	booking, err := f.db.Booking(ctx, gb)
	if err != nil {
		t.Fatal(err)
	}
	link, err := f.keys.TicketLink(booking, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expiredLink, _ := f.keys.TicketLink(booking, time.Now().Add(-48*time.Hour))

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
		hold                      string // a hold that must not change
	}{
		{"account token creates a hold", "POST", holdsPath(f.event), acctTok, map[string]any{"seats": []string{"AUD-C-1"}}, 403, core.EForbidden, ""},
		{"grant creates a hold", "POST", holdsPath(f.event), grantH, map[string]any{"seats": []string{"AUD-C-1"}}, 403, core.EForbidden, ""},
		{"ticket link creates a hold", "POST", holdsPath(f.event), link, map[string]any{"seats": []string{"AUD-C-1"}}, 403, core.EForbidden, ""},
		{"grant of H on H2: read", "GET", "/v1/holds/" + h2ID, grantH, nil, 403, core.EForbidden, h2ID},
		{"grant of H on H2: release", "DELETE", "/v1/holds/" + h2ID, grantH, nil, 403, core.EForbidden, h2ID},
		{"grant of H on H2: extend", "POST", "/v1/holds/" + h2ID + "/extend", grantH, nil, 403, core.EForbidden, h2ID},
		{"grant of H on H2: pay", "POST", "/v1/holds/" + h2ID + "/payment", grantH, `{}`, 403, core.EForbidden, h2ID},
		{"grant of the guest on H", "DELETE", "/v1/holds/" + hID, grantG, nil, 403, core.EForbidden, hID},
		{"another account reads H", "GET", "/v1/holds/" + hID, otherTok, nil, 403, core.EForbidden, hID},
		{"another account releases H", "DELETE", "/v1/holds/" + hID, otherTok, nil, 403, core.EForbidden, hID},
		{"another account pays H", "POST", "/v1/holds/" + hID + "/payment", otherTok, `{}`, 403, core.EForbidden, hID},
		{"account token on the guest's hold", "DELETE", "/v1/holds/" + gID, acctTok, nil, 403, core.EForbidden, ""},
		{"another identity's admit token", "DELETE", "/v1/holds/" + hID, f.token(t, "vis:guest", f.event), nil, 403, core.EForbidden, hID},
		{"admit token of another event", "DELETE", "/v1/holds/" + hID, f.token(t, owner, f.other), nil, 403, core.EWrongEvent, hID},
		{"ticket link pays", "POST", "/v1/holds/" + hID + "/payment", link, `{}`, 403, core.EForbidden, hID},
		{"ticket link reads a hold", "GET", "/v1/holds/" + gID, link, nil, 403, core.EForbidden, ""},
		{"ticket link releases", "DELETE", "/v1/holds/" + hID, link, nil, 403, core.EForbidden, hID},
		{"ticket link confirms", "POST", "/v1/holds/" + hID + "/confirm", link, `{"payment_token":"tok_visa"}`, 403, core.EForbidden, hID},
		{"ticket link is not an account", "GET", "/v1/me", link, nil, 403, core.EForbidden, ""},
		{"grant is not an account", "GET", "/v1/me/bookings", grantH, nil, 403, core.EForbidden, ""},
		{"another account reads the booking", "GET", "/v1/bookings/" + itoa(gb), otherTok, nil, 403, core.EForbidden, ""},
		{"grant of H reads the guest's booking", "GET", "/v1/bookings/" + itoa(gb), grantH, nil, 403, core.EForbidden, ""},
		{"expired ticket link", "GET", "/v1/bookings/" + itoa(gb), expiredLink, nil, 401, core.ETokenExpired, ""},
		{"tampered grant", "GET", "/v1/holds/" + hID, grantH[:len(grantH)-4] + "AAAA", nil, 401, core.EUnauthorized, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before [2]any
			if tc.hold != "" {
				before[0], before[1] = f.holdState(t, tc.hold)
			}
			r := f.do(t, tc.method, tc.path, tc.token, tc.body, "Idempotency-Key", "x-"+tc.name)
			if r.status != tc.status || r.body["error"] != tc.code {
				t.Errorf("%s %s = %d %v; want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.code)
			}
			if tc.hold != "" {
				st, v := f.holdState(t, tc.hold)
				if st != before[0] || v != before[1] {
					t.Errorf("hold %s went from %v to %s/%d", tc.hold, before, st, v)
				}
			}
		})
	}

	// What each may do.
	if r := f.do(t, "GET", "/v1/bookings/"+itoa(gb), link, nil); r.status != 200 || r.body["event"] == nil {
		t.Errorf("ticket link reads its booking = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/bookings/"+itoa(gb), grantG, nil); r.status != 200 {
		t.Errorf("the hold's grant reads its booking = %d %v", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/holds/"+hID+"/extend", acctTok, nil); r.status != 200 {
		t.Errorf("the owner's account token extends H = %d %v", r.status, r.body)
	}
	pay = f.do(t, "POST", "/v1/holds/"+hID+"/payment", acctTok, `{}`, "Idempotency-Key", "h1")
	if pay.status != 201 {
		t.Fatalf("the owner's account token pays H = %d %v", pay.status, pay.body)
	}
	hb := bookingID(t, pay)
	if b, _ := f.db.Booking(ctx, hb); b.Phone != "+919811111111" {
		t.Errorf("a signed-in fan's booking contact = %q; want the account's phone", b.Phone)
	}
	// The same key with the hold's grant (same owner) replays.
	if r := f.do(t, "POST", "/v1/holds/"+hID+"/payment", grantH, `{}`, "Idempotency-Key", "h1"); r.status != 201 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the grant replaying the account's key = %d %v", r.status, r.header)
	}
	f.settle(t, hb)
	if r := f.do(t, "DELETE", "/v1/holds/"+h2ID, acctTok, nil); r.status != 200 || r.body["status"] != core.HoldReleased {
		t.Errorf("the owner's account token releases H2 = %d %v", r.status, r.body)
	}
	r := f.do(t, "GET", "/v1/me/bookings", acctTok, nil)
	list := r.body["bookings"].([]any)
	if r.status != 200 || len(list) != 1 || int64(list[0].(map[string]any)["booking_id"].(float64)) != hb {
		t.Errorf("/v1/me/bookings = %d %v; want booking %d", r.status, r.body, hb)
	}
}

// "My tickets" lists upcoming shows first (soonest first), then past ones
// (latest first), and never a FAILED booking.
func TestMyBookingsOrder(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}), withPayments)
	tok, id := f.signIn(t, "+919833333333")
	owner := "acct:" + itoa(id)
	var ids []int64
	for _, ev := range []int64{f.event, f.other, f.ga} {
		body := map[string]any{"seats": []string{"AUD-A-1"}}
		if ev == f.ga {
			body = map[string]any{"quantity": 1}
		}
		h := f.do(t, "POST", holdsPath(ev), f.token(t, owner, ev), body)
		if h.status != 201 {
			t.Fatalf("hold = %d %v", h.status, h.body)
		}
		pay := f.do(t, "POST", "/v1/holds/"+h.body["hold_id"].(string)+"/payment", tok, `{}`, "Idempotency-Key", "p"+itoa(ev))
		ids = append(ids, bookingID(t, pay))
	}
	// event: Dec 24 18:30 IST, other: Dec 24 21:45, ga: Dec 25. Move the
	// first show into the past; fail the GA booking.
	if _, err := f.db.Pool().Exec(ctx, `UPDATE events SET starts_at = now() - interval '1 day' WHERE id = $1`, f.event); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Settle(ctx, core.Settlement{BookingID: ids[2], Type: "payment.failed"}); err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "GET", "/v1/me/bookings", tok, nil)
	var got []int64
	for _, b := range r.body["bookings"].([]any) {
		got = append(got, int64(b.(map[string]any)["booking_id"].(float64)))
	}
	if want := []int64{ids[1], ids[0]}; jsonString(got) != jsonString(want) {
		t.Errorf("/v1/me/bookings = %v; want %v (upcoming first, no FAILED)", got, want)
	}
}
