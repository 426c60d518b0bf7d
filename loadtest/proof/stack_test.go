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
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
	"github.com/onsale/onsale/core/outbox"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/provider"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/admission"
)

const (
	apiKey        = "sk_test_proof"
	webhookSecret = "whsec_test_proof"
)

var ctx = context.Background()

// stack is a core (in process, real PostgreSQL) wired to a payment
// simulator (in process, over real HTTP both ways).
type stack struct {
	db       *postgres.DB
	sim      *paysim.Sim
	simURL   string
	core     *httptest.Server
	worker   *outbox.Worker
	admit    *admission.Signer
	tickets  *ticket.Signer
	event    int64 // the stadium concert
	stopWork context.CancelFunc
}

type stackOpts struct {
	policy core.LatePolicy
	sms    bool
	mailer *notify.Mailer
}

func newStack(t *testing.T, o stackOpts) *stack {
	t.Helper()
	db := postgrestest.NewDB(t, postgres.Options{LatePolicy: o.policy, MaxConns: 30})
	b := paysim.DefaultBehaviour()
	b.UPIDelayMin, b.UPIDelayMax = time.Hour, time.Hour // tests settle UPI payments themselves
	b.WebhookRetryBase, b.WebhookRetryMax = 20*time.Millisecond, 200*time.Millisecond
	sim, err := paysim.New(paysim.Config{APIKey: apiKey, WebhookSecret: webhookSecret, Control: true, Behaviour: b}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); simSrv.Close() })

	akey, _ := admission.GenerateKey()
	tkey, _ := admission.GenerateKey()
	s := &stack{db: db, sim: sim, simURL: simSrv.URL, admit: admission.NewSigner(akey), tickets: ticket.NewSigner(tkey)}
	prov := provider.New(simSrv.URL, apiKey)
	met := metrics.New()
	log := slog.New(slog.DiscardHandler)
	s.worker = &outbox.Worker{DB: db, Provider: prov, Tickets: s.tickets, PublicURL: "http://onsale.test",
		Lease: time.Second, Log: log, Metrics: met}
	if o.mailer != nil { // the worker's Mailer is an interface: never a nil *notify.Mailer in it
		s.worker.Mailer = o.mailer
	}
	if o.sms {
		s.worker.SMS = &notify.SMS{URL: simSrv.URL + "/sms"}
	}
	srv := &corehttp.Server{Catalog: db, Holds: db, Verifier: admission.NewVerifierFromPublicKeys(s.admit.PublicKey()),
		Ready: db.Ping, Log: log, Metrics: met,
		Payments: &corehttp.Payments{Bookings: db, Keys: db, Provider: prov, Outbox: s.worker,
			WebhookSecret: []byte(webhookSecret), Tickets: s.tickets}}
	s.core = httptest.NewServer(srv.Handler())
	t.Cleanup(s.core.Close)
	sim.SetWebhookURL(s.core.URL + "/v1/webhooks/payments")
	wctx, cancel := context.WithCancel(ctx)
	s.stopWork = cancel
	done := make(chan struct{})
	go func() { defer close(done); s.worker.Run(wctx, 20*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })

	s.event, err = db.CreateEvent(ctx, seed.EventSpec{Name: "Arijit Singh Live", Kind: core.KindConcert, Layout: seed.MustLayout("stadium"),
		StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// call sends a JSON request to the core as account (admit token for the
// stack's event), with optional headers as name, value pairs.
func (s *stack) call(t *testing.T, method, path, account string, body any, hdr ...string) reply {
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
	req, _ := http.NewRequest(method, s.core.URL+path, r)
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
func (s *stack) hold(t *testing.T, account string, seats ...string) string {
	t.Helper()
	r := s.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), account, map[string]any{"seats": seats})
	if r.status != 201 {
		t.Fatalf("hold %v = %d %s", seats, r.status, r.raw)
	}
	return r.body["hold_id"].(string)
}

// pay starts the UPI flow on a hold and returns the booking id and payment id.
func (s *stack) pay(t *testing.T, account, hold string, contact map[string]any) (int64, string) {
	t.Helper()
	r := s.call(t, "POST", "/v1/holds/"+hold+"/payment", account, contact, "Idempotency-Key", "pay-"+hold)
	if r.status != 201 {
		t.Fatalf("pay = %d %s", r.status, r.raw)
	}
	b := r.body["booking"].(map[string]any)
	return int64(b["booking_id"].(float64)), r.body["payment"].(map[string]any)["id"].(string)
}

func (s *stack) bookingStatus(t *testing.T, id int64) core.BookingStatus {
	t.Helper()
	var st core.BookingStatus
	if err := s.db.Pool().QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, id).Scan(&st); err != nil {
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

func (s *stack) totals(ref string) paysim.Totals { return s.sim.Ledger().Totals[ref] }

// expire moves a hold's expiry (and its seats') into the past.
func (s *stack) expire(t *testing.T, hold string) {
	t.Helper()
	if _, err := s.db.Pool().Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() - interval '1 ms' WHERE id = $1 RETURNING id, expires_at)
UPDATE seats x SET hold_until = h.expires_at FROM h WHERE x.hold_id = h.id`, hold); err != nil {
		t.Fatal(err)
	}
}

// refunds counts the refund entries in the provider's ledger for a reference.
func (s *stack) refunds(ref string) int {
	n := 0
	for _, e := range s.sim.Ledger().Entries {
		if e.Type == "refund" && e.Reference == ref {
			n++
		}
	}
	return n
}
