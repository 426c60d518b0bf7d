-- +goose Up

-- A cancelled show (issue 15): each confirmed booking moves to REFUND_DUE
-- with its give-back job (core.Transition, OutcomeCancelled), and its
-- holder is told by email and SMS: two job kinds more.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('refund', 'void', 'capture', 'email', 'sms', 'refund_stray', 'cancel_email', 'cancel_sms'));

-- A show's bookings: its cancellation, its progress and its sales figures
-- read them by show (until now only by hold, payment and account).
CREATE INDEX IF NOT EXISTS bookings_event ON bookings (event_id, status);
CREATE INDEX IF NOT EXISTS tickets_event ON tickets (event_id);
-- The business metrics count the jobs that gave up (core/postgres/vitals.go).
CREATE INDEX IF NOT EXISTS outbox_dead ON outbox (kind) WHERE status = 'DEAD';

-- Why and when a show was cancelled, for the fans' pages and the messages.
ALTER TABLE events ADD COLUMN cancelled_at timestamptz, ADD COLUMN cancel_reason text NOT NULL DEFAULT '';

-- +goose Down
DROP INDEX bookings_event;
DROP INDEX tickets_event;
DROP INDEX outbox_dead;
ALTER TABLE events DROP COLUMN cancelled_at, DROP COLUMN cancel_reason;
DELETE FROM outbox WHERE kind IN ('cancel_email', 'cancel_sms');
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('refund', 'void', 'capture', 'email', 'sms', 'refund_stray'));
