-- +goose Up

-- The dials operators set for an event's waiting room (the gateway's
-- admission settings: paused, rates, times), the durable home of each
-- event's configuration: the gateways' Redis keeps a copy, and when Redis
-- loses an event's room the gateways set it up again from this row, so a
-- paused sale stays paused. The core does not read the dials: it keeps
-- what the gateway validated, a JSON object of the dials operators named,
-- by dial name; each change is merged into the object (jsonb ||), so two
-- operators changing different dials at once do not undo each other.
CREATE TABLE event_dials (
    event_id   bigint PRIMARY KEY REFERENCES events (id) ON DELETE CASCADE,
    dials      jsonb NOT NULL CHECK (jsonb_typeof(dials) = 'object'),
    -- one more per change: what the audit of a change can name
    version    bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE event_dials;
