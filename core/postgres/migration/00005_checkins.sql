-- +goose Up

-- One row per redeemed ticket: the gate's record that a ticket let someone
-- in. The primary key is the redemption: a scan inserts its row with ON
-- CONFLICT DO NOTHING, so of two gates scanning the same ticket at the same
-- instant exactly one inserts, the other waits for it and learns who was
-- first. No check-then-insert anywhere. The ticket is named by booking and
-- number (what the QR code carries; tickets are UNIQUE on them). No foreign
-- key to tickets: a card booking whose capture fails has its tickets
-- withdrawn, and such tickets were never shown, so never scanned.
CREATE TABLE checkins (
    booking_id bigint NOT NULL,
    n          integer NOT NULL,
    ticket_id  uuid NOT NULL UNIQUE,
    event_id   bigint NOT NULL,
    gate       text NOT NULL,
    staff      text NOT NULL,
    scanned_at timestamptz NOT NULL,
    -- an offline scan, redeemed when its scanner synced
    offline    boolean NOT NULL DEFAULT false,
    -- the scanner's id for the look that made this row (a UUID it makes
    -- before trying online): the same scan sent again, after a lost answer
    -- or by a sync, is recognised as this row's own, whatever the clocks say
    scan_id    uuid,
    -- the scanner's clock for an offline scan, as it sent it (scanned_at is
    -- the time used: the scanner's when plausible, else the sync's)
    client_at  timestamptz,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (booking_id, n)
);
CREATE INDEX checkins_event ON checkins (event_id);

-- +goose Down
DROP TABLE checkins;
