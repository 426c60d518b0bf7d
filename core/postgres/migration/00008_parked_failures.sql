-- +goose Up

-- A payment failure that arrived before its booking recorded a payment id
-- is parked (outcome FAILURE_PARKED, core.OutcomeFailureParked) and applied
-- when SetPaymentID records that payment. SetPaymentID runs once per
-- payment, so it looks the parked failures up by booking through this
-- small partial index, never by scanning every webhook ever received.
CREATE INDEX payment_events_parked ON payment_events (booking_id) WHERE outcome = 'FAILURE_PARKED';

-- +goose Down
DROP INDEX payment_events_parked;
