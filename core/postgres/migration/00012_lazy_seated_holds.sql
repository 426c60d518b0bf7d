-- +goose Up

-- An expired seated hold is no longer swept (issue 14): nothing is left for
-- the sweep to do with it. Its seats are free to every reader and writer
-- the instant its hold_until passes (seatFree); its account's tickets come
-- back when the account's next hold is refused over its limit
-- (settleQuotaSQL ends it then, conditionally on the hold row, as the
-- sweep would); every statement that books, extends or pays for a hold
-- asks for an unexpired one, or, under the honour policy, for seats still
-- held under it (bookSQL); and the core shows an ACTIVE hold past its
-- expiry as EXPIRED (core.Hold.Effective). Rewriting the row to EXPIRED
-- was all that was left of the sweep's work on it: 4,000 hold rows took
-- more time than the seed's plain sweep of 4,000 seat rows.
--
-- So a seated hold stays ACTIVE in its row after it lapses, until a
-- release, a booking or a settle ends it; holds_now shows each hold's
-- status as the core reads it. GA holds are swept as before: their
-- tickets go back to the event's counter, which nothing else returns.
--
-- The sweep reads only GA holds, through an index of GA holds alone, so a
-- seated hold (most holds) writes one index entry fewer. sweep_mark's rule
-- narrows with it: no ACTIVE GA hold expires before mark, and only a GA
-- hold written with its expiry already past lowers it.
CREATE INDEX holds_ga_expiry ON holds (expires_at) WHERE cardinality(seat_ids) = 0;
DROP INDEX holds_expiry;

DROP TRIGGER holds_past_expiry ON holds;
CREATE TRIGGER holds_past_expiry AFTER INSERT OR UPDATE OF expires_at ON holds
    FOR EACH ROW WHEN (NEW.status = 'ACTIVE' AND NEW.expires_at < now() AND cardinality(NEW.seat_ids) = 0)
    EXECUTE FUNCTION holds_lower_sweep_mark();

-- Each hold with its status as of now (the core's rule: an ACTIVE hold past
-- its expiry has expired), for operators reading the database (join holds
-- on id for the rest: the view names only the columns it needs, so it
-- stands in the way of no later change to the others).
CREATE VIEW holds_now AS
SELECT id, event_id, account, quantity, expires_at,
       CASE WHEN status = 'ACTIVE' AND expires_at <= now() THEN 'EXPIRED' ELSE status END AS status
  FROM holds;

-- +goose Down
-- Run with every upgraded core stopped. The earlier sweep ends the seated
-- holds left ACTIVE past their expiry, from the oldest: the mark goes back
-- to the start.
DROP VIEW holds_now;
DROP TRIGGER holds_past_expiry ON holds;
CREATE TRIGGER holds_past_expiry AFTER INSERT OR UPDATE OF expires_at ON holds
    FOR EACH ROW WHEN (NEW.status = 'ACTIVE' AND NEW.expires_at < now())
    EXECUTE FUNCTION holds_lower_sweep_mark();
CREATE INDEX holds_expiry ON holds (expires_at);
DROP INDEX holds_ga_expiry;
UPDATE sweep_mark SET mark = '-infinity', gen = gen + 1;
