-- +goose Up

-- Money a booking does not keep (core.Settlement): a second payment, a
-- payment that is not the booking's, one of another amount or currency.
-- A refund_stray job gives it back and names the payment it refunds; every
-- other job acts on its booking's own payment and names none. One such
-- job per payment, ever: however often the provider tells of it (webhook
-- retries, the reconciler), it is refunded once.
ALTER TABLE outbox ADD COLUMN payment_id text;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('refund', 'void', 'capture', 'email', 'sms', 'refund_stray'));
ALTER TABLE outbox ADD CONSTRAINT outbox_stray_payment CHECK ((kind = 'refund_stray') = (payment_id IS NOT NULL));
DROP INDEX outbox_one_pending;
CREATE UNIQUE INDEX outbox_one_pending ON outbox (kind, booking_id) WHERE status = 'PENDING' AND kind <> 'refund_stray';
CREATE UNIQUE INDEX outbox_one_stray ON outbox (payment_id) WHERE kind = 'refund_stray';

-- +goose Down
DELETE FROM outbox WHERE kind = 'refund_stray';
DROP INDEX outbox_one_stray;
DROP INDEX outbox_one_pending;
CREATE UNIQUE INDEX outbox_one_pending ON outbox (kind, booking_id) WHERE status = 'PENDING';
ALTER TABLE outbox DROP CONSTRAINT outbox_stray_payment;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('refund', 'void', 'capture', 'email', 'sms'));
ALTER TABLE outbox DROP COLUMN payment_id;
