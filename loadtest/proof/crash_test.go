package proof

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/paysig"
)

// Experiment 4: the core is killed with SIGKILL between committing a late
// payment's REFUND_DUE and recording the refund, at both dangerous points:
// (a) after the provider carried the refund out but before its answer came
// back, and (b) before any refund reached the provider. After a restart the
// outbox finishes the job, and the provider's ledger shows exactly one refund.
func TestRefundSurvivesSIGKILL(t *testing.T) {
	// The real core process (bin/core), SIGKILLed and restarted by the test:
	// its outbox leases a job for a second and polls every 100 ms.
	s := newStack(t, stackOpts{coreEnv: []string{"ONSALE_OUTBOX_LEASE=1s", "ONSALE_OUTBOX_POLL=100ms"}})
	sim, c := s.sim, s.apps.Core
	b := sim.Behaviour()
	b.WebhookRetryBase, b.WebhookRetryMax = 50*time.Millisecond, 500*time.Millisecond
	if err := sim.SetBehaviour(b); err != nil {
		t.Fatal(err)
	}
	kill := func(t *testing.T) {
		t.Helper()
		if err := c.Kill(); err != nil { // SIGKILL: no cleanup of any kind
			t.Fatal(err)
		}
	}
	restart := func(t *testing.T) {
		t.Helper()
		if err := c.Start(ctx); err != nil { // waits for /readyz
			t.Fatal(err)
		}
	}

	late := func(account, seat string) (int64, string) {
		hold := s.hold(t, account, seat)
		booking, pay := s.pay(t, account, hold, nil)
		s.expire(t, hold)
		return booking, pay
	}

	t.Run("killed after the provider refunded, before the core recorded it", func(t *testing.T) {
		booking, pay := late("crash-a", "NL1-A-3")
		ref := bookingReference(booking)
		beh := sim.Behaviour()
		beh.TimeoutRate, beh.TimeoutDelay = 1, 30*time.Second // carried out, answered late
		sim.SetBehaviour(beh)
		if _, err := sim.Settle(pay, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the refund at the provider", func() bool { return s.refunds(ref) == 1 })
		kill(t)
		if st := s.bookingStatus(t, booking); st != bookingRefundDue {
			t.Fatalf("booking at the kill: %s; want REFUND_DUE (the refund not yet recorded)", st)
		}
		beh.TimeoutRate = 0
		sim.SetBehaviour(beh)
		restart(t)
		eventually(t, "REFUNDED after restart", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger: %d refunds, %+v; want exactly one refund, nothing kept", n, tot)
		}
	})

	t.Run("killed after commit, before any refund reached the provider", func(t *testing.T) {
		booking, pay := late("crash-b", "NL1-A-4")
		ref := bookingReference(booking)
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
		if r.status != 200 || r.body["outcome"] != bookingRefundDue {
			t.Fatalf("webhook = %d %s", r.status, r.raw)
		}
		kill(t)
		if n := s.refunds(ref); n != 0 || s.bookingStatus(t, booking) != bookingRefundDue {
			t.Fatalf("at the kill: %d refunds, booking %s; want none yet, REFUND_DUE", n, s.bookingStatus(t, booking))
		}
		beh.Outages = nil
		sim.SetBehaviour(beh)
		restart(t)
		eventually(t, "REFUNDED after restart", func() bool { return s.bookingStatus(t, booking) == bookingRefunded })
		// The provider's own copy of the event arrives at last: nothing more happens.
		sim.SetWebhookURL(s.coreURL + "/v1/webhooks/payments")
		sim.FlushWebhooks()
		if n, tot := s.refunds(ref), s.totals(ref); n != 1 || tot.Net() != 0 {
			t.Fatalf("ledger: %d refunds, %+v; want exactly one refund, nothing kept", n, tot)
		}
	})
}
