package proof

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/paysig"
)

// coreProcess is the real core binary, started and SIGKILLed by the test.
type coreProcess struct {
	bin, addr string
	env       []string
	cmd       *exec.Cmd
	log       *os.File
}

func (c *coreProcess) start(t *testing.T) {
	t.Helper()
	c.cmd = exec.Command(c.bin, "-addr", c.addr)
	c.cmd.Env = append(os.Environ(), c.env...)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "core ready", func() bool {
		resp, err := http.Get("http://" + c.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func (c *coreProcess) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup of any kind
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// Experiment 4: the core is killed with SIGKILL between committing a late
// payment's REFUND_DUE and recording the refund, at both dangerous points:
// (a) after the provider carried the refund out but before its answer came
// back, and (b) before any refund reached the provider. After a restart the
// outbox finishes the job, and the provider's ledger shows exactly one refund.
func TestRefundSurvivesSIGKILL(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "core")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/onsale/onsale/core/cmd/core").CombinedOutput(); err != nil {
		t.Fatalf("build core: %v\n%s", err, out)
	}
	dbURL := postgrestest.NewURL(t)
	db, err := postgres.Open(ctx, dbURL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "crash", Kind: core.KindConcert, Layout: seed.MustLayout("cinema"),
		StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}

	b := paysim.DefaultBehaviour()
	b.UPIDelayMin, b.UPIDelayMax = time.Hour, time.Hour
	b.WebhookRetryBase, b.WebhookRetryMax = 50*time.Millisecond, 500*time.Millisecond
	sim, err := paysim.New(paysim.Config{APIKey: apiKey, WebhookSecret: webhookSecret, Control: true, Behaviour: b}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	defer func() { sim.Close(); simSrv.Close() }()

	akey, _ := admission.GenerateKey()
	tkey, _ := admission.GenerateKey()
	admitPub, ticketKey := filepath.Join(dir, "admit.pub"), filepath.Join(dir, "ticket.key")
	admission.WritePublicKeyFile(admitPub, akey.Public().(ed25519.PublicKey))
	admission.WritePrivateKeyFile(ticketKey, tkey)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	logf, _ := os.Create(filepath.Join(dir, "core.log"))
	defer logf.Close()
	c := &coreProcess{bin: bin, addr: addr, log: logf, env: []string{
		"DATABASE_URL=" + dbURL, "ONSALE_ADMIT_PUBLIC_KEY=" + admitPub, "ONSALE_ADMIT_JWKS_URL=",
		"ONSALE_PROVIDER_URL=" + simSrv.URL, "ONSALE_PROVIDER_KEY=" + apiKey, "ONSALE_WEBHOOK_SECRET=" + webhookSecret,
		"ONSALE_TICKET_KEY=" + ticketKey, "ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=100ms", "ONSALE_LOG_LEVEL=warn",
	}}
	c.start(t)
	defer func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	}()
	sim.SetWebhookURL("http://" + addr + "/v1/webhooks/payments")
	s := &stack{db: db, sim: sim, admit: admission.NewSigner(akey), event: ev}
	s.core = &httptest.Server{URL: "http://" + addr}

	late := func(account, seat string) (int64, string) {
		hold := s.hold(t, account, seat)
		booking, pay := s.pay(t, account, hold, nil)
		s.expire(t, hold)
		return booking, pay
	}

	t.Run("killed after the provider refunded, before the core recorded it", func(t *testing.T) {
		booking, pay := late("crash-a", "AUD-C-3")
		ref := core.BookingReference(booking)
		beh := sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, 30*time.Second // carried out, answered late
		sim.SetBehaviour(beh)
		if _, err := sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the refund at the provider", func() bool { return s.refunds(ref) == 1 })
		c.kill(t)
		if st := s.bookingStatus(t, booking); st != core.BookingRefundDue {
			t.Fatalf("booking at the kill: %s; want REFUND_DUE (the refund not yet recorded)", st)
		}
		beh.TimeoutRate = 0
		sim.SetBehaviour(beh)
		c.start(t)
		eventually(t, "REFUNDED after restart", func() bool { return s.bookingStatus(t, booking) == core.BookingRefunded })
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger: %d refunds, %+v; want exactly one refund, nothing kept", n, tot)
		}
	})

	t.Run("killed after commit, before any refund reached the provider", func(t *testing.T) {
		booking, pay := late("crash-b", "AUD-C-4")
		ref := core.BookingReference(booking)
		sim.SetWebhookURL("") // the provider's own webhook waits; the test delivers one itself
		if _, err := sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		beh := sim.Behaviour()
		beh.Outages = []paysim.Window{{Start: time.Now().Add(-time.Second), End: time.Now().Add(time.Hour)}}
		sim.SetBehaviour(beh)
		body := fmt.Sprintf(`{"id":"evt_crash_b","type":"payment.succeeded","created":%d,"data":{"object":{"id":%q,"status":"succeeded","reference":%q}}}`,
			time.Now().Unix(), pay, ref)
		r := s.call(t, "POST", "/v1/webhooks/payments", "", body, paysig.Header, paysig.Sign([]byte(webhookSecret), time.Now(), []byte(body)))
		if r.status != 200 || r.body["outcome"] != string(core.BookingRefundDue) {
			t.Fatalf("webhook = %d %s", r.status, r.raw)
		}
		c.kill(t)
		if n := s.refunds(ref); n != 0 || s.bookingStatus(t, booking) != core.BookingRefundDue {
			t.Fatalf("at the kill: %d refunds, booking %s; want none yet, REFUND_DUE", n, s.bookingStatus(t, booking))
		}
		beh.Outages = nil
		sim.SetBehaviour(beh)
		c.start(t)
		eventually(t, "REFUNDED after restart", func() bool { return s.bookingStatus(t, booking) == core.BookingRefunded })
		// The provider's own copy of the event arrives at last: nothing more happens.
		sim.SetWebhookURL("http://" + addr + "/v1/webhooks/payments")
		sim.FlushWebhooks()
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger: %d refunds, %+v; want exactly one refund, nothing kept", n, tot)
		}
	})
}
