package attack

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/paysig"
)

// --- webhooks: the provider's word on a payment, through the gateway (the
// core stays private; the gateway passes them on, the core verifies them).

// pending is a booking waiting for its UPI payment (the simulator settles
// none by itself for an hour): the target a forged success would confirm.
func (s *attackStack) pending(t *testing.T, account string) (booking int64, payment string) {
	t.Helper()
	c := client(4)
	hold, _ := s.hold(t, c, account, 1)
	return s.pay(t, c, account, hold)
}

// successBody is the provider's "payment succeeded" event for payment of
// booking, as the simulator sends it.
func successBody(eventID, payment string, booking int64) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"payment.succeeded","created":%d,"data":{"object":{"id":%q,"status":"succeeded","reference":"booking-%d"}}}`,
		eventID, time.Now().Unix(), payment, booking)
}

func (s *attackStack) bookingStatus(t testing.TB, id int64) string {
	t.Helper()
	var st string
	if err := s.db.QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// refusedWebhook sends body with the signature header sig (none when "")
// and asserts 400 invalid_signature, the booking still pending and nothing
// changed.
func (s *attackStack) refusedWebhook(t *testing.T, booking int64, body []byte, sig string) string {
	t.Helper()
	before := s.snap(t, s.event)
	var hdr []string
	if sig != "" {
		hdr = []string{paysig.Header, sig}
	}
	r := do(t, client(4), "POST", s.gateway+"/v1/webhooks/payments", body, hdr...)
	s.want(t, r, 400, "invalid_signature")
	if st := s.bookingStatus(t, booking); st != "PAYMENT_PENDING" {
		t.Errorf("booking %d = %s after a refused webhook; want PAYMENT_PENDING", booking, st)
	}
	s.unchanged(t, before, s.event)
	return r.seen()
}

func webhookForged(t *testing.T, s *attackStack) string {
	b, p := s.pending(t, "fan-forged")
	body := successBody("evt_forged", p, b)
	return s.refusedWebhook(t, b, body, paysig.Sign([]byte("whsec_guessed"), time.Now(), body))
}

func webhookUnsigned(t *testing.T, s *attackStack) string {
	b, p := s.pending(t, "fan-unsigned")
	return s.refusedWebhook(t, b, successBody("evt_unsigned", p, b), "")
}

// webhookStale replays a genuinely signed event ten minutes later (past the
// signature's five-minute tolerance).
func webhookStale(t *testing.T, s *attackStack) string {
	b, p := s.pending(t, "fan-stale")
	body := successBody("evt_stale", p, b)
	return s.refusedWebhook(t, b, body, paysig.Sign([]byte(stack.WebhookSecret), time.Now().Add(-10*time.Minute), body))
}

// webhookReplayed delivers a genuine success, lets the core finish what it
// starts (capture, tickets, messages), then replays the same delivery: the
// replay is acknowledged and changes nothing.
func webhookReplayed(t *testing.T, s *attackStack) string {
	b, p := s.pending(t, "fan-replayed")
	body := successBody("evt_replayed", p, b)
	sig := paysig.Sign([]byte(stack.WebhookSecret), time.Now(), body)
	first := do(t, client(4), "POST", s.gateway+"/v1/webhooks/payments", body, paysig.Header, sig)
	if first.status != 200 {
		t.Fatalf("genuine webhook = %s %s", first.seen(), first.raw)
	}
	if st := s.bookingStatus(t, b); st != "CONFIRMED" {
		t.Fatalf("booking %d = %s after its payment succeeded; want CONFIRMED", b, st)
	}
	before := s.settled(t, s.event)
	again := do(t, client(4), "POST", s.gateway+"/v1/webhooks/payments", body, paysig.Header, sig)
	if again.status != 200 {
		t.Errorf("replayed webhook = %s %s; want 200 (acknowledged, not applied)", again.seen(), again.raw)
	}
	s.unchanged(t, before, s.event)
	return fmt.Sprintf("%s, then %s (nothing changed)", first.seen(), again.seen())
}

// settled is the state once the core's background work on it is done: two
// readings 300 ms apart that agree (within 20 s).
func (s *attackStack) settled(t testing.TB, events ...int64) state {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	prev := s.snap(t, events...)
	for {
		time.Sleep(300 * time.Millisecond)
		cur := s.snap(t, events...)
		if sameState(prev, cur) {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatal("the state kept changing for 20 s")
		}
		prev = cur
	}
}

func sameState(a, b state) bool {
	if len(a.tables) != len(b.tables) || len(a.redis) != len(b.redis) {
		return false
	}
	for k, v := range a.tables {
		if b.tables[k] != v {
			return false
		}
	}
	for i := range a.redis {
		if a.redis[i] != b.redis[i] {
			return false
		}
	}
	return true
}

// --- IDOR: another fan's hold, booking and tickets, by id.

// idorHold: mallory (admitted to the same event, and with a grant of her
// own hold) acts on alice's hold by its id.
func idorHold(t *testing.T, s *attackStack) string {
	c := client(5)
	hold, _ := s.hold(t, c, "alice-hold", 1)
	_, malloryGrant := s.hold(t, c, "mallory-hold", 1)
	mallory := s.admitToken(t, "mallory-hold", s.event)
	before := s.snap(t, s.event)
	var seen string
	for _, tc := range []struct {
		method, path string
		tok          string
		body         any
		hdr          []string
	}{
		{"GET", "/v1/holds/" + hold, mallory, nil, nil},
		{"DELETE", "/v1/holds/" + hold, mallory, nil, nil},
		{"POST", "/v1/holds/" + hold + "/extend", mallory, nil, nil},
		{"POST", "/v1/holds/" + hold + "/payment", mallory, map[string]any{"email": "m@onsale.test", "phone": "+919800000002"},
			[]string{"Idempotency-Key", "idor-" + hold}},
		{"DELETE", "/v1/holds/" + hold, malloryGrant, nil, nil}, // her own hold's grant on alice's hold
		{"GET", "/v1/holds/" + hold, malloryGrant, nil, nil},
	} {
		r := do(t, c, tc.method, s.gateway+tc.path, tc.body, append(bearer(tc.tok), tc.hdr...)...)
		if r.status != 403 || r.code() != "forbidden" {
			t.Errorf("%s %s as mallory = %s %s; want 403 forbidden", tc.method, tc.path, r.seen(), r.raw)
		}
		seen = r.seen()
	}
	s.unchanged(t, before, s.event)
	return seen + " (6 of 6)"
}

// idorBooking: mallory reads alice's booking and its ticket QR by id.
func idorBooking(t *testing.T, s *attackStack) string {
	c := client(5)
	booking, _ := s.pending(t, "alice-booking")
	mallory := s.admitToken(t, "mallory-booking", s.event)
	before := s.snap(t, s.event)
	var seen string
	for _, path := range []string{fmt.Sprintf("/v1/bookings/%d", booking), fmt.Sprintf("/v1/bookings/%d/tickets/1/qr.png", booking)} {
		r := do(t, c, "GET", s.gateway+path, nil, bearer(mallory)...)
		if r.status != 403 || r.code() != "forbidden" {
			t.Errorf("GET %s as mallory = %s %s; want 403 forbidden", path, r.seen(), r.raw)
		}
		seen = r.seen()
	}
	s.unchanged(t, before, s.event)
	return seen + " (2 of 2)"
}
