-- +goose Up

-- Money may arrive for a booking already FAILED (a webhook after the
-- reconciler's verdict, or after a refused capture): the booking moves to
-- REFUND_DUE and its money is given back. Two rules of 00002 stood in the
-- way.
--
-- One live booking per hold: a FAILED booking may be followed by a new
-- booking of the same hold, so the old one moving to REFUND_DUE must not
-- count as live (it broke the unique index, and the webhook was retried
-- forever). Live means PAYMENT_PENDING or CONFIRMED: the bookings that
-- hold or own the hold's seats.
DROP INDEX bookings_live_hold;
CREATE UNIQUE INDEX bookings_live_hold ON bookings (hold_id) WHERE status IN ('PAYMENT_PENDING', 'CONFIRMED');

-- One job of a kind per booking: a card booking whose capture was refused
-- had its authorization voided (a DONE void); the void of the late money
-- was then dropped by ON CONFLICT, leaving the booking REFUND_DUE with no
-- job. A kind queued again after its job finished is a new round; at most
-- one job of a kind per booking is pending at a time.
ALTER TABLE outbox ADD COLUMN round integer NOT NULL DEFAULT 1 CHECK (round > 0);
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_booking_id_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_booking_round_key UNIQUE (kind, booking_id, round);
CREATE UNIQUE INDEX outbox_one_pending ON outbox (kind, booking_id) WHERE status = 'PENDING';

-- +goose Down
DROP INDEX outbox_one_pending;
DELETE FROM outbox WHERE round > 1;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_booking_round_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_booking_id_key UNIQUE (kind, booking_id);
ALTER TABLE outbox DROP COLUMN round;
DROP INDEX bookings_live_hold;
CREATE UNIQUE INDEX bookings_live_hold ON bookings (hold_id) WHERE status <> 'FAILED';
