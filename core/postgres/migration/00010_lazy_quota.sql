-- +goose Up

-- A lazier limit (issue 14): the periodic sweep ends expired holds without
-- writing account_tickets; an ended hold's tickets stay counted until the
-- account's next hold is refused over its limit, which returns them
-- (settleQuotaSQL in core/postgres/sweep.go) and tries again. Returning them
-- was two thirds of the sweep's cost: one account row rewritten per swept
-- hold.
--
-- holds.owed: the periodic sweep ended this hold and its tickets are still
-- in its account's counter. Set in the sweep's own UPDATE of the hold row
-- (no second write), cleared exactly once by the settle that returns them:
-- a conditional UPDATE of the hold row, so two settles (or a settle and a
-- release) cannot both return them. A hold ended any other way (released,
-- booked, expired by a settle, by a core that predates this) is never
-- owed: its tickets were returned, or stay counted for good (booked).
-- No index covers it.
ALTER TABLE holds ADD COLUMN owed boolean NOT NULL DEFAULT false;
ALTER TABLE holds ADD CONSTRAINT holds_owed_expired CHECK (NOT owed OR status = 'EXPIRED');

-- account_tickets.holds: the ids of the account's holds whose tickets may
-- still have to come back (appended by the hold statement, removed when a
-- release returns them or a settle finds them returned or booked), so the
-- settle finds an account's holds by primary key. An index on holds
-- (event_id, account) would cost every hold and every swept hold an index
-- entry; the account row is rewritten by every hold anyway (a HOT update).
-- Its length is bounded by the limit: each listed hold counts at least
-- one ticket until it is removed (while only upgraded cores run: a core
-- that predates this releases a hold without removing its id, which the
-- account's next settle removes).
ALTER TABLE account_tickets ADD COLUMN holds uuid[] NOT NULL DEFAULT '{}';
UPDATE account_tickets a SET holds = x.ids
  FROM (SELECT event_id, account, array_agg(id ORDER BY id) AS ids FROM holds WHERE status = 'ACTIVE' GROUP BY 1, 2) x
 WHERE a.event_id = x.event_id AND a.account = x.account;

-- +goose Down
-- The code before this migration counts only active and booked holds:
-- give back what is still owed first.
UPDATE account_tickets a SET tickets = a.tickets - x.n
  FROM (SELECT event_id, account, sum(quantity)::int AS n FROM holds WHERE owed GROUP BY 1, 2) x
 WHERE a.event_id = x.event_id AND a.account = x.account;
ALTER TABLE account_tickets DROP COLUMN holds;
ALTER TABLE holds DROP CONSTRAINT holds_owed_expired;
ALTER TABLE holds DROP COLUMN owed;
