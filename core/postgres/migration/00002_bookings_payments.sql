-- +goose Up

-- A booking is the order that money and seats must meet in exactly once. PAYMENT_PENDING until the payment settles; then CONFIRMED (the
-- hold's seats are BOOKED under this booking) or REFUND_DUE (the hold was
-- gone when the money came: an outbox job refunds it) and finally REFUNDED;
-- FAILED when the payment failed.
CREATE TABLE bookings (
    id            bigserial PRIMARY KEY,
    hold_id       uuid NOT NULL,
    event_id      bigint NOT NULL,
    account       text NOT NULL,
    seat_ids      text[] NOT NULL,
    quantity      integer NOT NULL CHECK (quantity > 0),
    amount_paise  bigint NOT NULL CHECK (amount_paise >= 0),
    currency      text NOT NULL DEFAULT 'INR',
    flow          text NOT NULL CHECK (flow IN ('async', 'sync')),
    status        text NOT NULL DEFAULT 'PAYMENT_PENDING'
                  CHECK (status IN ('PAYMENT_PENDING', 'CONFIRMED', 'REFUND_DUE', 'REFUNDED', 'FAILED')),
    payment_id    text,
    email         text,
    phone         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    confirmed_at  timestamptz,
    -- card flow: when the authorization was captured (UPI is captured at once)
    captured_at   timestamptz,
    -- when the reconciler next asks the provider about a pending booking
    reconcile_at  timestamptz NOT NULL DEFAULT now()
);
-- One live booking per hold; after a FAILED payment the fan may try again
-- with a new booking (and a new provider key) while the hold lasts.
CREATE UNIQUE INDEX bookings_live_hold ON bookings (hold_id) WHERE status <> 'FAILED';
CREATE INDEX bookings_pending ON bookings (reconcile_at) WHERE status = 'PAYMENT_PENDING';
CREATE INDEX bookings_payment ON bookings (payment_id);

-- Provider webhook events, one row per event id: inserting the row is the
-- de-duplication, in the same transaction as what the event does.
CREATE TABLE payment_events (
    id          text PRIMARY KEY,
    type        text NOT NULL,
    payment_id  text,
    booking_id  bigint,
    outcome     text,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- Idempotency keys (IETF httpapi idempotency-key draft): per account and
-- key, the request's fingerprint and, once done, the response to replay.
-- An IN_FLIGHT key whose lease ran out (its request died) can be retried.
CREATE TABLE idempotency_keys (
    account      text NOT NULL,
    key          text NOT NULL,
    fingerprint  bytea NOT NULL,
    state        text NOT NULL CHECK (state IN ('IN_FLIGHT', 'DONE')),
    locked_until timestamptz,
    status       integer,
    body         bytea,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (account, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Work that must happen after a commit and must not be lost: refunds, voids
-- and captures at the provider, ticket emails and SMS. Written in the
-- transaction that decides it; workers claim due jobs with SKIP LOCKED and a
-- lease, retry with backoff, and give up (DEAD) only after many attempts.
CREATE TABLE outbox (
    id              bigserial PRIMARY KEY,
    kind            text NOT NULL CHECK (kind IN ('refund', 'void', 'capture', 'email', 'sms')),
    booking_id      bigint NOT NULL,
    status          text NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DONE', 'DEAD')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    locked_until    timestamptz,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz,
    UNIQUE (kind, booking_id)
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'PENDING';

-- One ticket per booked seat (or per GA ticket). The signed payload is made
-- from these columns with the core's ticket key when it is shown.
CREATE TABLE tickets (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    booking_id bigint NOT NULL REFERENCES bookings (id),
    event_id   bigint NOT NULL,
    seat_id    text,
    n          integer NOT NULL,
    issued_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (booking_id, n)
);

-- +goose Down
DROP TABLE tickets, outbox, idempotency_keys, payment_events, bookings;
