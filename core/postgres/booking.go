package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// createBookingSQL creates the booking of a valid hold, priced from the
// event's bands: the sum of its seats' bands, or the GA band times the
// quantity. $1 hold, $2 flow, $3 email, $4 phone.
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
 WHERE h.id = $1 AND h.status = 'ACTIVE' AND h.expires_at > now()
ON CONFLICT (hold_id) WHERE status <> 'FAILED' DO NOTHING
RETURNING id`

const bookingColumns = `SELECT id, hold_id::text, event_id, account, seat_ids, quantity, amount_paise, currency, flow, status,
       coalesce(payment_id, ''), coalesce(email, ''), coalesce(phone, ''), created_at, captured_at IS NOT NULL,
       (SELECT count(*) FROM bookings x WHERE x.hold_id = bookings.hold_id AND x.id <= bookings.id)::int FROM bookings`

func scanBooking(row pgx.Row) (*core.Booking, error) {
	var b core.Booking
	err := row.Scan(&b.ID, &b.HoldID, &b.EventID, &b.Account, &b.Seats, &b.Quantity, &b.AmountPaise, &b.Currency, &b.Flow,
		&b.Status, &b.PaymentID, &b.Email, &b.Phone, &b.CreatedAt, &b.Captured, &b.Attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no such booking")
	}
	if err != nil {
		return nil, translate(err)
	}
	return &b, nil
}

// StartPayment creates the booking of a valid hold, or returns the live
// booking it has in whatever status, so a retry is answered from what
// happened; it extends the hold once (the Pay step) in the same
// transaction. The hold row is locked first, so a sweep or release cannot
// slip in between. Fails with EHoldExpired, EHoldNotActive,
// EPaymentInProgress (a payment of the other flow is under way),
// EForbidden, EWrongEvent or ENotFound.
func (db *DB) StartPayment(ctx context.Context, ref core.HoldRef, flow string, c core.Contact) (*core.Booking, error) {
	if _, err := db.ownedHold(ctx, ref); err != nil && core.ErrorCode(err) != core.EHoldNotActive {
		return nil, err
	}
	var b *core.Booking
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var status string
		var version int64
		var extended, valid bool
		err := tx.QueryRow(ctx, `SELECT status, version, extended, expires_at > now() FROM holds WHERE id = $1 FOR UPDATE`, ref.ID).
			Scan(&status, &version, &extended, &valid)
		if err != nil {
			return err
		}
		live := status == core.HoldActive && valid
		if existing, err := scanBooking(tx.QueryRow(ctx, bookingColumns+` WHERE hold_id = $1 AND status <> 'FAILED'`, ref.ID)); err == nil {
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
			return core.Errorf(core.EHoldNotActive, "hold %s is %s", ref.ID, status).With("status", status)
		case !valid:
			return core.Errorf(core.EHoldExpired, "hold %s has expired", ref.ID)
		}
		var id int64
		if err := tx.QueryRow(ctx, createBookingSQL, ref.ID, flow, c.Email, c.Phone).Scan(&id); err != nil {
			return fmt.Errorf("create booking: %w", err)
		}
		if !extended {
			var want, got int
			err := tx.QueryRow(ctx, extendSQL, ref.ID, version, db.extend.Seconds()).Scan(new(int64), new(any), &want, &got)
			if err != nil || want != got {
				return core.Errorf(core.EHoldExpired, "hold %s could not be extended: no longer valid", ref.ID)
			}
		}
		b, err = scanBooking(tx.QueryRow(ctx, bookingColumns+` WHERE id = $1`, id))
		return err
	})
	if err != nil {
		return nil, translate(err)
	}
	return b, nil
}

// SetPaymentID records the provider's payment id on a booking (once).
func (db *DB) SetPaymentID(ctx context.Context, booking int64, paymentID string) error {
	_, err := db.pool.Exec(ctx, `UPDATE bookings SET payment_id = $2, updated_at = now() WHERE id = $1 AND payment_id IS NULL`, booking, paymentID)
	return translate(err)
}

// Booking returns a booking with its tickets (payloads unsigned).
func (db *DB) Booking(ctx context.Context, id int64) (*core.Booking, error) {
	b, err := scanBooking(db.pool.QueryRow(ctx, bookingColumns+` WHERE id = $1`, id))
	if err != nil {
		return nil, err
	}
	rows, err := db.pool.Query(ctx, `SELECT id::text, event_id, coalesce(seat_id, ''), n FROM tickets WHERE booking_id = $1 ORDER BY n`, id)
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

// bookSQL books exactly the seats of one hold for a booking: the hold must
// still be ACTIVE (and, under the refund policy, unexpired), and each seat
// must still be HELD under this hold id (and unexpired). It reports the
// holds matched, the seats booked and the seats the hold lists, so the caller
// books all or nothing. $1 hold, $2 booking, $3 true for the honour policy.
const bookSQL = `
WITH h AS (
    UPDATE holds SET status = 'BOOKED', version = version + 1, ended_at = now()
     WHERE id = $1 AND status = 'ACTIVE' AND ($3 OR expires_at > now())
    RETURNING id, event_id, seat_ids
), s AS (
    UPDATE seats s SET status = 'BOOKED', booking_id = $2, hold_until = NULL, version = s.version + 1
      FROM h
     WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids) AND s.hold_id = h.id
       AND s.status = 'HELD' AND ($3 OR s.hold_until > now())
    RETURNING s.seat_id
)
SELECT (SELECT count(*) FROM h), (SELECT count(*) FROM s), coalesce((SELECT cardinality(seat_ids) FROM h), 0)`

// Settle applies a provider's outcome to its booking exactly once. See
// core.Bookings. The booking row is locked first, so two deliveries of one
// webhook run one after the other and the second sees the first's result;
// the seats are booked in a savepoint that is undone when any seat is no
// longer the hold's; the refund (or the void of an authorization) is queued
// in the outbox in the same transaction, and carried out after commit.
func (db *DB) Settle(ctx context.Context, s core.Settlement) (string, error) {
	outcome, err := db.settle(ctx, s)
	if st := sqlState(err); st == "40P01" || st == "40001" {
		outcome, err = db.settle(ctx, s) // the seats' locks met a new fan's hold: once more
	}
	if st := sqlState(err); st == "40P01" || st == "40001" {
		return "", core.Errorf(core.EUnavailable, "could not settle booking %d now: retry", s.BookingID)
	}
	if err != nil {
		return "", translate(err)
	}
	return outcome, nil
}

func (db *DB) settle(ctx context.Context, s core.Settlement) (string, error) {
	var outcome string
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		outcome = ""
		if s.EventID != "" {
			tag, err := tx.Exec(ctx, `INSERT INTO payment_events (id, type, payment_id, booking_id) VALUES ($1, $2, nullif($3, ''), nullif($4, 0))
ON CONFLICT (id) DO NOTHING`, s.EventID, s.Type, s.PaymentID, s.BookingID)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				outcome = core.OutcomeDuplicate
				return nil
			}
		}
		var b core.Booking
		err := tx.QueryRow(ctx, `SELECT id, hold_id::text, event_id, seat_ids, quantity, flow, status FROM bookings
 WHERE id = $1 OR (payment_id = nullif($2, '') AND $1 = 0) ORDER BY id LIMIT 1 FOR UPDATE`, s.BookingID, s.PaymentID).
			Scan(&b.ID, &b.HoldID, &b.EventID, &b.Seats, &b.Quantity, &b.Flow, &b.Status)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			outcome, err = core.OutcomeUnknownOrder, nil
		case err != nil:
			return err
		case b.Status == core.BookingFailed && s.Succeeded:
			// Money arrived for a booking given up as failed (a webhook
			// after the reconciler's verdict): it is given back.
			outcome = core.BookingRefundDue
			err = db.closeBooking(ctx, tx, &b, outcome, s.PaymentID)
		case b.Status != core.BookingPending:
			outcome = b.Status // a repeat or a late event: already settled
		case !s.Succeeded:
			outcome = core.BookingFailed
			_, err = tx.Exec(ctx, `UPDATE bookings SET status = 'FAILED', payment_id = coalesce(payment_id, nullif($2, '')), updated_at = now() WHERE id = $1`, b.ID, s.PaymentID)
		default:
			outcome, err = db.book(ctx, tx, &b, s.PaymentID)
		}
		if err != nil {
			return err
		}
		if s.EventID != "" {
			_, err = tx.Exec(ctx, `UPDATE payment_events SET outcome = $2, booking_id = coalesce(booking_id, nullif($3, 0)) WHERE id = $1`, s.EventID, outcome, b.ID)
		}
		return err
	})
	return outcome, err
}

// book runs the conditional book of a pending booking's hold in a savepoint
// and records the result: CONFIRMED with tickets, the capture (sync flow)
// and the ticket messages queued; or REFUND_DUE with the refund (async) or
// the void (sync, nothing captured yet) queued.
func (db *DB) book(ctx context.Context, tx pgx.Tx, b *core.Booking, paymentID string) (string, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	var holds, booked, listed int
	if err := sp.QueryRow(ctx, bookSQL, b.HoldID, b.ID, db.policy == core.PolicyHonour).Scan(&holds, &booked, &listed); err != nil {
		sp.Rollback(ctx)
		return "", err
	}
	status := core.BookingConfirmed
	if holds == 1 && booked == listed {
		if err := sp.Commit(ctx); err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO tickets (booking_id, event_id, seat_id, n)
SELECT $1, $2, nullif(u.seat, ''), u.n
  FROM unnest(CASE WHEN cardinality($3::text[]) > 0 THEN $3::text[] ELSE array_fill(''::text, ARRAY[$4::int]) END)
       WITH ORDINALITY AS u (seat, n)`, b.ID, b.EventID, b.Seats, b.Quantity); err != nil {
			return "", fmt.Errorf("issue tickets: %w", err)
		}
	} else {
		if err := sp.Rollback(ctx); err != nil {
			return "", err
		}
		status = core.BookingRefundDue
	}
	return status, db.closeBooking(ctx, tx, b, status, paymentID)
}

// closeBooking records a booking's settled status and queues what must
// follow: for CONFIRMED the ticket email and SMS (in the card flow, the
// capture, which queues them when it succeeds); for REFUND_DUE the refund
// (or, in the card flow where nothing was captured, the void).
func (db *DB) closeBooking(ctx context.Context, tx pgx.Tx, b *core.Booking, status, paymentID string) error {
	var jobs []string
	switch {
	case status == core.BookingConfirmed && b.Flow == core.FlowSync:
		jobs = []string{"capture"} // the tickets go out once the money is taken
	case status == core.BookingConfirmed:
		jobs = []string{"email", "sms"}
	case b.Flow == core.FlowSync:
		jobs = []string{"void"}
	default:
		jobs = []string{"refund"}
	}
	if _, err := tx.Exec(ctx, `UPDATE bookings SET status = $2, payment_id = coalesce(payment_id, nullif($3, '')), updated_at = now(),
       confirmed_at = CASE WHEN $2 = 'CONFIRMED' THEN now() END,
       captured_at = CASE WHEN $2 = 'CONFIRMED' AND flow = 'async' THEN now() END
 WHERE id = $1`, b.ID, status, paymentID); err != nil {
		return err
	}
	for _, kind := range jobs {
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (kind, booking_id) VALUES ($1, $2) ON CONFLICT (kind, booking_id) DO NOTHING`, kind, b.ID); err != nil {
			return fmt.Errorf("queue %s: %w", kind, err)
		}
	}
	return nil
}

// FailCapture undoes a card booking whose capture the provider refused for
// good: no money was taken, so the seats go back on sale, the account gets
// its quota back, the tickets are withdrawn, the booking is FAILED and the
// authorization is voided (outbox). Only a CONFIRMED, uncaptured card
// booking is changed.
func (db *DB) FailCapture(ctx context.Context, booking int64) error {
	var freed core.Booking
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var b core.Booking
		err := tx.QueryRow(ctx, `SELECT id, hold_id::text, event_id, account, seat_ids, quantity FROM bookings
 WHERE id = $1 AND status = 'CONFIRMED' AND flow = 'sync' AND captured_at IS NULL FOR UPDATE`, booking).
			Scan(&b.ID, &b.HoldID, &b.EventID, &b.Account, &b.Seats, &b.Quantity)
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
			{`UPDATE seats SET status = 'AVAILABLE', hold_id = NULL, hold_until = NULL, booking_id = NULL, version = version + 1
  WHERE event_id = $1 AND booking_id = $2 AND status = 'BOOKED'`, []any{b.EventID, b.ID}},
			{`UPDATE holds SET status = 'RELEASED', version = version + 1, ended_at = now() WHERE id = $1 AND status = 'BOOKED'`, []any{b.HoldID}},
			{`UPDATE account_tickets SET tickets = tickets - $3 WHERE event_id = $1 AND account = $2`, []any{b.EventID, b.Account, b.Quantity}},
			{`UPDATE ga_inventory SET remaining = remaining + $2 WHERE event_id = $1 AND $3`, []any{b.EventID, b.Quantity, len(b.Seats) == 0}},
			{`DELETE FROM tickets WHERE booking_id = $1`, []any{b.ID}},
			{`UPDATE bookings SET status = 'FAILED', confirmed_at = NULL, updated_at = now() WHERE id = $1`, []any{b.ID}},
			{`INSERT INTO outbox (kind, booking_id) VALUES ('void', $1) ON CONFLICT (kind, booking_id) DO NOTHING`, []any{b.ID}},
		}
		for _, st := range steps {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return err
			}
		}
		freed = b
		return nil
	})
	if err != nil {
		return translate(err)
	}
	db.seatsChanged(freed.EventID, freed.Seats, true)
	return nil
}
