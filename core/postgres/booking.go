package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// SQL literals of the payment vocabulary. The statements of this file and
// of outbox.go are composed from them, never from a bare 'CONFIRMED', so the
// SQL and the Go constants cannot drift apart. They stay literals (composed
// at compile time), not parameters, where the planner must see the value:
// bookings_live_hold and bookings_pending are partial indexes, matched only
// against literal predicates, and an ON CONFLICT ... WHERE must imply
// bookings_live_hold's predicate to pick it as the arbiter. A status that
// core.Transition decides is passed as a parameter instead.
const (
	sqlPending    = "'" + string(core.BookingPending) + "'"
	sqlConfirmed  = "'" + string(core.BookingConfirmed) + "'"
	sqlFailed     = "'" + string(core.BookingFailed) + "'"
	sqlFlowSync   = "'" + string(core.FlowSync) + "'"
	sqlHoldActive = "'" + core.HoldActive + "'"
	sqlHoldBooked = "'" + core.HoldBooked + "'"
	sqlHoldFreed  = "'" + core.HoldReleased + "'"
	sqlJobPending = "'" + string(core.JobPending) + "'"
	sqlJobDone    = "'" + string(core.JobDone) + "'"
	sqlJobDead    = "'" + string(core.JobDead) + "'"
)

// sqlLive is bookings_live_hold's predicate: the bookings that hold or own
// their hold's seats. A FAILED booking is not live, nor is one giving money
// back (REFUND_DUE, REFUNDED): a FAILED booking that money reached after a
// new booking of its hold was made must be able to move to REFUND_DUE
// beside it.
const sqlLive = "status IN (" + sqlPending + ", " + sqlConfirmed + ")"

// createBookingSQL creates the booking of a valid hold, priced from the
// event's bands: the sum of its seats' bands, or the GA band times the
// quantity. A hold has at most one live (PAYMENT_PENDING or CONFIRMED)
// booking: the conflict clause names bookings_live_hold's predicate (see
// sqlLive). $1 hold, $2 flow, $3 email, $4 phone.
const createBookingSQL = `
INSERT INTO bookings (hold_id, event_id, account, seat_ids, quantity, amount_paise, flow, email, phone)
SELECT h.id, h.event_id, h.account, h.seat_ids, h.quantity,
       CASE WHEN cardinality(h.seat_ids) > 0
            THEN (SELECT sum(b.price_paise) FROM seats s JOIN price_bands b ON b.event_id = s.event_id AND b.code = s.band
                   WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids))
            ELSE (SELECT b.price_paise * h.quantity FROM ga_inventory g JOIN price_bands b ON b.event_id = g.event_id AND b.code = g.band
                   WHERE g.event_id = h.event_id)
       END,
       $2, nullif($3, ''), nullif($4, '')
  FROM holds h
 WHERE h.id = $1 AND h.status = ` + sqlHoldActive + ` AND h.expires_at > now() AND ` + showGoesAhead + `
ON CONFLICT (hold_id) WHERE ` + sqlLive + ` DO NOTHING
RETURNING id`

// showGoesAhead is true of a hold h whose show is not cancelled: no
// payment starts, and no seats are booked, for a cancelled show, whatever
// a core's cache of the show says. The status is read from the row (no
// lock: the event row stays cold); a booking that read it just before a
// cancellation committed is found by the cancellation's own statement or,
// failing that, by the sweeper's backstop (Stragglers).
const showGoesAhead = `NOT EXISTS (SELECT 1 FROM events e WHERE e.id = h.event_id AND e.status = 'cancelled')`

// bookingColumns is what scanBooking reads. The attempt is the booking's
// rank among its hold's bookings: a new one follows a FAILED payment. The
// show (event and venue) comes along, as ev: what a ticket page shows.
const bookingColumns = `SELECT id, hold_id::text, event_id, account, seat_ids, quantity, amount_paise, currency, flow, status,
       coalesce(payment_id, ''), coalesce(email, ''), coalesce(phone, ''), created_at, captured_at IS NOT NULL,
       (SELECT count(*) FROM bookings x WHERE x.hold_id = bookings.hold_id AND x.id <= bookings.id)::int,
       coalesce(ev.ev_name, ''), coalesce(ev.ev_kind, ''), ev.ev_starts_at, coalesce(ev.venue_id, 0), coalesce(ev.venue_name, ''),
       coalesce(ev.venue_city, ''), coalesce(ev.venue_tz, ''), coalesce(ev.ev_status, ''), coalesce(ev.ev_reason, '')
  FROM bookings LEFT JOIN LATERAL (
       SELECT e.name AS ev_name, e.kind AS ev_kind, e.starts_at AS ev_starts_at, v.id AS venue_id, v.name AS venue_name,
              v.city AS venue_city, v.timezone AS venue_tz, e.status AS ev_status, e.cancel_reason AS ev_reason
         FROM events e JOIN venues v ON v.id = e.venue_id WHERE e.id = bookings.event_id) ev ON true`

// bookingByIDSQL reads one booking (scanBooking).
const bookingByIDSQL = bookingColumns + ` WHERE id = $1`

// liveBookingSQL reads the booking a retried Pay is answered from
// (scanBooking): the hold's live booking if it has one, else its newest
// booking past payment (REFUND_DUE, REFUNDED), never a FAILED one. A
// FAILED booking that money reached late may sit beside a newer live
// booking; the live one answers. $1 hold.
const liveBookingSQL = bookingColumns + ` WHERE hold_id = $1 AND status <> ` + sqlFailed + `
 ORDER BY ` + sqlLive + ` DESC, id DESC LIMIT 1`

func scanBooking(row pgx.Row) (*core.Booking, error) {
	var b core.Booking
	var ev core.BookingEvent
	var starts *time.Time
	err := row.Scan(&b.ID, &b.HoldID, &b.EventID, &b.Account, &b.Seats, &b.Quantity, &b.AmountPaise, &b.Currency, &b.Flow,
		&b.Status, &b.PaymentID, &b.Email, &b.Phone, &b.CreatedAt, &b.Captured, &b.Attempt,
		&ev.Name, &ev.Kind, &starts, &ev.Venue.ID, &ev.Venue.Name, &ev.Venue.City, &ev.Venue.Timezone, &ev.Status, &ev.CancelReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no such booking")
	}
	if err != nil {
		return nil, translate(err)
	}
	if starts != nil {
		ev.ID, ev.StartsAt = b.EventID, *starts
		b.Event = &ev
	}
	return &b, nil
}

// lockHoldSQL locks the hold a payment starts on, so that a sweep or a
// release cannot slip in between reading it and extending it. $1 hold.
const lockHoldSQL = `SELECT status, version, extended, expires_at > now() FROM holds WHERE id = $1 FOR UPDATE`

// StartPayment creates the booking of a valid hold, or returns the live
// booking it has in whatever status, so a retry is answered from what
// happened; it extends the hold once (the Pay step) in the same
// transaction. The hold row is locked first, so a sweep or release cannot
// slip in between. Fails with EHoldExpired, EHoldNotActive,
// EPaymentInProgress (a payment of the other flow is under way),
// EForbidden, EWrongEvent or ENotFound.
func (db *DB) StartPayment(ctx context.Context, ref core.HoldRef, flow core.Flow, c core.Contact) (*core.Booking, error) {
	if _, err := db.ownedHold(ctx, ref); err != nil && core.ErrorCode(err) != core.EHoldNotActive {
		return nil, err
	}
	var b *core.Booking
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		b = nil // inTx may run fn again: nothing from an aborted try
		var status string
		var version int64
		var extended, valid bool
		if err := tx.QueryRow(ctx, lockHoldSQL, ref.ID).Scan(&status, &version, &extended, &valid); err != nil {
			return err
		}
		live := status == core.HoldActive && valid
		if existing, err := scanBooking(tx.QueryRow(ctx, liveBookingSQL, ref.ID)); err == nil {
			switch {
			case existing.Status == core.BookingPending && existing.Flow != flow:
				return core.Errorf(core.EPaymentInProgress, "a %s payment is already in progress for this hold", existing.Flow).
					With("booking_id", existing.ID)
			case existing.Status == core.BookingPending && existing.PaymentID == "" && !live:
				// No payment reached the provider and the hold is gone:
				// starting one now could only end in a refund.
				return core.Errorf(core.EHoldExpired, "hold %s is no longer valid", ref.ID)
			}
			b = existing // a retried Pay: the same booking, no second extension
			return nil
		}
		switch {
		case status != core.HoldActive:
			return core.Errorf(core.EHoldNotActive, "hold %s is %s", ref.ID, status).With("hold_status", status)
		case !valid:
			return core.Errorf(core.EHoldExpired, "hold %s has expired", ref.ID)
		}
		var id int64
		err := tx.QueryRow(ctx, createBookingSQL, ref.ID, flow, c.Email, c.Phone).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			// The hold is valid (checked above under its lock): its show
			// was cancelled (showGoesAhead), after a core's cache let the
			// hold be taken.
			return core.Errorf(core.ENotOnSale, "the show was cancelled: no payment is taken").With("show_status", core.ShowCancelled)
		}
		if err != nil {
			return fmt.Errorf("create booking: %w", err)
		}
		if !extended {
			var want, got int
			err := tx.QueryRow(ctx, extendSQL, ref.ID, version, db.extend.Seconds()).Scan(new(int64), new(any), &want, &got)
			switch {
			case errors.Is(err, pgx.ErrNoRows) || (err == nil && want != got):
				return core.Errorf(core.EHoldExpired, "hold %s could not be extended: no longer valid", ref.ID)
			case err != nil:
				// The connection died or the server ended the transaction
				// (a failover, a stalled core): unavailable, not expired.
				return fmt.Errorf("extend hold: %w", err)
			}
		}
		b, err = scanBooking(tx.QueryRow(ctx, bookingByIDSQL, id))
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	return b, nil
}

// setPaymentIDSQL records the provider's payment id, once: a retry that
// created no new payment cannot overwrite the first. $1 booking, $2 id.
const setPaymentIDSQL = `UPDATE bookings SET payment_id = $2, updated_at = now() WHERE id = $1 AND payment_id IS NULL`

// parkedFailureSQL finds a failure of payment $2 that Settle parked for
// booking $1 before its payment id was recorded (core.OutcomeFailureParked).
// The outcome is a literal: the planner matches payment_events_parked's
// predicate only against one.
const parkedFailureSQL = `SELECT id FROM payment_events
 WHERE booking_id = $1 AND payment_id = $2 AND outcome = '` + core.OutcomeFailureParked + `' ORDER BY id LIMIT 1`

// SetPaymentID records the provider's payment id on a booking (once). A
// failure of that payment that arrived before it was recorded (parked by
// Settle) is applied now, in the same transaction: the booking's own
// payment failed, so a pending booking is declined.
func (db *DB) SetPaymentID(ctx context.Context, booking int64, paymentID string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, setPaymentIDSQL, booking, paymentID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		var event string
		err = tx.QueryRow(ctx, parkedFailureSQL, booking, paymentID).Scan(&event)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		b, err := scanLocked(tx.QueryRow(ctx, lockSettledSQL, booking, paymentID))
		if err != nil {
			return err
		}
		result, _, err := advance(ctx, tx, b, core.OutcomeDeclined, paymentID)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, eventOutcomeSQL, event, string(result), booking)
		return err
	})
	return translate(err)
}

// ticketsSQL lists a booking's tickets in order. $1 booking.
const ticketsSQL = `SELECT id::text, event_id, coalesce(seat_id, ''), n FROM tickets WHERE booking_id = $1 ORDER BY n`

// Booking returns a booking with its tickets (payloads unsigned).
func (db *DB) Booking(ctx context.Context, id int64) (*core.Booking, error) {
	b, err := scanBooking(db.pool.QueryRow(ctx, bookingByIDSQL, id))
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, ticketsSQL, id)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t core.Ticket
		if err := rows.Scan(&t.ID, &t.EventID, &t.Seat, &t.N); err != nil {
			return nil, translate(err)
		}
		b.Tickets = append(b.Tickets, t)
	}
	return b, translate(rows.Err())
}

// lockedColumns is what scanLocked reads of a booking whose row the
// statement locks: what a transition and its compensation need.
const lockedColumns = `SELECT id, hold_id::text, event_id, account, seat_ids, quantity, flow, status,
       amount_paise, currency, coalesce(payment_id, '') FROM bookings`

func scanLocked(row pgx.Row) (*core.Booking, error) {
	var b core.Booking
	if err := row.Scan(&b.ID, &b.HoldID, &b.EventID, &b.Account, &b.Seats, &b.Quantity, &b.Flow, &b.Status,
		&b.AmountPaise, &b.Currency, &b.PaymentID); err != nil {
		return nil, err
	}
	return &b, nil
}

// lockSettledSQL locks the booking a provider outcome is for, by booking id
// or (a webhook without our reference) by payment id, so two deliveries of
// one webhook run one after the other and the second sees the first's
// result (scanLocked). $1 booking (0: by payment), $2 payment id.
const lockSettledSQL = lockedColumns + `
 WHERE id = $1 OR (payment_id = nullif($2, '') AND $1 = 0) ORDER BY id LIMIT 1 FOR UPDATE`

// recordEventSQL de-duplicates provider events: the event id is the key,
// inserted in the transaction that applies the event, so an event applied
// once is recognised forever. $1 event, $2 type, $3 payment, $4 booking.
const recordEventSQL = `INSERT INTO payment_events (id, type, payment_id, booking_id) VALUES ($1, $2, nullif($3, ''), nullif($4, 0))
ON CONFLICT (id) DO NOTHING`

// eventOutcomeSQL records what an event did, for the record. $1 event,
// $2 outcome, $3 booking.
const eventOutcomeSQL = `UPDATE payment_events SET outcome = $2, booking_id = coalesce(booking_id, nullif($3, 0)) WHERE id = $1`

// bookSQL books exactly the seats of one hold for a booking: the hold must
// still be ACTIVE (and, under the refund policy, unexpired), and each seat
// must still be HELD under this hold id (and unexpired). It reports the
// holds matched, the seats booked and the seats the hold lists, so the caller
// books all or nothing. $1 hold, $2 booking, $3 true for the honour policy.
const bookSQL = `
WITH h AS (
    UPDATE holds h SET status = ` + sqlHoldBooked + `, version = version + 1, ended_at = now()
     WHERE id = $1 AND status = ` + sqlHoldActive + ` AND ($3 OR expires_at > now()) AND ` + showGoesAhead + `
    RETURNING id, event_id, seat_ids
), s AS (
    UPDATE seats s SET status = 'BOOKED', booking_id = $2, hold_until = NULL, version = s.version + 1
      FROM h
     WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids) AND s.hold_id = h.id
       AND s.status = 'HELD' AND ($3 OR s.hold_until > now())
    RETURNING s.seat_id
)
SELECT (SELECT count(*) FROM h), (SELECT count(*) FROM s), coalesce((SELECT cardinality(seat_ids) FROM h), 0)`

// issueTicketsSQL issues one ticket per booked seat, or per GA ticket (no
// seat), numbered from 1. $1 booking, $2 event, $3 seats, $4 quantity.
const issueTicketsSQL = `
INSERT INTO tickets (booking_id, event_id, seat_id, n)
SELECT $1, $2, nullif(u.seat, ''), u.n
  FROM unnest(CASE WHEN cardinality($3::text[]) > 0 THEN $3::text[] ELSE array_fill(''::text, ARRAY[$4::int]) END)
       WITH ORDINALITY AS u (seat, n)`

// advanceSQL writes the step core.Transition decided: a compare-and-set on
// the status it was decided from (the caller holds the row lock; the guard
// turns a decision taken on a stale read into no change), and on the money
// being uncaptured when the step captures it (captured once). confirmed_at
// is set on entering CONFIRMED and cleared on leaving it. $1 booking,
// $2 from, $3 next, $4 payment id (empty: kept), $5 captured by this step.
const advanceSQL = `
UPDATE bookings SET status = $3, payment_id = coalesce(payment_id, nullif($4, '')), updated_at = now(),
       confirmed_at = CASE WHEN $3 = ` + sqlConfirmed + ` THEN coalesce(confirmed_at, now()) END,
       captured_at = CASE WHEN $5 THEN now() ELSE captured_at END
 WHERE id = $1 AND status = $2 AND (NOT $5 OR captured_at IS NULL)`

// enqueueSQL queues a step's jobs. A job of the kind still pending for the
// booking stays as it is (at most one pending per kind and booking:
// outbox_one_pending); a kind whose earlier job is finished gets a new
// round, so the void of money that reached a FAILED booking is not lost
// to the void that released its authorization. The booking row is locked
// by the caller, so no two enqueues of one booking race. $1 booking,
// $2 kinds.
const enqueueSQL = `
INSERT INTO outbox (kind, booking_id, round)
SELECT k.kind, $1, coalesce(max(o.round), 0) + 1
  FROM unnest($2::text[]) AS k(kind)
  LEFT JOIN outbox o ON o.kind = k.kind AND o.booking_id = $1
 GROUP BY k.kind
HAVING NOT coalesce(bool_or(o.status = ` + sqlJobPending + `), false)
ON CONFLICT DO NOTHING`

// advance applies outcome o to booking b (locked by the caller, b.Status as
// read under the lock): core.Transition decides the step, advanceSQL writes
// it, enqueueSQL queues its jobs. It returns the booking's status after,
// and whether it moved.
func advance(ctx context.Context, tx pgx.Tx, b *core.Booking, o core.Outcome, paymentID string) (core.BookingStatus, bool, error) {
	step, ok := core.Transition(b.Status, b.Flow, o)
	if !ok {
		return b.Status, false, nil
	}
	tag, err := tx.Exec(ctx, advanceSQL, b.ID, b.Status, step.Next, paymentID, step.Captured)
	if err != nil {
		return "", false, err
	}
	if tag.RowsAffected() == 0 {
		return b.Status, false, nil
	}
	if len(step.Jobs) > 0 {
		kinds := make([]string, len(step.Jobs))
		for i, k := range step.Jobs {
			kinds[i] = string(k)
		}
		if _, err := tx.Exec(ctx, enqueueSQL, b.ID, kinds); err != nil {
			return "", false, fmt.Errorf("queue %v: %w", step.Jobs, err)
		}
	}
	return step.Next, true, nil
}

// Settle applies a provider's outcome to its booking exactly once. See
// core.Bookings. The booking row is locked first, so two deliveries of one
// webhook run one after the other and the second sees the first's result;
// the seats are booked in a savepoint that is undone when any seat is no
// longer the hold's; the refund (or the void of an authorization) is queued
// in the outbox in the same transaction, and carried out after commit.
// A deadlock or serialization failure (the seats' locks met a new fan's
// hold) is retried; one that persists is EUnavailable (the provider
// retries its webhook).
func (db *DB) Settle(ctx context.Context, s core.Settlement) (core.BookingStatus, error) {
	var result core.BookingStatus
	// inTx retries a deadlock or serialization failure with back-off; one
	// that persists past its attempts is answered EUnavailable below.
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		result, err = db.settle(ctx, tx, s)
		return err
	})
	if st := sqlState(err); st == "40P01" || st == "40001" {
		return "", core.Errorf(core.EUnavailable, "could not settle booking %d now: retry", s.BookingID)
	}
	if err != nil {
		return "", translate(err)
	}
	return result, nil
}

func (db *DB) settle(ctx context.Context, tx pgx.Tx, s core.Settlement) (core.BookingStatus, error) {
	if s.EventID != "" {
		tag, err := tx.Exec(ctx, recordEventSQL, s.EventID, s.Type, s.PaymentID, s.BookingID)
		if err != nil {
			return "", err
		}
		if tag.RowsAffected() == 0 {
			return core.OutcomeDuplicate, nil
		}
	}
	var result core.BookingStatus
	var bookingID int64
	b, err := scanLocked(tx.QueryRow(ctx, lockSettledSQL, s.BookingID, s.PaymentID))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		result = core.OutcomeUnknownOrder
	case err != nil:
		return "", err
	default:
		bookingID = b.ID
		if !s.Succeeded && s.PaymentID != "" && s.PaymentID != b.PaymentID {
			// A failure says nothing of the booking's own payment, which
			// may still succeed: declining on it would put the seats of a
			// fan who paid back on sale (core.Settlement).
			result = core.OutcomeOtherPayment
			if b.PaymentID == "" {
				result = core.OutcomeFailureParked // SetPaymentID applies it, if it is the booking's
			}
			db.log.Info("payment failure that is not the booking's payment: booking left as it is",
				"booking", b.ID, "payment", s.PaymentID, "booking_payment", b.PaymentID, "outcome", result)
			break
		}
		if s.Succeeded {
			if why := strayMoney(b, s); why != "" {
				if b.Status != core.BookingPending && b.PaymentID == s.PaymentID {
					// The booking's own payment, settled already, now
					// told with another amount or currency: the provider
					// contradicts itself. Refunding it would leave a
					// confirmed booking with valid tickets and no money;
					// an operator sorts it out with the provider.
					db.log.Error("PAYMENT PROVIDER CONTRADICTS ITSELF: a settled booking's own payment re-reported with another amount or currency; nothing refunded or changed, needs an operator",
						"booking", b.ID, "status", b.Status, "payment", s.PaymentID, "reason", why)
					result = core.OutcomeOwnPaymentMismatch
					break
				}
				if result, err = db.refundStray(ctx, tx, b, s, why); err != nil {
					return "", err
				}
				break
			}
		}
		o := core.OutcomeDeclined
		booked := false
		if s.Succeeded {
			o = core.OutcomeApproved
			// Approval confirms only with the hold's seats booked under
			// this booking: when that fails, the money came late.
			if step, ok := core.Transition(b.Status, b.Flow, o); ok && step.Next == core.BookingConfirmed {
				if booked, err = db.bookSeats(ctx, tx, b); err != nil {
					return "", err
				}
				if !booked {
					o = core.OutcomeLate
					var cancelled bool
					if err := tx.QueryRow(ctx, showCancelledSQL, b.EventID).Scan(&cancelled); err != nil {
						return "", err
					}
					if cancelled {
						o = core.OutcomeCancelled
					}
				}
			}
		}
		// A refused transition is a repeat or a late event: the booking
		// is settled already, and its status is the answer.
		var moved bool
		if result, moved, err = advance(ctx, tx, b, o, s.PaymentID); err != nil {
			return "", err
		}
		if booked && !moved {
			// Seats booked and tickets issued under a booking that did not
			// become CONFIRMED would be sold without a confirmed sale. The
			// row lock makes it impossible today; should it happen, undo
			// everything rather than commit it (inTx rolls back).
			return "", fmt.Errorf("booking %d: seats booked but the booking stayed %s", b.ID, b.Status)
		}
	}
	if s.EventID != "" {
		if _, err := tx.Exec(ctx, eventOutcomeSQL, s.EventID, string(result), bookingID); err != nil {
			return "", err
		}
	}
	return result, nil
}

// showCancelledSQL says whether show $1 is cancelled: money that came too
// late for it is given back with the show's cancellation messages.
const showCancelledSQL = `SELECT status = 'cancelled' FROM events WHERE id = $1`

// strayMoney says why the money of a successful settlement is not the
// booking's to keep (see core.Settlement), or "" when it is: its payment is
// the booking's (or the booking has recorded none yet: the payment's id is
// recorded after the provider answers, and its webhook may come first), of
// the booking's amount in its currency.
func strayMoney(b *core.Booking, s core.Settlement) string {
	switch {
	case s.PaymentID == "":
		return "" // nothing to refund by; no caller settles success without one
	case b.PaymentID != "" && s.PaymentID != b.PaymentID:
		return "payment " + s.PaymentID + " is not the booking's payment " + b.PaymentID
	case s.Currency != "" && (s.Amount != b.AmountPaise || !strings.EqualFold(s.Currency, b.Currency)):
		return fmt.Sprintf("payment %s took %d %s; the booking costs %d %s", s.PaymentID, s.Amount, s.Currency, b.AmountPaise, b.Currency)
	}
	return ""
}

// enqueueStraySQL queues the refund of money a booking does not keep: one
// job per payment ever (outbox_one_stray), numbered among the booking's
// stray refunds (the caller holds the booking's row lock). $1 booking,
// $2 payment.
const enqueueStraySQL = `
INSERT INTO outbox (kind, booking_id, round, payment_id)
SELECT '` + string(core.JobStrayRefund) + `', $1, coalesce(max(round), 0) + 1, $2
  FROM outbox WHERE kind = '` + string(core.JobStrayRefund) + `' AND booking_id = $1
ON CONFLICT DO NOTHING`

// refundStray queues the refund of a payment booking b (locked) does not
// keep, and leaves the booking as it is, but for one case: the booking's
// own payment (or the first for a booking that has recorded none) came for
// another amount or currency, so the booking's payment failed: a pending
// booking is declined (FAILED, with that payment's id), and its fan may
// pay again. A settled booking is never moved by another payment.
func (db *DB) refundStray(ctx context.Context, tx pgx.Tx, b *core.Booking, s core.Settlement, why string) (core.BookingStatus, error) {
	db.log.Warn("payment the booking does not keep: refunding it", "booking", b.ID, "payment", s.PaymentID, "reason", why)
	if _, err := tx.Exec(ctx, enqueueStraySQL, b.ID, s.PaymentID); err != nil {
		return "", fmt.Errorf("queue stray refund: %w", err)
	}
	if b.PaymentID == "" || b.PaymentID == s.PaymentID {
		if _, _, err := advance(ctx, tx, b, core.OutcomeDeclined, s.PaymentID); err != nil {
			return "", err
		}
	}
	return core.OutcomeStrayRefund, nil
}

// bookSeats runs the conditional book of a booking's hold in a savepoint
// and, when every seat was booked, issues the tickets; otherwise the
// savepoint is undone and nothing is booked.
func (db *DB) bookSeats(ctx context.Context, tx pgx.Tx, b *core.Booking) (bool, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	var holds, booked, listed int
	if err := sp.QueryRow(ctx, bookSQL, b.HoldID, b.ID, db.policy == core.PolicyHonour).Scan(&holds, &booked, &listed); err != nil {
		sp.Rollback(ctx)
		return false, err
	}
	if holds != 1 || booked != listed {
		return false, sp.Rollback(ctx)
	}
	if err := sp.Commit(ctx); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, issueTicketsSQL, b.ID, b.EventID, b.Seats, b.Quantity); err != nil {
		return false, fmt.Errorf("issue tickets: %w", err)
	}
	return true, nil
}

// lockUncapturedSQL locks a confirmed card booking whose money is not
// taken: the only booking a refused capture may undo (scanLocked).
// $1 booking.
const lockUncapturedSQL = lockedColumns + `
 WHERE id = $1 AND status = ` + sqlConfirmed + ` AND flow = ` + sqlFlowSync + ` AND captured_at IS NULL FOR UPDATE`

// The compensation of a refused capture, statement by statement: the
// seats go back on sale, the hold is released, the account gets its quota
// back (and GA its tickets), the tickets are withdrawn.
const (
	// $1 event, $2 booking.
	freeBookedSeatsSQL = `UPDATE seats SET status = 'AVAILABLE', hold_id = NULL, hold_until = NULL, booking_id = NULL, version = version + 1
  WHERE event_id = $1 AND booking_id = $2 AND status = 'BOOKED'`
	// $1 hold.
	releaseBookedHoldSQL = `UPDATE holds SET status = ` + sqlHoldFreed + `, version = version + 1, ended_at = now() WHERE id = $1 AND status = ` + sqlHoldBooked
	// $1 event, $2 account, $3 tickets, $4 hold (off the account's list:
	// nothing is left to settle).
	returnQuotaSQL = `UPDATE account_tickets SET tickets = tickets - $3, holds = array_remove(holds, $4::uuid) WHERE event_id = $1 AND account = $2`
	// $1 event, $2 tickets, $3 true for a GA booking.
	returnGASQL = `UPDATE ga_inventory SET remaining = remaining + $2 WHERE event_id = $1 AND $3`
	// $1 booking.
	withdrawTicketsSQL = `DELETE FROM tickets WHERE booking_id = $1`
)

// FailCapture undoes a card booking whose capture the provider refused for
// good: no money was taken, so the seats go back on sale, the account gets
// its quota back, the tickets are withdrawn, the booking is FAILED and the
// authorization is voided (outbox). Only a CONFIRMED, uncaptured card
// booking is changed.
func (db *DB) FailCapture(ctx context.Context, booking int64) error {
	var freed core.Booking
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		freed = core.Booking{} // inTx may run fn again: nothing from an aborted try
		b, err := scanLocked(tx.QueryRow(ctx, lockUncapturedSQL, booking))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		steps := []struct {
			sql  string
			args []any
		}{
			{freeBookedSeatsSQL, []any{b.EventID, b.ID}},
			{releaseBookedHoldSQL, []any{b.HoldID}},
			{returnQuotaSQL, []any{b.EventID, b.Account, b.Quantity, b.HoldID}},
			{returnGASQL, []any{b.EventID, b.Quantity, len(b.Seats) == 0}},
			{withdrawTicketsSQL, []any{b.ID}},
		}
		for _, st := range steps {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		_, moved, err := advance(ctx, tx, b, core.OutcomeCaptureRefused, "")
		if err != nil {
			return err
		}
		if !moved {
			return fmt.Errorf("booking %d: a refused capture did not fail it", b.ID)
		}
		freed = *b
		return nil
	})
	if err != nil {
		return translate(err)
	}
	db.seatsChanged(freed.EventID, freed.Seats, true)
	return nil
}
