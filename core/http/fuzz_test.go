package http_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/paysig"
)

// The fuzz targets here send the routes' bodies and headers to the real
// core on a real PostgreSQL (a database of the target's own), since the
// refusals worth finding are the ones the database makes: a value JSON or
// HTTP carries that PostgreSQL will not store (a NUL, bytes that are not
// UTF-8) must be the client's 400, not the core's 500. The property of
// every target is checkAnswer's: the answer is JSON; an error is the one
// vocabulary's (a known code, at its one status); and no input makes the
// core answer 500.

// newFuzzFixture is newFixture for a fuzz target (testing.TB): the three
// events, the admit signer, the server with opts.
func newFuzzFixture(tb testing.TB, opts ...func(*fixture, *corehttp.Server)) *fixture {
	tb.Helper()
	db, err := postgres.Open(ctx, postgrestest.NewURL(tb), postgres.Options{MaxConns: 8, ConnectTimeout: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	priv, err := admission.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{db: db, signer: admission.NewSigner(priv)}
	mk := func(name, layout string) int64 {
		id, err := db.CreateEvent(ctx, seed.EventSpec{Name: name, Kind: core.KindMovie, Layout: seed.MustLayout(layout),
			StartsAt: time.Now().Add(30 * 24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
		if err != nil {
			tb.Fatal(err)
		}
		return id
	}
	f.event, f.ga, f.other = mk("Monsoon Nights", "cinema"), mk("Open Air", "amphitheatre"), mk("Late Show", "cinema")
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(f.signer.PublicKey()),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New()}
	for _, o := range opts {
		o(f, s)
	}
	f.srv = httptest.NewServer(s.Handler()) // send checks each exchange (a fuzz target's own t)
	tb.Cleanup(f.srv.Close)
	return f
}

// statusOf is core/http's status table as the API documents it, written
// again here so a code answered at another status is caught.
var statusOf = map[string]int{
	core.EInvalid: 400, core.ETooLarge: 413, core.EUnauthorized: 401, core.ETokenExpired: 401,
	core.EWrongEvent: 403, core.EForbidden: 403, core.ENotFound: 404, core.ESeatsTaken: 409, core.ESoldOut: 409,
	core.ELimitExceeded: 422, core.EHoldExpired: 410, core.EHoldNotActive: 409, core.EAlreadyExtended: 409,
	core.EVersionMismatch: 412, core.EUnavailable: 503, core.EBookingClosed: 409, core.EPaymentDeclined: 402,
	core.EPaymentInProgress: 409, core.EProvider: 502, core.EIdemMissing: 400, core.EIdemReused: 422,
	core.EIdemInFlight: 409, core.EBadSignature: 400, core.ERateLimited: 429, core.ECodeInvalid: 401,
	core.ETicketInvalid: 400, core.ETicketRevoked: 410, core.EWrongVenue: 403, core.EAlreadyUsed: 409,
}

// send makes one request; it returns the status and the decoded body. A
// request net/http will not send (a header value it refuses) is ok=false.
func (f *fixture) send(tb testing.TB, method, path, token string, body []byte, hdr map[string]string) (status int, out map[string]any, ok bool) {
	tb.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// Each exchange is checked against the OpenAPI document as well.
	resp, err := (&http.Client{Transport: api().Transport(tb, f.srv.Client().Transport)}).Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "invalid header field value") {
			return 0, nil, false
		}
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("%s %s: answer %d is not a JSON object: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out, true
}

// checkAnswer is every target's property (see the top of the file);
// allowed lists the codes the route may answer for this input.
func checkAnswer(tb testing.TB, what string, status int, body map[string]any, allowed ...string) {
	tb.Helper()
	if status < 400 {
		return
	}
	code, _ := body["error"].(string)
	want, known := statusOf[code]
	switch {
	case status >= 500 && code != core.EUnavailable && code != core.EProvider:
		tb.Fatalf("%s: %d %v; bad input must never be the core's fault", what, status, body)
	case !known:
		tb.Fatalf("%s: %d with error %q, not a code of core/error.go", what, status, code)
	case status != want:
		tb.Fatalf("%s: error %q at %d; its status is %d", what, code, status, want)
	case len(allowed) > 0 && !contains(allowed, code):
		tb.Fatalf("%s: error %q; want one of %v", what, code, allowed)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// FuzzHold sends any body to POST /v1/events/{id}/holds, on the seated and
// the GA event, each try as a new account (so the ticket limit does not
// end the exploration). A created hold is released again.
func FuzzHold(f *testing.F) {
	for _, b := range []string{
		`{"seats":["AUD-A-1"]}`, `{"seats":["AUD-A-1","AUD-A-2"]}`, `{"quantity":2}`,
		`{"best_available":{"band":"PRIME","count":2}}`, `{"best_available":{"band":"PRIME\u0000","count":2}}`,
		`{"seats":["AUD-A-1\u0000"]}`, "{\"seats\":[\"AUD-\xff-1\"]}", `{"seats":["` + strings.Repeat("A", 64) + `"]}`,
		`{"seats":[]}`, `{"seats":null}`, `{"quantity":0}`, `{"quantity":1e400}`, `{"quantity":9223372036854775808}`,
		`{"seats":["AUD-A-1"]} {}`, `{"seat":["AUD-A-1"]}`, ``, `[]`, `null`,
	} {
		f.Add([]byte(b), false)
		f.Add([]byte(b), true)
	}
	fx := newFuzzFixture(f)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte, ga bool) {
		ev := fx.event
		if ga {
			ev = fx.ga
		}
		account := fmt.Sprintf("fuzz-%d", n.Add(1))
		status, out, _ := fx.send(t, "POST", holdsPath(ev), fx.token(t, account, ev), body, nil)
		checkAnswer(t, fmt.Sprintf("hold %q", body), status, out, core.EInvalid, core.ETooLarge, core.ESeatsTaken,
			core.ESoldOut, core.ELimitExceeded)
		if status == http.StatusCreated {
			id, _ := out["hold_id"].(string)
			if s, out, _ := fx.send(t, "DELETE", "/v1/holds/"+id, fx.token(t, account, ev), nil, nil); s >= 300 {
				t.Fatalf("release of hold %s: %d %v", id, s, out)
			}
		}
	})
}

// FuzzIdempotencyKey sends POST /v1/holds/{id}/confirm with any
// Idempotency-Key (the values net/http sends) and any body: a key is 1 to
// 255 characters of anything, and whatever the store cannot keep must be
// refused as the client's, never a 500 or another request's answer.
func FuzzIdempotencyKey(f *testing.F) {
	for _, k := range []string{"k1", "", strings.Repeat("k", 255), strings.Repeat("k", 256), "\xff\xfe", "caf\xc3\xa9",
		"key with spaces", "\x7f", "a\tb"} {
		f.Add(k, []byte(`{"email":"fan@example.com"}`))
	}
	f.Add("k2", []byte(`{"email":"a\u0000@example.com"}`))
	f.Add("k3", []byte(`{"phone":"+91\u00009812345678"}`))
	f.Add("k4", []byte(`{"payment_token":"tok\u0000"}`))
	f.Add("k5", []byte(`{"emai":"x"}`))
	fx := newFuzzFixture(f, withPayments)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, key string, body []byte) {
		account := fmt.Sprintf("fuzz-%d", n.Add(1))
		tok := fx.token(t, account, fx.ga)
		s, hold, _ := fx.send(t, "POST", holdsPath(fx.ga), tok, []byte(`{"quantity":1}`), nil)
		if s != http.StatusCreated {
			t.Fatalf("hold: %d %v", s, hold)
		}
		id, _ := hold["hold_id"].(string)
		status, out, ok := fx.send(t, "POST", "/v1/holds/"+id+"/confirm", tok, body, map[string]string{"Idempotency-Key": key})
		if !ok {
			return // net/http refuses to send this header value: no server sees it
		}
		checkAnswer(t, fmt.Sprintf("confirm with key %q body %q", key, body), status, out,
			core.EInvalid, core.ETooLarge, core.EIdemMissing)
		fx.send(t, "DELETE", "/v1/holds/"+id, tok, nil, nil)
	})
}

// FuzzWebhook sends the payment provider's route any body, signed
// (a well-formed signature over it, so the body's own parsing is reached)
// or with any Payment-Signature header. Unsigned it must be
// invalid_signature; signed, an event the core cannot read is
// invalid_request and one it can is acknowledged, never a 500 (the
// provider would retry it forever).
func FuzzWebhook(f *testing.F) {
	for _, b := range []string{
		`{"id":"evt_1","type":"payment.succeeded","data":{"object":{"id":"pay_1","reference":"booking-1"}}}`,
		`{"id":"evt_2","type":"payment.failed","data":{"object":{"id":"pay_2","reference":"booking-99999"}}}`,
		`{"id":"evt_3","type":"payment.succeeded","data":{"object":{"id":"pay\u0000","reference":"booking-1"}}}`,
		"{\"id\":\"evt_\xff\",\"type\":\"payment.succeeded\",\"data\":{\"object\":{\"id\":\"p\",\"reference\":\"x\"}}}",
		`{"id":"evt_4","type":"refund.succeeded"}`, `{"id":"","type":"x"}`, `[]`, `{`,
	} {
		f.Add([]byte(b), true, "")
		f.Add([]byte(b), false, "t=1,v1=00")
	}
	fx := newFuzzFixture(f, withPayments)
	secret := []byte("whsec") // withPayments' secret
	f.Fuzz(func(t *testing.T, body []byte, sign bool, header string) {
		if sign {
			header = paysig.Sign(secret, time.Now(), body)
		}
		status, out, ok := fx.send(t, "POST", "/v1/webhooks/payments", "", body, map[string]string{paysig.Header: header})
		if !ok {
			return
		}
		what := fmt.Sprintf("webhook %q signed %v (%q)", body, sign, header)
		if !sign {
			if status != http.StatusBadRequest || out["error"] != core.EBadSignature {
				if paysig.Verify(secret, header, body, time.Now()) != nil {
					t.Fatalf("%s: %d %v; want 400 invalid_signature", what, status, out)
				}
			}
		}
		checkAnswer(t, what, status, out, core.EInvalid, core.EBadSignature, core.ETooLarge)
	})
}

// FuzzSignIn sends any body to the three sign-in routes (POST
// /v1/auth/code, POST /v1/auth/verify, PATCH /v1/me), from any client
// address header (the per-address limits key on it): a refusal is the
// client's, never a 500. The limits (429) are an answer like any other.
func FuzzSignIn(f *testing.F) {
	for _, b := range []string{
		`{"phone":"+919812345678"}`, `{"phone":"9812345678"}`, `{"phone":"+91\u00009812345678"}`, `{"phone":""}`,
		`{"phone":"+919812345678","code":"123456"}`, `{"phone":"+919812345678","code":"12345\u0000"}`,
		`{"email":"fan@example.com"}`, `{"email":"a\u0000@example.com"}`, "{\"email\":\"caf\xe9@example.com\"}",
		`{"email":null}`, `{"email":""}`, `{"email":"` + strings.Repeat("a", 250) + `@x.in"}`, `{}`, `[]`, ``,
	} {
		for route := range byte(3) {
			f.Add(route, []byte(b), "10.0.0.1")
		}
	}
	f.Add(byte(0), []byte(`{"phone":"+919812345678"}`), "2001:db8::1")
	f.Add(byte(0), []byte(`{"phone":"+919812345678"}`), "not an address")
	f.Add(byte(0), []byte(`{"phone":"+919812345678"}`), "")
	fx := newFuzzFixture(f, withAccounts(core.SignInLimits{}))
	var me string // an account's token for PATCH /v1/me, made at the first try
	f.Fuzz(func(t *testing.T, route byte, body []byte, addr string) {
		if me == "" {
			me, _ = fx.signIn(t, "+919800000001")
		}
		hdr := map[string]string{corehttp.ClientAddrHeader: addr}
		var status int
		var out map[string]any
		var ok bool
		switch route % 3 {
		case 0:
			status, out, ok = fx.send(t, "POST", "/v1/auth/code", "", body, hdr)
		case 1:
			status, out, ok = fx.send(t, "POST", "/v1/auth/verify", "", body, hdr)
		default:
			status, out, ok = fx.send(t, "PATCH", "/v1/me", me, body, hdr)
		}
		if ok {
			checkAnswer(t, fmt.Sprintf("route %d body %q addr %q", route%3, body, addr), status, out,
				core.EInvalid, core.ETooLarge, core.ERateLimited, core.ECodeInvalid)
		}
	})
}

// FuzzGate sends any body to the gate's two routes (POST /v1/gate/scan,
// POST /v1/gate/sync) as a staff member of the event's venue. The seeds
// carry a real ticket of a captured booking, so mutations reach the
// check-in store; refusals are the client's, never a 500.
func FuzzGate(f *testing.F) {
	db := postgrestest.NewDB(f, postgres.Options{MaxConns: 8})
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "Monsoon Nights", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
	if err != nil {
		f.Fatal(err)
	}
	var venue int64
	if err := db.Pool().QueryRow(ctx, `SELECT venue_id FROM events WHERE id = $1`, ev).Scan(&venue); err != nil {
		f.Fatal(err)
	}
	skey := ed25519.NewKeyFromSeed([]byte("onsale gate fuzz staff key seed0"))
	tkey := ed25519.NewKeyFromSeed([]byte("onsale gate fuzz ticket key seed"))
	staff, tickets := account.NewSigner(skey), ticket.NewSigner(tkey)
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(skey.Public().(ed25519.PublicKey)),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
		Gate: &corehttp.Gate{CheckIns: db, TicketKey: tickets.PublicKey(), Staff: ticket.NewStaffVerifier(staff.PublicKey())}}
	srv := httptest.NewServer(s.Handler())
	f.Cleanup(srv.Close)
	fx := &fixture{srv: srv}

	// one captured booking of two seats: its tickets are the seeds' payloads
	h, err := db.CreateHold(ctx, core.HoldParams{EventID: ev, Account: "fan", Request: core.HoldRequest{Seats: []string{"AUD-J-4", "AUD-J-5"}}})
	if err != nil {
		f.Fatal(err)
	}
	b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "fan", EventID: ev}, core.FlowAsync, core.Contact{})
	if err == nil {
		err = db.SetPaymentID(ctx, b.ID, fmt.Sprint("pay_", b.ID))
	}
	if err == nil {
		_, err = db.Settle(ctx, core.Settlement{PaymentID: fmt.Sprint("pay_", b.ID), BookingID: b.ID, Succeeded: true})
	}
	if err == nil {
		b, err = db.Booking(ctx, b.ID)
	}
	if err != nil {
		f.Fatal(err)
	}
	tks := tickets.SignTickets(b)
	tok, _, err := ticket.StaffToken(staff, core.Staff{Name: "asha", Venue: venue, Gate: "G1"}, 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	p := tks[0].Payload
	for _, body := range []string{
		`{"ticket":"` + p + `"}`, `{"ticket":"` + p + `","scan_id":"123e4567-e89b-12d3-a456-426614174000"}`,
		`{"ticket":"` + p + `","scan_id":"not-a-uuid"}`, `{"ticket":"` + p + "\u0000" + `"}`, `{"ticket":""}`, `{}`, `[]`, ``,
	} {
		f.Add(false, []byte(body))
	}
	for _, body := range []string{
		`{"scans":[{"ticket":"` + tks[1].Payload + `","at":"2026-01-01T10:00:00Z","scan_id":"123e4567-e89b-12d3-a456-426614174001"}]}`,
		`{"scans":[{"ticket":"` + p + `","at":"0001-01-01T00:00:00Z"},{"ticket":"` + p + `","at":"9999-12-31T23:59:59Z"}]}`,
		`{"scans":[{"ticket":"x","at":"yesterday"}]}`, `{"scans":null}`, `{"scans":[]}`,
	} {
		f.Add(true, []byte(body))
	}
	f.Fuzz(func(t *testing.T, sync bool, body []byte) {
		path := "/v1/gate/scan"
		if sync {
			path = "/v1/gate/sync"
		}
		status, out, _ := fx.send(t, "POST", path, tok, body, nil)
		checkAnswer(t, fmt.Sprintf("%s %q", path, body), status, out, core.EInvalid, core.ETooLarge, core.ETicketInvalid,
			core.ETicketRevoked, core.EWrongVenue, core.EWrongEvent, core.EAlreadyUsed)
	})
}
