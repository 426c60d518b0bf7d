package proof

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/servicetest"
)

// The simulator's credentials are the ones package stack gives the core.
const (
	apiKey        = stack.ProviderKey
	webhookSecret = stack.WebhookSecret
)

var ctx = context.Background()

// proofStack is the real core (bin/core, started by package stack on a
// database of the test's own) wired to a payment simulator in process, over
// real HTTP both ways: the test steers the simulator (settles payments,
// switches its misbehaviour, reads its ledger) and reads the core's
// database in SQL. Nothing here imports the core's Go packages.
type proofStack struct {
	db      *pgxpool.Pool
	dbURL   string
	sim     *paysim.Sim
	simURL  string
	apps    *stack.Stack
	coreURL string
	admit   *admission.Signer
	event   int64 // the stadium concert
	// webhook is the core's webhook path for the provider in use.
	webhook string
}

type stackOpts struct {
	policy  string   // the late-payment policy; "" = the core's default (refund)
	sms     bool     // ticket SMS through the simulator
	smtp    string   // SMTP relay for ticket emails (host:port); "" = none
	coreEnv []string // more of the core's environment (overrides)
	// provider is the adapter under test: "" or "paysim" (the simulator's
	// own shape), "stripe" or "razorpay" (the core's adapter against the
	// simulator's dialect of that provider).
	provider string
}

func newStack(t *testing.T, o stackOpts) *proofStack {
	t.Helper()
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "proof")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	b := paysim.DefaultBehaviour()
	b.UPIDelayMin, b.UPIDelayMax = time.Hour, time.Hour // tests settle UPI payments themselves
	b.WebhookRetryBase, b.WebhookRetryMax = 20*time.Millisecond, 200*time.Millisecond
	if o.provider == "" {
		o.provider = paysim.DialectPaysim
	}
	sim, err := paysim.New(paysim.Config{APIKey: apiKey, WebhookSecret: webhookSecret, Control: true, Behaviour: b, Dialect: o.provider},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); simSrv.Close() })

	// The core as the in-process wiring had it: a 1 s outbox lease, a 20 ms
	// poll, no sweeps (the tests expire holds themselves), no SMS or email
	// unless asked for, tickets linking to onsale.test.
	env := []string{"ONSALE_DB_MAX_CONNS=30", "ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=20ms", "ONSALE_SWEEP_INTERVAL=1h",
		"ONSALE_PUBLIC_URL=http://onsale.test", "ONSALE_LOG_LEVEL=warn", "ONSALE_SMTP_ADDR=" + o.smtp, "ONSALE_SMTP_FROM=tickets@onsale.test",
		"ONSALE_SMTP_TLS=off"} // the proof's SMTP sink is plain, on the same host
	_, provider, _ := stack.ProviderEnv(o.provider, "") // the simulator runs in process, its webhook URL set below
	env = append(env, provider...)
	webhook := "/v1/webhooks/" + o.provider
	if o.provider == paysim.DialectPaysim {
		webhook = "/v1/webhooks/payments"
	}
	if o.policy != "" {
		env = append(env, "ONSALE_LATE_POLICY="+o.policy)
	}
	if !o.sms {
		env = append(env, "ONSALE_SMS_URL=")
	}
	apps, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), Apps: []string{stack.Core}, DatabaseURL: dbURL,
		PaysimURL: simSrv.URL, CoreEnv: append(env, o.coreEnv...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apps.Stop() })
	sim.SetWebhookURL(apps.CoreURL + webhook)

	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	key, err := admission.ReadPrivateKeyFile(apps.AdmitKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &proofStack{db: db, dbURL: dbURL, sim: sim, simURL: simSrv.URL, apps: apps, coreURL: apps.CoreURL, admit: admission.NewSigner(key),
		webhook: webhook}
	s.event = seedStadium(t, dbURL)
	return s
}

// seedStadium seeds the demo catalog with bin/seed, the 40,000-seat stadium
// concert on sale since a minute ago, and returns the concert's id.
func seedStadium(t *testing.T, dbURL string) int64 {
	t.Helper()
	bin, err := stack.Binary("", "seed")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-database-url", dbURL, "-json", "-onsale-in", "-1m").Output()
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		var e struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		}
		if json.Unmarshal(line, &e) == nil && e.Name == "Arijit Singh Live" {
			return e.ID
		}
	}
	t.Fatalf("seed made no stadium concert:\n%s", out)
	return 0
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// call sends a JSON request to the core as account (admit token for the
// stack's event), with optional headers as name, value pairs.
func (s *proofStack) call(t *testing.T, method, path, account string, body any, hdr ...string) reply {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		r = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, s.coreURL+path, r)
	if account != "" {
		tok, err := s.admit.Admit(account, s.event, 0, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
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

// hold holds seats for account and returns the hold id.
func (s *proofStack) hold(t *testing.T, account string, seats ...string) string {
	t.Helper()
	r := s.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), account, map[string]any{"seats": seats})
	if r.status != 201 {
		t.Fatalf("hold %v = %d %s", seats, r.status, r.raw)
	}
	return r.body["hold_id"].(string)
}

// pay starts the UPI flow on a hold and returns the booking id and payment id.
func (s *proofStack) pay(t *testing.T, account, hold string, contact map[string]any) (int64, string) {
	t.Helper()
	r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", account, contact, "Idempotency-Key", "pay-"+hold)
	if r.status != 201 {
		t.Fatalf("pay = %d %s", r.status, r.raw)
	}
	b := r.body["booking"].(map[string]any)
	return int64(b["booking_id"].(float64)), r.body["payment"].(map[string]any)["id"].(string)
}

func (s *proofStack) bookingStatus(t *testing.T, id int64) string {
	t.Helper()
	var st string
	if err := s.db.QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// eventually polls cond every 20 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *proofStack) totals(ref string) paysim.Totals { return s.sim.Ledger().Totals[ref] }

// expire moves a hold's expiry (and its seats') into the past.
func (s *proofStack) expire(t *testing.T, hold string) {
	t.Helper()
	if _, err := s.db.Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() - interval '1 ms' WHERE id = $1 RETURNING id, expires_at)
UPDATE seats x SET hold_until = h.expires_at FROM h WHERE x.hold_id = h.id`, hold); err != nil {
		t.Fatal(err)
	}
}

// expireActive expires a hold only while it is ACTIVE (not yet booked by an
// approved payment) and reports whether it did. The row lock makes the check
// and the change one step against the core's own booking of the hold.
func (s *proofStack) expireActive(t *testing.T, hold string) bool {
	t.Helper()
	var n int
	if err := s.db.QueryRow(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() - interval '1 ms' WHERE id = $1 AND status = 'ACTIVE' RETURNING id, expires_at),
s AS (UPDATE seats x SET hold_until = h.expires_at FROM h WHERE x.hold_id = h.id)
SELECT count(*) FROM h`, hold).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// refunds counts the refund entries in the provider's ledger for a reference.
func (s *proofStack) refunds(ref string) int {
	n := 0
	for _, e := range s.sim.Ledger().Entries {
		if e.Type == "refund" && e.Reference == ref {
			n++
		}
	}
	return n
}

// ledgerHas reports whether the provider's ledger has an entry of type for ref.
func (s *proofStack) ledgerHas(typ, ref string) bool {
	for _, e := range s.sim.Ledger().Entries {
		if e.Type == typ && e.Reference == ref {
			return true
		}
	}
	return false
}

// ticketClaims checks a ticket payload the way a gate scanner does, with
// bin/ticketverify and the core's ticket public key, and returns its claims.
func (s *proofStack) ticketClaims(t *testing.T, payload string) (claims struct {
	Booking int64 `json:"bkg"`
	N       int   `json:"n"`
}, err error) {
	t.Helper()
	bin, err := stack.Binary("", "ticketverify")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-pub", s.apps.TicketPub, payload).Output()
	if err != nil {
		return claims, fmt.Errorf("ticketverify: %v: %s", err, out)
	}
	_, js, ok := bytes.Cut(out, []byte("\n")) // "VALID ticket ...", then the claims
	if !ok || !bytes.HasPrefix(out, []byte("VALID")) {
		return claims, fmt.Errorf("ticketverify: %s", out)
	}
	return claims, json.Unmarshal(js, &claims)
}

// metric is the sum of a counter's samples (every label set) on the core's
// /metrics (its operators' listener).
func (s *proofStack) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.apps.CoreAdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok && (n == name || strings.HasPrefix(n, name+"{")) {
			var f float64
			fmt.Sscan(v, &f)
			sum += f
		}
	}
	return sum
}

// The wire vocabulary the tests assert on: the core's booking statuses,
// error codes and webhook outcomes, as its API spells them.
const (
	bookingPending   = "PAYMENT_PENDING"
	bookingConfirmed = "CONFIRMED"
	bookingFailed    = "FAILED"
	bookingRefundDue = "REFUND_DUE"
	bookingRefunded  = "REFUNDED"
	outcomeUnknown   = "UNKNOWN_ORDER"
	policyRefund     = "refund"

	eInvalid           = "invalid_request"
	eTooLarge          = "body_too_large"
	eUnauthorized      = "unauthorized"
	eForbidden         = "forbidden"
	eNotFound          = "not_found"
	eHoldExpired       = "hold_expired"
	ePaymentDeclined   = "payment_declined"
	ePaymentInProgress = "payment_in_progress"
	eIdemMissing       = "idempotency_key_missing"
	eIdemReused        = "idempotency_key_reused"
	eIdemInFlight      = "request_in_flight"
	eBadSignature      = "invalid_signature"
)

// bookingReference is the core's reference for a booking at the provider.
func bookingReference(id int64) string { return fmt.Sprintf("booking-%d", id) }

// cancelAtProvider cancels a payment's authorization at the provider, as
// its issuer would: the provider's API, with its key and an idempotency key.
func (s *proofStack) cancelAtProvider(key, payment string) error {
	return s.atProvider(payment, "cancel", key)
}

// atProvider POSTs an action on a payment to the provider's API, with its
// key and an idempotency key ("": none), and fails unless it answers 2xx.
func (s *proofStack) atProvider(payment, action, key string) error {
	req, _ := http.NewRequest("POST", s.simURL+"/v1/payments/"+payment+"/"+action, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s = %d %s", action, payment, resp.StatusCode, b)
	}
	return nil
}
