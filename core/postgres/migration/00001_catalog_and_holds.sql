-- +goose Up
CREATE TABLE venues (
    id       bigserial PRIMARY KEY,
    name     text NOT NULL,
    city     text NOT NULL,
    timezone text NOT NULL DEFAULT 'Asia/Kolkata',
    UNIQUE (name, city)
);

CREATE TABLE events (
    id              bigserial PRIMARY KEY,
    venue_id        bigint NOT NULL REFERENCES venues (id),
    name            text NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('concert', 'movie')),
    starts_at       timestamptz NOT NULL,
    onsale_at       timestamptz NOT NULL,
    seated          boolean NOT NULL,
    capacity        integer NOT NULL CHECK (capacity > 0),
    max_per_account integer NOT NULL DEFAULT 6 CHECK (max_per_account > 0),
    hold_seconds    integer NOT NULL DEFAULT 480 CHECK (hold_seconds > 0),
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_starts_at ON events (starts_at);

CREATE TABLE price_bands (
    event_id    bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    code        text NOT NULL,
    name        text NOT NULL,
    price_paise bigint NOT NULL CHECK (price_paise >= 0),
    PRIMARY KEY (event_id, code)
);

-- One row per seat per event: the single source of truth for every seat.
-- Only holds, bookings and the sweeper change status, each with one
-- conditional UPDATE. No index covers a column those UPDATEs change, and
-- fillfactor leaves room on each page, so they stay HOT updates.
CREATE TABLE seats (
    event_id   bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    seat_id    text NOT NULL,
    pos        integer NOT NULL,
    section    text NOT NULL,
    row_label  text NOT NULL,
    row_no     integer NOT NULL,
    number     integer NOT NULL,
    band       text NOT NULL,
    status     text NOT NULL DEFAULT 'AVAILABLE' CHECK (status IN ('AVAILABLE', 'HELD', 'BOOKED')),
    hold_id    uuid,
    hold_until timestamptz,
    booking_id bigint,
    version    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (event_id, seat_id),
    CHECK (status <> 'HELD' OR (hold_id IS NOT NULL AND hold_until IS NOT NULL)),
    CHECK (status <> 'AVAILABLE' OR (hold_id IS NULL AND hold_until IS NULL))
) WITH (fillfactor = 80);
CREATE INDEX seats_best_available ON seats (event_id, band, row_no, section, number);

-- General admission: one counter per event that can never go below zero.
CREATE TABLE ga_inventory (
    event_id  bigint PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    band      text NOT NULL,
    capacity  integer NOT NULL,
    remaining integer NOT NULL,
    CONSTRAINT ga_inventory_remaining_check CHECK (remaining >= 0 AND remaining <= capacity)
);

-- A hold is one acquisition; its id is never reused and version grows with
-- every change (the fencing token). claimed = quantity is the all-or-nothing
-- rule: the hold statement inserts the hold with the number of seats its
-- UPDATE actually claimed, so a partial claim violates the check and the
-- whole statement, seat updates included, is undone. No foreign key to
-- events: every hold would take a KEY SHARE lock on the one hot event row.
CREATE TABLE holds (
    id         uuid PRIMARY KEY,
    event_id   bigint NOT NULL,
    account    text NOT NULL,
    seat_ids   text[] NOT NULL DEFAULT '{}',
    quantity   integer NOT NULL CHECK (quantity > 0),
    claimed    integer NOT NULL,
    status     text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'RELEASED', 'EXPIRED', 'BOOKED')),
    version    bigint NOT NULL DEFAULT 1,
    expires_at timestamptz NOT NULL,
    extended   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz,
    CONSTRAINT holds_all_claimed CHECK (claimed = quantity)
);
CREATE INDEX holds_active_expiry ON holds (expires_at) WHERE status = 'ACTIVE';

-- Tickets an account holds or has bought per event. The CHECK makes the
-- limit race-free: concurrent holds of one account serialize on this row and
-- the one that would pass the limit fails with a check violation. No
-- foreign key, for the same reason as holds: every fan's first hold inserts
-- here, at noon, all at once.
CREATE TABLE account_tickets (
    event_id    bigint NOT NULL,
    account     text NOT NULL,
    tickets     integer NOT NULL,
    max_tickets integer NOT NULL,
    PRIMARY KEY (event_id, account),
    CONSTRAINT account_tickets_within_limit CHECK (tickets <= max_tickets),
    CONSTRAINT account_tickets_nonnegative CHECK (tickets >= 0)
);

-- +goose Down
DROP TABLE account_tickets, holds, ga_inventory, seats, price_bands, events, venues;
