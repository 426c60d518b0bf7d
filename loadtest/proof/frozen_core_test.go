package proof

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/servicetest"
)

// A core frozen (SIGSTOP) in the middle of applying a payment, with the
// hold's seats locked in its open transaction, for longer than its
// timeouts and past the hold's expiry, while a second core serves a crowd,
// then let go (SIGCONT). The database ends the frozen core's transaction
// (idle_in_transaction_session_timeout), so the seats are not kept from
// anyone: once the hold's time runs out another fan holds and buys them
// through the second core while the first is still frozen. The thawed
// core's transaction is gone, so it books nothing; the payment, retried by
// the provider, finds the hold expired and is refunded. No seat is sold
// twice and nothing answers 500.
func TestFrozenCoreCannotActLate(t *testing.T) {
	r := frozenCore(t, false)
	if !r.sessionEnded {
		t.Error("the server did not end the frozen core's transaction")
	}
	if !r.otherFanGotSeats {
		t.Errorf("the other fan did not get the seats of the expired hold while the first core was frozen (answers %v)", r.otherFanAnswers)
	}
	if r.lateConfirm {
		t.Errorf("the thawed core confirmed booking %d after its hold's time ran out", r.booking)
	}
	if r.finalStatus == bookingConfirmed {
		t.Errorf("booking %d ended CONFIRMED; want refunded (its hold expired before the payment was applied)", r.booking)
	}
}

// The control: the same run with the frozen core's sessions exempt from
// idle_in_transaction_session_timeout. Its open transaction keeps the
// seats from every other fan for as long as it is frozen, and on SIGCONT
// it commits: the booking of a hold whose time ran out during the freeze
// is confirmed. The harness sees both, so the real run's outcome is the
// safeguard's doing.
func TestFrozenCoreControlActsLate(t *testing.T) {
	r := frozenCore(t, true)
	if r.otherFanGotSeats {
		t.Errorf("control: the other fan got the seats while the core was frozen with them locked (answers %v)", r.otherFanAnswers)
	}
	if !r.lateConfirm {
		t.Fatalf("control: the thawed core did not confirm the expired hold's booking (status %s): the harness cannot see a late act", r.finalStatus)
	}
	t.Logf("control: booking %d confirmed by the thawed core after its hold expired; the other fan was kept from the seats (%v)", r.booking, r.otherFanAnswers)
}

type frozenResult struct {
	booking          int64
	sessionEnded     bool
	otherFanGotSeats bool
	otherFanAnswers  map[string]int
	lateConfirm      bool
	finalStatus      string
}

func frozenCore(t *testing.T, control bool) frozenResult {
	start := time.Now()
	var mu sync.Mutex
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "frozen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	// Core A is the one frozen; its sessions are named so the test can
	// find them in pg_stat_activity.
	a, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := a.Query()
	q.Set("application_name", "core-a")
	envA := []string{"ONSALE_DB_IDLE_TX_TIMEOUT=1s"}
	if control {
		q.Set("idle_in_transaction_session_timeout", "0") // the URL's value wins over the core's setting
	}
	a.RawQuery = q.Encode()
	envA = append(envA, "DATABASE_URL="+a.String())
	s := newHAStack(t, dbURL, 2, envA)
	coreA, coreB := s.cores[0], s.cores[1]
	t.Cleanup(func() { syscall.Kill(coreA.Core.Pid(), syscall.SIGCONT) })

	// A crowd books through both cores all along.
	seats := s.freeSeats(t, 1000, 10)
	c := newCrowd(s.proofStack)
	run, stop := context.WithCancel(ctx)
	defer stop()
	wait := c.run(run, "crowd", []string{coreA.CoreURL, coreB.CoreURL}, split(seats, 8))
	defer wait()

	// Fan X holds two seats and pays (UPI) through core A.
	target := s.freeSeats(t, 2, 0)
	viaA := *s.proofStack
	viaA.coreURL = coreA.CoreURL
	hold := viaA.hold(t, "fan-x", target...)
	booking, pay := viaA.pay(t, "fan-x", hold, nil)
	// The hold has 2.5 seconds left when its payment is applied: it runs
	// out while core A is frozen with it locked.
	if _, err := s.db.Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() + interval '2.5 s' WHERE id = $1 RETURNING id, expires_at)
UPDATE seats x SET hold_until = h.expires_at FROM h WHERE x.hold_id = h.id`, hold); err != nil {
		t.Fatal(err)
	}
	// A trigger of the test's (in its own database) holds core A's Settle
	// at its ticket insert for a moment, with the hold and its seats
	// already booked under the open transaction: the moment to freeze it.
	if _, err := s.db.Exec(ctx, fmt.Sprintf(`
CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.booking_id = %d AND NEW.n = 1 THEN PERFORM pg_sleep(1.5); END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER test_stall BEFORE INSERT ON tickets FOR EACH ROW EXECUTE FUNCTION test_stall();`, booking)); err != nil {
		t.Fatal(err)
	}
	s.sim.SetWebhookURL(coreA.CoreURL + "/v1/webhooks/payments")
	if _, err := s.sim.Settle(pay, true); err != nil {
		t.Fatal(err)
	}
	var backend int
	if !waitUntil(10*time.Second, func() bool {
		return s.db.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'core-a' AND wait_event = 'PgSleep'`).Scan(&backend) == nil
	}) {
		t.Fatalf("core A's Settle never reached its ticket insert (booking %s)", s.bookingStatus(t, booking))
	}
	s.sim.SetWebhookURL("") // the provider's retries wait until the test lets them go

	if err := syscall.Kill(coreA.Core.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozeAt := time.Now() // the insert goes on, then the transaction waits on the frozen core

	// Fan Y asks for the same seats through core B, from the freeze on,
	// until it has them or 3 s after the thaw. Core A stays frozen until a
	// second after the hold ran out: past its idle-transaction timeout (1 s)
	// and the hold's expiry, and short of its requests' 5 s deadline, after
	// which a thawed core sends nothing more of the request.
	viaB := *s.proofStack
	viaB.coreURL = coreB.CoreURL
	r := frozenResult{booking: booking, otherFanAnswers: map[string]int{}}
	var expires time.Time
	s.db.QueryRow(ctx, `SELECT expires_at FROM holds WHERE id = $1`, hold).Scan(&expires)
	thawed := make(chan time.Time, 1)
	yDone := make(chan string, 1)
	go func() {
		var thawAt time.Time
		for {
			select {
			case thawAt = <-thawed:
			default:
			}
			if !thawAt.IsZero() && time.Since(thawAt) > 3*time.Second {
				yDone <- ""
				return
			}
			resp := viaB.call(t, "POST", fmt.Sprintf("/v1/events/%d/holds", s.event), "fan-y", map[string]any{"seats": target})
			mu.Lock()
			r.otherFanAnswers[fmt.Sprintf("%d %v", resp.status, resp.body["error"])]++
			mu.Unlock()
			if resp.status == 201 {
				yDone <- resp.body["hold_id"].(string)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	time.Sleep(time.Until(expires.Add(time.Second)))
	var n int
	s.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, backend).Scan(&n)
	r.sessionEnded = n == 0
	statusAtThaw := s.bookingStatus(t, booking)
	var expired bool
	s.db.QueryRow(ctx, `SELECT expires_at < now() FROM holds WHERE id = $1`, hold).Scan(&expired)
	thawAt := time.Now()
	if err := syscall.Kill(coreA.Core.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	thawed <- thawAt
	t.Logf("core A frozen for %v (the hold expired %v after the freeze began)", thawAt.Sub(frozeAt).Round(10*time.Millisecond),
		expires.Sub(frozeAt).Round(10*time.Millisecond))
	if yHold := <-yDone; yHold != "" {
		var at time.Time
		s.db.QueryRow(ctx, `SELECT created_at FROM holds WHERE id = $1`, yHold).Scan(&at)
		y := viaB.call(t, "POST", "/v1/holds/"+yHold+"/confirm", "fan-y", `{"payment_token":"tok_visa"}`, "Idempotency-Key", "y-"+yHold)
		r.otherFanGotSeats = at.Before(thawAt) && y.status == 200 && y.body["status"] == bookingConfirmed
		if y.status != 200 {
			t.Errorf("fan Y's confirm = %d %s", y.status, y.raw)
		}
	}

	// The thawed core finishes what it was doing: wait until none of its
	// sessions is in a transaction.
	if !waitUntil(10*time.Second, func() bool {
		var busy int
		s.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'core-a'
   AND state IN ('idle in transaction', 'idle in transaction (aborted)') OR (application_name = 'core-a' AND query LIKE '%INSERT INTO tickets%' AND state = 'active')`).Scan(&busy)
		return busy == 0
	}) {
		t.Error("core A still in a transaction 10 s after SIGCONT")
	}
	after := s.bookingStatus(t, booking)
	r.lateConfirm = statusAtThaw == bookingPending && expired && after == bookingConfirmed

	// The provider's retry of the webhook goes to core B.
	s.sim.SetWebhookURL(coreB.CoreURL + "/v1/webhooks/payments")
	s.sim.FlushWebhooks()
	if !control {
		if !waitUntil(15*time.Second, func() bool { return s.bookingStatus(t, booking) == bookingRefunded }) {
			var ds []string
			for _, d := range s.sim.Deliveries() {
				if d.State != "delivered" || d.Attempts > 1 {
					ds = append(ds, fmt.Sprintf("%+v", d))
				}
			}
			var ev []string
			rows, _ := s.db.Query(ctx, `SELECT id || ' ' || coalesce(outcome, '-') FROM payment_events WHERE booking_id = $1`, booking)
			for rows.Next() {
				var x string
				rows.Scan(&x)
				ev = append(ev, x)
			}
			rows.Close()
			t.Fatalf("booking %d is %s, not refunded; deliveries %v; events %v", booking, s.bookingStatus(t, booking), ds, ev)
		}
		if got, tot := s.refunds(bookingReference(booking)), s.totals(bookingReference(booking)); got != 1 || tot.Net() != 0 {
			t.Errorf("ledger of booking %d: %d refunds, %+v; want one refund, nothing kept", booking, got, tot)
		}
	}
	r.finalStatus = s.bookingStatus(t, booking)

	stop()
	wait()
	if twice := c.soldTwice(t, s.db, s.event); len(twice) > 0 {
		t.Errorf("seats sold twice: %v", twice)
	}
	var owners int
	s.db.QueryRow(ctx, `SELECT count(*) FROM bookings, unnest(seat_ids) AS seat WHERE event_id = $1 AND status = 'CONFIRMED' AND seat = ANY ($2)`,
		s.event, target).Scan(&owners)
	if owners != len(target) {
		t.Errorf("the %d target seats are in %d confirmed booking seats; want each exactly once", len(target), owners)
	}
	st := c.statuses()
	for k, n := range st {
		if strings.HasSuffix(k, " 500") {
			t.Errorf("%d answers %q; want none", n, k)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("crowd: %d confirmed; answers: %s; fan Y: %v; booking %d: %s at thaw, %s after, %s at the end (%v)",
		c.ackCount(), statusLine(st), r.otherFanAnswers, booking, statusAtThaw, after, r.finalStatus, time.Since(start).Round(time.Millisecond))
	for _, o := range c.odd {
		t.Logf("odd answer: %s", o)
	}
	return r
}
