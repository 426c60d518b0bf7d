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
-- concurrent verifies of one code cannot both succeed.
CREATE TABLE signin_codes (
    phone      text PRIMARY KEY,
    code_hash  bytea NOT NULL,
    attempts   integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signin_codes_expiry ON signin_codes (expires_at);

-- Every counted sign-in action (a code sent to a phone, a code asked from
-- an address, a verify from an address), for the per-hour limits. A
-- sliding window over this log, taken under a per-(scope, key) advisory
-- lock, is exact across several cores. Rows past the window are purged.
CREATE TABLE signin_log (
    scope text NOT NULL CHECK (scope IN ('send_phone', 'send_addr', 'verify_addr')),
    key   text NOT NULL,
    at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX signin_log_key ON signin_log (scope, key, at);
CREATE INDEX signin_log_at ON signin_log (at);

-- A fan's bookings ("My tickets").
CREATE INDEX bookings_account ON bookings (account);

-- +goose Down
DROP INDEX bookings_account;
DROP TABLE signin_log;
DROP TABLE signin_codes;
DROP TABLE accounts;
