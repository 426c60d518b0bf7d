-- +goose Up

-- Room on every page for the rows the hold path and the sweeper rewrite,
-- so each rewrite is a HOT update: the new row version goes on the same
-- page and no index is touched (no index covers the columns they change).
--
-- account_tickets: every hold raises its account's counter and every end of
-- a hold (release, sweep) lowers it. Packed full (the default), the first
-- change of each row found its page full and had to move the row to another
-- page and add a primary-key entry for it: a write to the index per hold
-- and per swept hold.
--
-- holds: a hold is rewritten when it is extended, booked or ended; those
-- change indexed columns (expires_at, or status in holds_active_expiry's
-- predicate), so they cannot be HOT, but with room on the page the new
-- version stays beside the old one instead of dirtying another page.
--
-- The setting applies to pages filled from now on; existing rows are not
-- moved (that would need a table rewrite and its exclusive lock).
ALTER TABLE account_tickets SET (fillfactor = 70);
ALTER TABLE holds SET (fillfactor = 85);

-- +goose Down
ALTER TABLE holds RESET (fillfactor);
ALTER TABLE account_tickets RESET (fillfactor);
