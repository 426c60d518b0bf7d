package postgres_test

// The seeds' payment experiments on the booking state machine, with real
// concurrent transactions; the provider side (refunds in its ledger) is
// proven end to end in loadtest/proof.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
)

// pending holds seats for account and starts an async payment on them.
func pending(tb testing.TB, db *postgres.DB, ev int64, account string, seats ...string) (*core.Hold, *core.Booking) {
	tb.Helper()
	h, err := hold(db, ev, account, core.HoldRequest{Seats: seats})
	if err != nil {
		tb.Fatalf("hold %v: %v", seats, err)
	}
	b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: account, EventID: ev}, core.FlowAsync, core.Contact{})
	if err != nil {
		tb.Fatalf("start payment: %v", err)
	}
	if err := db.SetPaymentID(ctx, b.ID, fmt.Sprintf("pay_%d", b.ID)); err != nil {
		tb.Fatal(err)
	}
	return h, b
}

func jobs(tb testing.TB, db *postgres.DB, kind core.JobKind, booking int64) int {
	tb.Helper()
	var n int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = $1 AND booking_id = $2`, kind, booking).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestStartPayment(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "stadium", 6)
	h, b := pending(t, db, ev, "alice", "NL1-A-1", "NL1-A-2")
	if b.Status != core.BookingPending || b.AmountPaise != 2*1500000 || b.Quantity != 2 {
		t.Fatalf("booking = %+v; want PAYMENT_PENDING for 2 PLATINUM seats (30,000 rupees)", b)
	}
	got, err := db.Hold(ctx, h.ID)
	if err != nil || !got.Extended || got.ExpiresAt.Sub(h.ExpiresAt) != core.ExtendBy {
		t.Fatalf("hold after Pay = %+v, %v; want extended once by %v", got, err, core.ExtendBy)
	}
	// Pay again (a retry): the same booking, no second extension.
	again, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev}, core.FlowAsync, core.Contact{})
	if err != nil || again.ID != b.ID {
		t.Fatalf("second Pay = %+v, %v; want booking %d", again, err, b.ID)
	}
	if _, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "bob", EventID: ev}, core.FlowAsync, core.Contact{}); core.ErrorCode(err) != core.EForbidden {
		t.Fatalf("Pay by another account = %v; want forbidden", err)
	}
	// GA is priced per ticket.
	gaEv := newEvent(t, db, "amphitheatre", 6)
	gh, err := hold(db, gaEv, "carol", core.HoldRequest{Quantity: 3})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := db.StartPayment(ctx, core.HoldRef{ID: gh.ID, Account: "carol", EventID: gaEv}, core.FlowAsync, core.Contact{})
	if err != nil || gb.AmountPaise != 3*150000 {
		t.Fatalf("GA booking = %+v, %v; want 3 x 1,500 rupees", gb, err)
	}
	outcome, err := db.Settle(ctx, core.Settlement{EventID: "evt_ga", BookingID: gb.ID, PaymentID: "pay_ga", Succeeded: true})
	if err != nil || outcome != core.BookingConfirmed {
		t.Fatalf("GA settle = %s, %v", outcome, err)
	}
	full, err := db.Booking(ctx, gb.ID)
	if err != nil || len(full.Tickets) != 3 {
		t.Fatalf("GA booking tickets = %+v, %v; want 3", full, err)
	}
	// An expired hold cannot start a payment.
	h2, err := hold(db, ev, "dan", core.HoldRequest{Seats: []string{"NL1-B-1"}})
	if err != nil {
		t.Fatal(err)
	}
	setExpiry(t, db, h2.ID, 0)
	if _, err := db.StartPayment(ctx, core.HoldRef{ID: h2.ID, Account: "dan", EventID: ev}, core.FlowAsync, core.Contact{}); core.ErrorCode(err) != core.EHoldExpired {
		t.Fatalf("Pay on an expired hold = %v; want hold_expired", err)
	}
	checkInvariants(t, db)
}

// naiveSettle is the confirm without the booking row lock and without the
// event de-duplication: read the status, then act on it.
func naiveSettle(db *postgres.DB, booking int64, hold string) (core.BookingStatus, error) {
	var status core.BookingStatus
	if err := db.Pool().QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, booking).Scan(&status); err != nil {
		return "", err
	}
	if status != core.BookingPending {
		return status, nil
	}
	// Deliberate: the round trip between the read and the act, where the
	// other copy of the webhook slips in.
	time.Sleep(time.Millisecond)
	outcome := core.BookingConfirmed
	err := pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `WITH h AS (UPDATE holds SET status = 'BOOKED' WHERE id = $1 AND status = 'ACTIVE' RETURNING id)
SELECT count(*) FROM h`, hold).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			outcome = core.BookingRefundDue
			_, err := tx.Exec(ctx, `INSERT INTO outbox (kind, booking_id) VALUES ('refund', $1) ON CONFLICT DO NOTHING`, booking)
			if err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `UPDATE bookings SET status = $2 WHERE id = $1`, booking, outcome)
		return err
	})
	return outcome, err
}

// Payment experiment 1: two copies of one webhook at the same moment, 50 times.
func TestRaceDuplicateWebhook(t *testing.T) {
	const n = 50
	run := func(t *testing.T, settle func(db *postgres.DB, b *core.Booking, h *core.Hold, copy int) (core.BookingStatus, error)) (refunded, confirmed int) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", 6)
		seats := seed.MustLayout("stadium").Seats()
		for i := range n {
			h, b := pending(t, db, ev, fmt.Sprintf("fan%d", i), seats[2*i].ID, seats[2*i+1].ID)
			together(2, func(copy int) {
				if _, err := settle(db, b, h, copy); err != nil {
					t.Errorf("settle: %v", err)
				}
			})
			if jobs(t, db, "refund", b.ID) > 0 {
				refunded++
			}
			var status core.BookingStatus
			db.Pool().QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, b.ID).Scan(&status)
			if status == core.BookingConfirmed {
				confirmed++
			}
		}
		return refunded, confirmed
	}

	t.Run("control: read-then-act confirm refunds a booked payment", func(t *testing.T) {
		refunded, confirmed := run(t, func(db *postgres.DB, b *core.Booking, h *core.Hold, _ int) (core.BookingStatus, error) {
			return naiveSettle(db, b.ID, h.ID)
		})
		t.Logf("naive: %d of %d bookings confirmed, %d with a refund queued for a payment that booked", confirmed, n, refunded)
		if refunded == 0 {
			t.Fatal("the naive confirm never refunded a booked payment: the harness cannot see the bug")
		}
	})
	t.Run("product: row lock and event de-duplication", func(t *testing.T) {
		var dups atomic.Int32
		refunded, confirmed := run(t, func(db *postgres.DB, b *core.Booking, h *core.Hold, _ int) (core.BookingStatus, error) {
			out, err := db.Settle(ctx, core.Settlement{EventID: fmt.Sprintf("evt_%d", b.ID), Type: "payment.succeeded",
				PaymentID: b.PaymentID, BookingID: b.ID, Succeeded: true})
			if out == core.OutcomeDuplicate {
				dups.Add(1)
			}
			return out, err
		})
		t.Logf("%d pairs of identical webhooks: %d confirmed, %d refunds queued, %d copies recognised as duplicates", n, confirmed, refunded, dups.Load())
		if confirmed != n || refunded != 0 || dups.Load() != n {
			t.Fatalf("confirmed %d, refunds %d, duplicates %d; want %d, 0, %d", confirmed, refunded, dups.Load(), n, n)
		}
	})
}

// Payment experiment 2 (database half): a payment just after expiry while a
// new fan asks for the seat at the same moment: the fan gets the seat, the
// payer's refund is queued exactly once (the provider half, one refund in
// the ledger, is in loadtest/proof).
func TestRaceLatePaymentVersusNewFan(t *testing.T) {
	t.Run("control: a confirm without the hold id and expiry books the fan's seat", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", 6)
		seats := seed.MustLayout("stadium").Seats()
		both := 0
		for i := range 20 {
			h, b := pending(t, db, ev, fmt.Sprintf("payer%d", i), seats[i].ID)
			setExpiry(t, db, h.ID, 0)
			var fan *core.Hold
			var outcome core.BookingStatus
			together(2, func(k int) {
				if k == 0 {
					outcome, _ = unfencedConfirm(db, b)
				} else {
					fan, _ = hold(db, ev, fmt.Sprintf("fan%d", i), core.HoldRequest{Seats: []string{seats[i].ID}})
				}
			})
			if fan != nil && outcome == core.BookingConfirmed {
				both++
			}
		}
		t.Logf("unfenced confirm racing the new fan: %d of 20 seats told yes to both", both)
		if both == 0 {
			t.Fatal("never both: the harness cannot see the bug")
		}
	})
	t.Run("product", func(t *testing.T) { latePaymentRaces(t) })
}

func latePaymentRaces(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{LatePolicy: core.PolicyRefund})
	ev := newEvent(t, db, "stadium", 6)
	seats := seed.MustLayout("stadium").Seats()
	const n = 100
	for i := range n {
		seat := seats[i].ID
		h, b := pending(t, db, ev, fmt.Sprintf("payer%d", i), seat)
		setExpiry(t, db, h.ID, 0)
		var fan *core.Hold
		var outcome core.BookingStatus
		together(2, func(k int) {
			var err error
			if k == 0 {
				outcome, err = db.Settle(ctx, core.Settlement{EventID: fmt.Sprintf("evt_%d", i), PaymentID: b.PaymentID, BookingID: b.ID, Succeeded: true})
			} else {
				fan, err = hold(db, ev, fmt.Sprintf("fan%d", i), core.HoldRequest{Seats: []string{seat}})
			}
			if err != nil {
				t.Errorf("race %d side %d: %v", i, k, err)
			}
		})
		if fan == nil || outcome != core.BookingRefundDue || jobs(t, db, "refund", b.ID) != 1 {
			t.Fatalf("race %d: fan hold %v, payer %s, %d refunds queued; want the fan's hold, REFUND_DUE, 1", i, fan != nil, outcome, jobs(t, db, "refund", b.ID))
		}
	}
	checkInvariants(t, db)
}

// unfencedConfirm books a booking's seats by seat id alone, as a confirm
// that does not match the hold id would.
func unfencedConfirm(db *postgres.DB, b *core.Booking) (core.BookingStatus, error) {
	tag, err := db.Pool().Exec(ctx, `UPDATE seats SET status = 'BOOKED', booking_id = $2, hold_until = NULL
WHERE event_id = $1 AND seat_id = ANY ($3) AND status = 'HELD'`, b.EventID, b.ID, b.Seats)
	if err != nil || int(tag.RowsAffected()) != len(b.Seats) {
		return core.BookingRefundDue, err
	}
	_, err = db.Pool().Exec(ctx, `UPDATE bookings SET status = 'CONFIRMED' WHERE id = $1`, b.ID)
	return core.BookingConfirmed, err
}

// Payment experiment 3: under the honour policy, 200 races timed at expiry
// between the late payer's webhook and a new fan: never both.
func TestRaceHonourPolicy(t *testing.T) {
	t.Run("control: a confirm without the hold id books the new fan's seat", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{LatePolicy: core.PolicyHonour})
		ev := newEvent(t, db, "cinema", 6)
		both := 0
		for i := range 20 {
			seat := fmt.Sprintf("AUD-G-%d", 1+i%10)
			if i >= 10 {
				seat = fmt.Sprintf("AUD-H-%d", 1+i%10)
			}
			h, b := pending(t, db, ev, fmt.Sprintf("payer%d", i), seat)
			setExpiry(t, db, h.ID, 0)
			fan, err := hold(db, ev, fmt.Sprintf("fan%d", i), core.HoldRequest{Seats: []string{seat}})
			outcome, cerr := unfencedConfirm(db, b)
			if err == nil && cerr == nil && fan != nil && outcome == core.BookingConfirmed {
				both++
			}
		}
		t.Logf("unfenced confirm: %d of 20 seats went to both the late payer and the new fan", both)
		if both == 0 {
			t.Fatal("the unfenced confirm never gave a seat to both: the harness cannot see the bug")
		}
	})
	t.Run("product", func(t *testing.T) { honourRaces(t) })
}

func honourRaces(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{LatePolicy: core.PolicyHonour})
	ev := newEvent(t, db, "stadium", 6)
	seats := seed.MustLayout("stadium").Seats()
	const n = 200
	var payer, fan, neither int
	for i := range n {
		seat := seats[i].ID
		h, b := pending(t, db, ev, fmt.Sprintf("payer%d", i), seat)
		setExpiry(t, db, h.ID, time.Duration(rand.IntN(4000)-2000)*time.Microsecond)
		var fanHold *core.Hold
		var outcome core.BookingStatus
		together(2, func(k int) {
			if k == 0 {
				outcome, _ = db.Settle(ctx, core.Settlement{EventID: fmt.Sprintf("evt_%d", i), PaymentID: b.PaymentID, BookingID: b.ID, Succeeded: true})
				return
			}
			// Deliberate: spread the fan's hold over 2 ms around the
			// payer's webhook, so the races land on both sides of expiry.
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			fanHold, _ = hold(db, ev, fmt.Sprintf("fan%d", i), core.HoldRequest{Seats: []string{seat}})
		})
		switch {
		case outcome == core.BookingConfirmed && fanHold != nil:
			t.Fatalf("race %d: both the late payer and the new fan got seat %s", i, seat)
		case outcome == core.BookingConfirmed:
			payer++
		case fanHold != nil:
			fan++
			if outcome != core.BookingRefundDue {
				t.Fatalf("race %d: the fan got the seat and the payer's booking is %s, not REFUND_DUE", i, outcome)
			}
		default:
			neither++
		}
	}
	t.Logf("honour policy, %d races at expiry: late payer booked %d, new fan held %d, neither %d", n, payer, fan, neither)
	if neither != 0 {
		t.Errorf("%d races gave the seat to nobody", neither)
	}
	checkInvariants(t, db)
}

// Payment experiment 6: a stale webhook for H1 after the same account holds
// the same seat as H2: H2 is untouched and H1's money is refunded.
func TestStaleWebhook(t *testing.T) {
	for _, policy := range []core.LatePolicy{core.PolicyRefund, core.PolicyHonour} {
		t.Run(string(policy), func(t *testing.T) {
			db := postgrestest.NewDB(t, postgres.Options{LatePolicy: policy})
			ev := newEvent(t, db, "cinema", 6)
			h1, b1 := pending(t, db, ev, "alice", "AUD-F-5")
			setExpiry(t, db, h1.ID, 0)
			h2, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-F-5"}})
			if err != nil {
				t.Fatal(err)
			}
			outcome, err := db.Settle(ctx, core.Settlement{EventID: "evt_stale", PaymentID: b1.PaymentID, BookingID: b1.ID, Succeeded: true})
			if err != nil || outcome != core.BookingRefundDue {
				t.Fatalf("stale webhook for H1 = %s, %v; want REFUND_DUE", outcome, err)
			}
			got, err := db.Hold(ctx, h2.ID)
			if err != nil || got.Status != core.HoldActive || got.Version != h2.Version {
				t.Fatalf("H2 after H1's webhook = %+v, %v; want untouched", got, err)
			}
			var status, owner string
			db.Pool().QueryRow(ctx, `SELECT status, hold_id::text FROM seats WHERE event_id = $1 AND seat_id = 'AUD-F-5'`, ev).Scan(&status, &owner)
			if status != "HELD" || owner != h2.ID || jobs(t, db, "refund", b1.ID) != 1 {
				t.Fatalf("seat %s by %s, %d refunds queued; want HELD by H2 and one refund", status, owner, jobs(t, db, "refund", b1.ID))
			}
			checkInvariants(t, db)
		})
	}
}

// Money that arrives for a booking already FAILED is refunded, not kept.
func TestSuccessAfterFailure(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	_, b := pending(t, db, ev, "alice", "AUD-J-9")
	if out, err := db.Settle(ctx, core.Settlement{EventID: "evt_fail", BookingID: b.ID, PaymentID: b.PaymentID}); err != nil || out != core.BookingFailed {
		t.Fatalf("failure = %s, %v", out, err)
	}
	out, err := db.Settle(ctx, core.Settlement{EventID: "evt_late_ok", BookingID: b.ID, PaymentID: b.PaymentID, Succeeded: true})
	if err != nil || out != core.BookingRefundDue || jobs(t, db, "refund", b.ID) != 1 {
		t.Fatalf("success after failure = %s, %v, %d refunds; want REFUND_DUE with one refund", out, err, jobs(t, db, "refund", b.ID))
	}
	checkInvariants(t, db)
}

// Seats are booked and tickets issued only under a booking that becomes
// CONFIRMED in the same transaction. The booking's row lock makes the
// confirm after a successful book certain today; a trigger that silently
// skips the confirm stands in for any future way to lose it, and the
// approval must then commit nothing rather than BOOKED seats and tickets
// under a PAYMENT_PENDING booking.
func TestSettleBooksOnlyWhenConfirmed(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, b := pending(t, db, ev, "alice", "AUD-K-2")
	if _, err := db.Pool().Exec(ctx, `
CREATE FUNCTION skip_confirm() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status::text = 'CONFIRMED' AND OLD.status::text <> 'CONFIRMED' THEN RETURN NULL; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER skip_confirm BEFORE UPDATE ON bookings FOR EACH ROW EXECUTE FUNCTION skip_confirm();`); err != nil {
		t.Fatal(err)
	}
	out, err := db.Settle(ctx, core.Settlement{EventID: "evt_lost_confirm", BookingID: b.ID, PaymentID: b.PaymentID, Succeeded: true})
	if err == nil {
		t.Errorf("Settle with the confirm skipped = %s, nil; want an error", out)
	}
	var seat string
	var tickets int
	db.Pool().QueryRow(ctx, `SELECT status FROM seats WHERE event_id = $1 AND seat_id = 'AUD-K-2'`, ev).Scan(&seat)
	db.Pool().QueryRow(ctx, `SELECT count(*) FROM tickets WHERE booking_id = $1`, b.ID).Scan(&tickets)
	got, _ := db.Booking(ctx, b.ID)
	if seat != "HELD" || tickets != 0 || got == nil || got.Status != core.BookingPending {
		t.Fatalf("after the lost confirm: seat %s, %d tickets, booking %+v; want HELD by %s, none, PAYMENT_PENDING", seat, tickets, got, h.ID)
	}
}

// Money that reaches a FAILED card booking whose authorization was voided
// already (its capture was refused) is given back by a void of its own: the
// first void, DONE, does not swallow it.
func TestLateMoneyAfterRefusedCapture(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, err := hold(db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-K-3"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "alice", EventID: ev}, core.FlowSync, core.Contact{})
	if err != nil {
		t.Fatal(err)
	}
	pay := fmt.Sprintf("pay_%d", b.ID)
	if out, err := db.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: pay, Type: "authorize", Succeeded: true}); err != nil || out != core.BookingConfirmed {
		t.Fatalf("authorize = %s, %v; want CONFIRMED", out, err)
	}
	if err := db.FailCapture(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	claimed, err := db.ClaimJobs(ctx, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range claimed { // the capture (refused) and the void of the authorization
		if err := db.FinishJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := db.Booking(ctx, b.ID); got.Status != core.BookingFailed || jobs(t, db, core.JobVoid, b.ID) != 1 {
		t.Fatalf("after the refused capture: %s with %d voids; want FAILED with its void done", got.Status, jobs(t, db, core.JobVoid, b.ID))
	}
	out, err := db.Settle(ctx, core.Settlement{EventID: "evt_late_capture", BookingID: b.ID, PaymentID: pay, Succeeded: true})
	if err != nil || out != core.BookingRefundDue {
		t.Fatalf("money after the refused capture = %s, %v; want REFUND_DUE", out, err)
	}
	pending, err := db.ClaimJobs(ctx, 10, time.Minute)
	if err != nil || len(pending) != 1 || pending[0].Kind != core.JobVoid || pending[0].Round != 2 {
		t.Fatalf("jobs due after the late money: %+v, %v; want one void, round 2", pending, err)
	}
	if err := db.FinishJob(ctx, pending[0]); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Booking(ctx, b.ID); got.Status != core.BookingRefunded {
		t.Fatalf("after the second void: %s; want REFUNDED", got.Status)
	}
	checkInvariants(t, db)
}

// Money that reaches a FAILED booking after the fan started a new booking
// on the same hold moves the FAILED one to REFUND_DUE beside the new one
// (which stays as it was and still answers a retried Pay), instead of
// breaking the one-live-booking-per-hold index and failing the webhook
// forever.
func TestLateMoneyBesideNewBooking(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	h, b1 := pending(t, db, ev, "alice", "AUD-K-4")
	if out, err := db.Settle(ctx, core.Settlement{EventID: "evt_fail", BookingID: b1.ID, PaymentID: b1.PaymentID}); err != nil || out != core.BookingFailed {
		t.Fatalf("failure = %s, %v", out, err)
	}
	ref := core.HoldRef{ID: h.ID, Account: "alice", EventID: ev}
	b2, err := db.StartPayment(ctx, ref, core.FlowAsync, core.Contact{})
	if err != nil || b2.ID == b1.ID || b2.Status != core.BookingPending {
		t.Fatalf("second payment = %+v, %v; want a new PAYMENT_PENDING booking", b2, err)
	}
	out, err := db.Settle(ctx, core.Settlement{EventID: "evt_late_ok", BookingID: b1.ID, PaymentID: b1.PaymentID, Succeeded: true})
	if err != nil || out != core.BookingRefundDue || jobs(t, db, core.JobRefund, b1.ID) != 1 {
		t.Fatalf("money for the failed booking = %s, %v, %d refunds; want REFUND_DUE with one refund", out, err, jobs(t, db, core.JobRefund, b1.ID))
	}
	again, err := db.StartPayment(ctx, ref, core.FlowAsync, core.Contact{})
	if err != nil || again.ID != b2.ID || again.Status != core.BookingPending {
		t.Fatalf("retried Pay = %+v, %v; want the live booking %d", again, err, b2.ID)
	}
	checkInvariants(t, db)
}

func TestOutboxRetries(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "cinema", 6)
	_, b := pending(t, db, ev, "alice", "AUD-K-1")
	if out, err := db.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: b.PaymentID, Succeeded: true}); err != nil || out != core.BookingConfirmed {
		t.Fatalf("settle = %s, %v", out, err)
	}
	jobs, err := db.ClaimJobs(ctx, 10, time.Minute)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %v, %v; want the email and SMS jobs", jobs, err)
	}
	if again, _ := db.ClaimJobs(ctx, 10, time.Minute); len(again) != 0 {
		t.Fatalf("leased jobs claimed twice: %v", again)
	}
	j := jobs[0]
	if err := db.FailJob(ctx, j, fmt.Errorf("smtp down")); err != nil {
		t.Fatal(err)
	}
	var next time.Time
	var status, lastErr string
	db.Pool().QueryRow(ctx, `SELECT next_attempt_at, status, last_error FROM outbox WHERE id = $1`, j.ID).Scan(&next, &status, &lastErr)
	if d := time.Until(next); d < 0 || d > 2*time.Second || status != "PENDING" || lastErr != "smtp down" {
		t.Fatalf("after one failure: retry in %v, %s, %q; want about 1 s, PENDING", d, status, lastErr)
	}
	j.Attempts = core.MaxJobAttempts
	db.Pool().Exec(ctx, `UPDATE outbox SET attempts = $2 WHERE id = $1`, j.ID, core.MaxJobAttempts)
	if err := db.FailJob(ctx, j, fmt.Errorf("still down")); err != nil {
		t.Fatal(err)
	}
	db.Pool().QueryRow(ctx, `SELECT status FROM outbox WHERE id = $1`, j.ID).Scan(&status)
	if status != "DEAD" {
		t.Fatalf("after %d attempts: %s; want DEAD", core.MaxJobAttempts, status)
	}
	if err := db.FinishJob(ctx, jobs[1]); err != nil {
		t.Fatal(err)
	}
	db.Pool().QueryRow(ctx, `SELECT status FROM outbox WHERE id = $1`, jobs[1].ID).Scan(&status)
	if status != "DONE" {
		t.Fatalf("finished job is %s", status)
	}
}

func TestIdempotencyKeyRetention(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	fp := []byte("fingerprint")
	fence, r, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute)
	if r != nil || err != nil {
		t.Fatalf("first claim = %v, %v", r, err)
	}
	if err := db.SaveResponse(ctx, "alice", "k", fence, core.StoredResponse{Status: 201, Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, r, err := db.ClaimKey(ctx, "bob", "k", []byte("other"), time.Minute); r != nil || err != nil {
		t.Fatalf("the same key of another account = %v, %v; keys are per account", r, err)
	}
	if _, r, err := db.ClaimKey(ctx, "alice", "k", fp, time.Minute); err != nil || r == nil || r.Status != 201 {
		t.Fatalf("replay = %+v, %v", r, err)
	}
	// Past retention the key is purged, and may then be used afresh.
	db.Pool().Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE account = 'alice'`)
	if n, err := db.PurgeKeys(ctx); err != nil || n != 1 {
		t.Fatalf("purge = %d, %v; want 1", n, err)
	}
	if _, r, err := db.ClaimKey(ctx, "alice", "k", []byte("new request"), time.Minute); r != nil || err != nil {
		t.Fatalf("claim after purge = %v, %v; want a fresh claim", r, err)
	}
	// A request that died holding its key frees it when the lease runs out.
	db.Pool().Exec(ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE account = 'alice'`)
	if _, r, err := db.ClaimKey(ctx, "alice", "k", []byte("new request"), time.Minute); r != nil || err != nil {
		t.Fatalf("retry after a dead request = %v, %v; want the key handed over", r, err)
	}
	if _, _, err := db.ClaimKey(ctx, "alice", "k", []byte("new request"), time.Minute); core.ErrorCode(err) != core.EIdemInFlight {
		t.Fatalf("claim while leased = %v; want request_in_flight", err)
	}
}

// checkValuesSQL reads the values a CHECK (column IN (...)) constraint
// allows. $1 table, $2 column.
const checkValuesSQL = `
SELECT coalesce(array_agg(m[1] ORDER BY m[1]), '{}')
  FROM pg_constraint c, regexp_matches(pg_get_constraintdef(c.oid), '''([^'']*)''::text', 'g') AS m
 WHERE c.conrelid = $1::regclass AND c.contype = 'c' AND pg_get_constraintdef(c.oid) LIKE '%(' || $2 || ' = ANY%'`

// The schema's CHECK constraints and the Go vocabulary of the payment state
// machine name the same values: SQL composed from the Go constants cannot
// write a value the table refuses, nor miss one it allows.
func TestPaymentVocabularyMatchesSchema(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	strs := func(vs ...string) []string { slices.Sort(vs); return vs }
	var statuses, flows, kinds, jobStatuses []string
	for _, s := range core.BookingStatuses {
		statuses = append(statuses, string(s))
	}
	for _, f := range core.Flows {
		flows = append(flows, string(f))
	}
	for _, k := range core.JobKinds {
		kinds = append(kinds, string(k))
	}
	jobStatuses = []string{string(core.JobPending), string(core.JobDone), string(core.JobDead)}
	for _, tc := range []struct {
		table, column string
		want          []string
	}{
		{"bookings", "status", strs(statuses...)},
		{"bookings", "flow", strs(flows...)},
		{"outbox", "kind", strs(kinds...)},
		{"outbox", "status", strs(jobStatuses...)},
	} {
		var got []string
		if err := db.Pool().QueryRow(ctx, checkValuesSQL, tc.table, tc.column).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("CHECK on %s.%s allows %v; the Go constants are %v", tc.table, tc.column, got, tc.want)
		}
	}
}
