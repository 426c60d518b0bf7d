-- +goose Up

-- A fan's account: one per verified phone number (E.164), created at the
-- first verified sign-in code. Its identity on holds, bookings and
-- idempotency keys is 'acct:' || id.
CREATE TABLE accounts (
    id             bigserial PRIMARY KEY,
    phone          text NOT NULL UNIQUE CHECK (phone ~ '^\+[1-9][0-9]{7,14}$'),
    email          text CHECK (email IS NULL OR length(email) BETWEEN 3 AND 254),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_signin_at timestamptz NOT NULL DEFAULT now()
);

-- The live sign-in code of a phone, one at a time (a new send replaces it).
-- Only its HMAC is kept. The verify statement uses it at most once: it
-- counts the attempt and sets used_at in one conditional UPDATE, so two
-- concurrent verifies of one code cannot both succeed. attempts counts the
-- code's verifies; wrong_from lists the address key of each wrong one, so
-- the code dies for an address after its own wrong guesses, not another's.
-- sent_at and sent_from (parallel) hold the phone's sends of the last hour
-- and the address key each was asked from (at most the per-phone limit):
-- the send statement checks and appends to them on this row, an exact
-- sliding window per phone and per (phone, address).
CREATE TABLE signin_codes (
    phone      text PRIMARY KEY,
    code_hash  bytea NOT NULL,
    attempts   integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    wrong_from text[] NOT NULL DEFAULT '{}',
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz[] NOT NULL DEFAULT '{}',
    sent_from  text[] NOT NULL DEFAULT '{}',
    CHECK (cardinality(sent_at) = cardinality(sent_from))
);
CREATE INDEX signin_codes_expiry ON signin_codes (expires_at);

-- The per-address limits (codes asked for, verifies): one counter per
-- (scope, address, hour). One conditional upsert counts and refuses, and
-- the row is the arbiter across cores. The limit is a two-bucket sliding
-- estimate (core/account.go): this hour's count plus last hour's weighted
-- by the part of it still in the window. Buckets older than two hours are
-- purged.
CREATE TABLE signin_counts (
    scope  text NOT NULL CHECK (scope IN ('send_addr', 'verify_addr')),
    key    text NOT NULL,
    bucket timestamptz NOT NULL,
    n      integer NOT NULL CHECK (n > 0),
    PRIMARY KEY (scope, key, bucket)
);
CREATE INDEX signin_counts_bucket ON signin_counts (bucket);

-- A fan's bookings ("My tickets").
CREATE INDEX bookings_account ON bookings (account);

-- A booking's attempt number (bookingColumns: its rank among its hold's
-- bookings, FAILED ones included) is counted per booking read and per row
-- of "My tickets"; bookings_live_hold skips FAILED rows, so without this
-- the count scans the table.
CREATE INDEX bookings_hold ON bookings (hold_id, id);

-- +goose Down
DROP INDEX bookings_hold;
DROP INDEX bookings_account;
DROP TABLE signin_counts;
DROP TABLE signin_codes;
DROP TABLE accounts;
