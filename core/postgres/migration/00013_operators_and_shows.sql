-- +goose Up

-- Named operator accounts (issue 15): each person who runs shows signs in
-- with a name and password; a role says what they may do (core/operator.go).
-- A disabled operator is kept, for the audit log that names them.
CREATE TABLE operators (
    id            bigserial PRIMARY KEY,
    name          text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    display_name  text NOT NULL DEFAULT '',
    role          text NOT NULL CHECK (role IN ('admin', 'box_office', 'sale_desk')),
    password_hash bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    disabled_at   timestamptz,
    -- a session token issued before this is refused: set (to the second,
    -- a token's iat precision) when the password, the role or the
    -- disabled state changes
    sessions_after timestamptz NOT NULL DEFAULT '-infinity'
);

-- Every operator's change, written in the change's own transaction: who,
-- when, what, and the subject before and after (NULL where it did not
-- exist). Never updated or deleted by the core.
CREATE TABLE audit_log (
    id         bigserial PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    actor      text NOT NULL,
    action     text NOT NULL,
    subject    text NOT NULL,
    before     jsonb,
    after      jsonb,
    request_id text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_subject ON audit_log (subject, id);

-- Seat layouts operators import: the layout document as it was imported
-- (core/layout's JSON), on its venue. Shows are created on a layout and
-- copy its seats; a layout is never changed (import another).
CREATE TABLE layouts (
    id         bigserial PRIMARY KEY,
    venue_id   bigint NOT NULL REFERENCES venues (id),
    name       text NOT NULL CHECK (name <> ''),
    doc        jsonb NOT NULL,
    seated     boolean NOT NULL,
    capacity   integer NOT NULL CHECK (capacity > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text NOT NULL,
    UNIQUE (venue_id, name)
);

-- A show's status (core/show.go): draft, published, closed, cancelled.
-- Shows from before this migration, and the demo's seed, are published;
-- the operators' API creates drafts (it names the status).
ALTER TABLE events
    ADD COLUMN status text NOT NULL DEFAULT 'published'
        CHECK (status IN ('draft', 'published', 'closed', 'cancelled')),
    ADD COLUMN series_id bigint,
    ADD COLUMN layout_id bigint REFERENCES layouts (id),
    ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

-- The fans' catalog reads shows a fan may see, by start.
CREATE INDEX events_catalog ON events (starts_at, id) WHERE status IN ('published', 'closed');

-- +goose Down
-- A down migration would put every draft, closed and cancelled show on sale
-- again (the status column goes): refused while there is one.
-- +goose StatementBegin
DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM events WHERE status <> 'published') THEN
    RAISE EXCEPTION 'shows that are draft, closed or cancelled exist: migrating down would put them on sale';
  END IF;
END $$;
-- +goose StatementEnd
DROP INDEX events_catalog;
ALTER TABLE events DROP COLUMN status, DROP COLUMN series_id, DROP COLUMN layout_id, DROP COLUMN updated_at;
DROP TABLE layouts, audit_log, operators;
