-- +goose Up

-- The sweep's rewrite of a hold becomes a HOT update (issue 14): it changes
-- status, version, ended_at and owed, and after this no index covers any of
-- them. holds_active_expiry's predicate read status, so every swept hold was
-- a new row version in another place plus a primary-key entry; that was
-- half the sweep's time.
--
-- The sweep still needs to find expired ACTIVE holds without reading every
-- hold ever made. holds_expiry has them all, swept or not, in expiry order,
-- and sweep_mark says where in that order the sweep starts: no ACTIVE hold
-- expires before mark. The sweep (sweepSQL in core/postgres/sweep.go) reads
-- from mark to now and moves mark up to the earliest expiry it leaves ACTIVE,
-- so a sweep reads the holds that expired since the last one, not history.
--
-- What keeps the rule true is in one place each:
--   - the sweep never moves mark past a hold it leaves ACTIVE, nor past the
--     start of any transaction still open that may write a hold (sweep.go);
--   - a hold written with an expiry already past (tests and tools do that;
--     the core never does: a hold and an extension expire after their
--     statement's now()) lowers mark in its own transaction and bumps gen:
--     the trigger below. A sweep moves the mark only if gen is still what
--     it read, so a sweep that could not see such a hold does not move the
--     mark past it. Rare, so the hold path never queues on the one row.
CREATE TABLE sweep_mark (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    mark timestamptz NOT NULL,
    gen  bigint NOT NULL DEFAULT 0
);
-- -infinity: the first sweep reads every hold once.
INSERT INTO sweep_mark (mark) VALUES ('-infinity');

-- +goose StatementBegin
CREATE FUNCTION holds_lower_sweep_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sweep_mark SET mark = least(mark, NEW.expires_at), gen = gen + 1;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER holds_past_expiry AFTER INSERT OR UPDATE OF expires_at ON holds
    FOR EACH ROW WHEN (NEW.status = 'ACTIVE' AND NEW.expires_at < now())
    EXECUTE FUNCTION holds_lower_sweep_mark();

CREATE INDEX holds_expiry ON holds (expires_at);
DROP INDEX holds_active_expiry;

-- Room for the new version of each hold on its own page: the holds that
-- expire together were made together, on the same pages, and one sweep
-- rewrites them all, with no chance to prune in between. 85 (migration
-- 00009) left room for a third of them. As in 00009, only pages filled
-- from now on get the room.
ALTER TABLE holds SET (fillfactor = 60);

-- +goose Down
-- Run with every upgraded core stopped: an earlier core neither reads nor
-- moves the mark, and sweeps through holds_active_expiry again.
ALTER TABLE holds SET (fillfactor = 85);
CREATE INDEX holds_active_expiry ON holds (expires_at) WHERE status = 'ACTIVE';
DROP INDEX holds_expiry;
DROP TRIGGER holds_past_expiry ON holds;
DROP FUNCTION holds_lower_sweep_mark();
DROP TABLE sweep_mark;
