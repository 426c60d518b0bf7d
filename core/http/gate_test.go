package http_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
)

type gateFixture struct {
	srv     *httptest.Server
	db      *postgres.DB
	staff   *account.Signer
	tickets *ticket.Signer
	event   int64
	venue   int64
}

func newGateFixture(t *testing.T) *gateFixture {
	t.Helper()
	db := postgrestest.NewDB(t, postgres.Options{MaxConns: 8})
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "Monsoon Nights", Kind: core.KindMovie, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	f := &gateFixture{db: db, event: ev}
	if err := db.Pool().QueryRow(ctx, `SELECT venue_id FROM events WHERE id = $1`, ev).Scan(&f.venue); err != nil {
		t.Fatal(err)
	}
	_, skey, _ := ed25519.GenerateKey(rand.Reader)
	_, tkey, _ := ed25519.GenerateKey(rand.Reader)
	f.staff, f.tickets = account.NewSigner(skey), ticket.NewSigner(tkey)
	admitPub, _, _ := ed25519.GenerateKey(rand.Reader)
	s := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(admitPub),
		Ready: db.Ping, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(),
		Gate: &corehttp.Gate{CheckIns: db, TicketKey: f.tickets.PublicKey(), Staff: ticket.NewStaffVerifier(f.staff.PublicKey())}}
	f.srv = served(t, s.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

// booking makes a CONFIRMED, captured booking of seats and returns its
// tickets' QR payloads.
func (f *gateFixture) booking(t *testing.T, account string, seats ...string) (*core.Booking, []string) {
	t.Helper()
	h, err := f.db.CreateHold(ctx, core.HoldParams{EventID: f.event, Account: account, Request: core.HoldRequest{Seats: seats}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: account, EventID: f.event}, core.FlowAsync, core.Contact{})
	if err == nil {
		err = f.db.SetPaymentID(ctx, b.ID, fmt.Sprint("pay_", b.ID))
	}
	if err == nil {
		_, err = f.db.Settle(ctx, core.Settlement{PaymentID: fmt.Sprint("pay_", b.ID), BookingID: b.ID, Succeeded: true})
	}
	if err == nil {
		b, err = f.db.Booking(ctx, b.ID)
	}
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, tk := range f.tickets.SignTickets(b) {
		payloads = append(payloads, tk.Payload)
	}
	return b, payloads
}

func (f *gateFixture) token(t *testing.T, name string, venue int64, gate string) string {
	t.Helper()
	tok, _, err := ticket.StaffToken(f.staff, core.Staff{Name: name, Venue: venue, Gate: gate}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *gateFixture) call(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("%s %s: not JSON: %v", method, path, err)
	}
	return resp.StatusCode, m
}

func scanBody(payload string) string {
	b, _ := json.Marshal(map[string]string{"ticket": payload})
	return string(b)
}

func TestGateScan(t *testing.T) {
	f := newGateFixture(t)
	b, p := f.booking(t, "alice", "AUD-J-4", "AUD-J-5")
	refunded, rp := f.booking(t, "bob", "AUD-K-1")
	f.db.Pool().Exec(ctx, `UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, refunded.ID)
	gate3, gate1 := f.token(t, "asha", f.venue, "3"), f.token(t, "ravi", f.venue, "1")
	elsewhere := f.token(t, "meera", f.venue+1, "1")
	expired, _, _ := ticket.StaffToken(f.staff, core.Staff{Name: "asha", Venue: f.venue, Gate: "3"}, -time.Minute)
	fan, _, _ := f.staff.Account("42", true, time.Hour)
	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	forged := ticket.NewSigner(otherKey).Sign(ticket.Claims{Event: f.event, Booking: b.ID, N: 1})
	for _, tc := range []struct {
		name, token, body string
		status            int
		code, message     string
	}{
		{"no token", "", scanBody(p[0]), 401, core.EUnauthorized, "staff token"},
		{"a fan's token", fan, scanBody(p[0]), 401, core.EUnauthorized, ""},
		{"expired token", expired, scanBody(p[0]), 401, core.ETokenExpired, ""},
		{"empty body", gate3, "", 400, core.EInvalid, ""},
		{"unknown field", gate3, `{"ticket":"x","gate":"9"}`, 400, core.EInvalid, ""},
		{"not a ticket", gate3, scanBody("hello"), 400, core.ETicketInvalid, "cannot be read"},
		{"forged ticket", gate3, scanBody(forged), 400, core.ETicketInvalid, "signature"},
		{"first scan", gate3, scanBody(p[0]), 200, "", ""},
		{"second scan, another gate", gate1, scanBody(p[0]), 409, core.EAlreadyUsed, "already used at gate 3 at "},
		{"second scan, lower case", gate3, scanBody(strings.ToLower(p[0])), 409, core.EAlreadyUsed, "already used at gate 3"},
		{"another venue", elsewhere, scanBody(p[1]), 403, core.EWrongVenue, ""},
		{"refunded", gate1, scanBody(rp[0]), 410, core.ETicketRevoked, ""},
		{"the other ticket", gate1, scanBody(p[1]), 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := f.call(t, "POST", "/v1/gate/scan", tc.token, tc.body)
			if status != tc.status || (tc.code != "" && body["error"] != tc.code) || !strings.Contains(fmt.Sprint(body["message"]), tc.message) {
				t.Fatalf("scan = %d %v; want %d %s %q", status, body, tc.status, tc.code, tc.message)
			}
			switch status {
			case 200:
				if body["result"] != "admitted" || body["seat"] == "" || body["ticket"] == "" || body["event_name"] != "Monsoon Nights" {
					t.Errorf("admitted answer = %v", body)
				}
			case 409:
				at, err := time.Parse(time.RFC3339, fmt.Sprint(body["at"]))
				if body["gate"] != "3" || err != nil || time.Since(at) > time.Minute || !strings.HasSuffix(fmt.Sprint(body["message"]), at.Format("15:04")) {
					t.Errorf("already used answer = %v", body)
				}
			}
		})
	}

	status, off := f.call(t, "GET", "/v1/gate/offline", gate3, "")
	key, _ := base64.StdEncoding.DecodeString(fmt.Sprint(off["public_key"]))
	if status != 200 || !bytes.Equal(key, f.tickets.PublicKey()) || off["gate"] != "3" || len(off["events"].([]any)) != 1 ||
		fmt.Sprint(off["revoked"]) != fmt.Sprintf("[%d-1]", refunded.ID) || len(off["used"].([]any)) != 2 || off["note"] == "" {
		t.Fatalf("offline = %d %v", status, off)
	}
	since := time.Now().Add(core.GateSinceOverlap + time.Minute).UTC().Format(time.RFC3339)
	if status, inc := f.call(t, "GET", "/v1/gate/offline?since="+since, gate3, ""); status != 200 || len(inc["used"].([]any)) != 0 || inc["since"] == nil {
		t.Errorf("offline since %s = %d %v; want no used tickets", since, status, inc)
	}
	if status, _ := f.call(t, "GET", "/v1/gate/offline?since=yesterday", gate3, ""); status != 400 {
		t.Errorf("offline since=yesterday = %d; want 400", status)
	}
	if status, _ := f.call(t, "GET", "/v1/gate/offline", "", ""); status != 401 {
		t.Errorf("offline without a token = %d; want 401", status)
	}
}

func TestGateSync(t *testing.T) {
	f := newGateFixture(t)
	b, p := f.booking(t, "alice", "AUD-J-4", "AUD-J-5", "AUD-J-6")
	refunded, rp := f.booking(t, "bob", "AUD-K-1")
	f.db.Pool().Exec(ctx, `UPDATE bookings SET status = 'REFUNDED' WHERE id = $1`, refunded.ID)
	gate1, gate2 := f.token(t, "ravi", f.venue, "1"), f.token(t, "asha", f.venue, "2")
	if status, _ := f.call(t, "POST", "/v1/gate/scan", gate1, scanBody(p[0])); status != 200 {
		t.Fatal("online scan failed")
	}
	at := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	sync := fmt.Sprintf(`{"scans":[{"ticket":%q,"at":%q},{"ticket":%q,"at":%q},{"ticket":%q,"at":%q},{"ticket":"junk","at":%q}]}`,
		p[0], at, p[1], at, rp[0], at, at)
	want := []string{"duplicate", "admitted", "revoked", "invalid"}
	for round := range 2 { // the same sync twice: its own admits stay admitted
		status, ans := f.call(t, "POST", "/v1/gate/sync", gate2, sync)
		if status != 200 {
			t.Fatalf("sync = %d %v", status, ans)
		}
		res := ans["results"].([]any)
		for i, w := range want {
			r := res[i].(map[string]any)
			if r["result"] != w {
				t.Errorf("round %d scan %d = %v; want %s", round, i, r, w)
			}
		}
		if d := res[0].(map[string]any); d["gate"] != "1" || d["ticket"] != fmt.Sprintf("%d-1", b.ID) {
			t.Errorf("duplicate = %v; want first at gate 1", d)
		}
		if ans["admitted"] != 1.0 || ans["duplicates"] != 1.0 || ans["refused"] != 2.0 {
			t.Errorf("counts = %v", ans)
		}
	}
	var scanned time.Time
	f.db.Pool().QueryRow(ctx, `SELECT scanned_at FROM checkins WHERE booking_id = $1 AND n = 2`, b.ID).Scan(&scanned)
	if scanned.UTC().Format(time.RFC3339) != at {
		t.Errorf("offline scan recorded at %v; want the scanner's %s", scanned, at)
	}

	// Scan ids: a scanner whose clock is a day ahead syncs the same scan
	// twice (the time used is the sync's, different each time), and an
	// online scan whose answer it never got is synced as an offline one:
	// both are its own admits, not duplicates. Another look is a duplicate.
	b2, p2 := f.booking(t, "carol", "AUD-L-1", "AUD-L-2")
	const id1, id2, id3 = "11111111-2222-4333-8444-555555555555", "21111111-2222-4333-8444-555555555555", "31111111-2222-4333-8444-555555555555"
	if status, body := f.call(t, "POST", "/v1/gate/scan", gate2, fmt.Sprintf(`{"ticket":%q,"scan_id":%q}`, p2[1], id2)); status != 200 {
		t.Fatalf("scan with an id = %d %v", status, body)
	}
	ahead := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for round, want := range [][]string{{"admitted", "admitted", "duplicate"}, {"admitted", "admitted", "duplicate"}} {
		body := fmt.Sprintf(`{"scans":[{"ticket":%q,"at":%q,"scan_id":%q},{"ticket":%q,"at":%q,"scan_id":%q},{"ticket":%q,"at":%q,"scan_id":%q}]}`,
			p2[0], ahead, id1, p2[1], ahead, id2, p2[1], ahead, id3)
		time.Sleep(1100 * time.Millisecond) // the sync's time differs between rounds
		status, ans := f.call(t, "POST", "/v1/gate/sync", gate2, body)
		if status != 200 {
			t.Fatalf("sync = %d %v", status, ans)
		}
		for i, w := range want {
			if r := ans["results"].([]any)[i].(map[string]any); r["result"] != w {
				t.Errorf("scan ids round %d scan %d = %v; want %s", round, i, r, w)
			}
		}
	}
	var clientAt time.Time
	f.db.Pool().QueryRow(ctx, `SELECT client_at FROM checkins WHERE booking_id = $1 AND n = 1`, b2.ID).Scan(&clientAt)
	if clientAt.UTC().Format(time.RFC3339) != ahead {
		t.Errorf("client time stored %v; want the scanner's %s as given", clientAt, ahead)
	}
	for _, bad := range []string{`{"ticket":"x","scan_id":"nope"}`} {
		if status, body := f.call(t, "POST", "/v1/gate/scan", gate2, bad); status != 400 {
			t.Errorf("scan %s = %d %v; want 400", bad, status, body)
		}
	}
	if status, body := f.call(t, "POST", "/v1/gate/sync", gate2, `{"scans":[{"ticket":"x","scan_id":"nope"}]}`); status != 400 {
		t.Errorf("sync with a bad scan id = %d %v; want 400", status, body)
	}
	many := `{"scans":[` + strings.Repeat(`{"ticket":"x"},`, core.MaxSyncScans) + `{"ticket":"x"}]}`
	if status, body := f.call(t, "POST", "/v1/gate/sync", gate2, many); status != 400 {
		t.Errorf("sync of %d scans = %d %v; want 400", core.MaxSyncScans+1, status, body)
	}
}

// Two gates, two HTTP clients, the same ticket at the same instant, 100
// times: one admitted, one already used, every time. (The control, a
// redemption run without the table's keys admitting twice, is in
// core/postgres.)
func TestGateRaceTwoClients(t *testing.T) {
	const rounds = 100
	f := newGateFixture(t)
	b, _ := f.booking(t, "alice", "AUD-J-4")
	if _, err := f.db.Pool().Exec(ctx, `INSERT INTO tickets (booking_id, event_id, n) SELECT $1, $2, g FROM generate_series(2, $3) g`,
		b.ID, f.event, rounds); err != nil {
		t.Fatal(err)
	}
	tokens := []string{f.token(t, "ravi", f.venue, "1"), f.token(t, "asha", f.venue, "2")}
	clients := []*http.Client{{Transport: &http.Transport{}}, {Transport: &http.Transport{}}}
	for n := 1; n <= rounds; n++ {
		body := scanBody(f.tickets.Sign(ticket.Claims{Event: f.event, Booking: b.ID, N: n}))
		var wg sync.WaitGroup
		start := make(chan struct{})
		statuses := make([]int, 2)
		for i := range 2 {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", f.srv.URL+"/v1/gate/scan", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				<-start
				resp, err := clients[i].Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			})
		}
		close(start)
		wg.Wait()
		if !(statuses[0] == 200 && statuses[1] == 409 || statuses[0] == 409 && statuses[1] == 200) {
			t.Fatalf("ticket %d: gates answered %v; want one 200 and one 409", n, statuses)
		}
	}
}
