package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
)

// seatFree is the one rule of who may take a seat: a seat is free when it
// is AVAILABLE, or HELD by a hold whose time has run out. The second half is
// lazy expiry: a hold past hold_until owns nothing, even before the sweeper
// records it, so an expired hold never blocks a fan and the sweeper's
// timing never decides a sale. Every statement that asks "can this seat be
// held now" (the hold itself, the taken-seat report, best-available's
// candidates, the seat-map bitmap, the console's counts) composes this
// predicate; the columns are unqualified, so the statement's only seats
// row must be in scope as seats.
const seatFree = `(status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now()))`

// holdSeatsSQL holds a group of seats in one statement, all or nothing.
// The UPDATE claims every listed seat that is free (or held by an expired
// hold: lazy expiry); the INSERT records the hold with claimed = the number
// of rows the UPDATE changed, and the holds_all_claimed CHECK refuses a
// partial claim, which aborts the statement and undoes every seat it
// changed. The account's counter rises in the same statement, and its CHECK
// refuses passing the limit. Concurrent claims of one seat serialize on its
// row; the loser re-evaluates the WHERE against the winner's row and claims
// nothing. It returns the bands of the rows the UPDATE claimed (all of
// them, or the statement fails), so the seats are not looked up a second
// time; the core prices them at the event's bands (eventInfo.bands: they
// never change) instead of joining price_bands here, which was 6-7% of the
// statement's CPU (holdbench's pgbench of it, issue 14).
//
// Every write it makes is cheap by design (migration 00001 and 00009): the
// seat and account rows change only columns no index covers, on pages
// with room to spare (fillfactor), so both are HOT updates that touch no
// index; the hold row is the only new index entry.
//
// $1 event, $2 account, $3 hold id, $4 quantity (the deduplicated seat
// count), $5 ticket limit, $6 hold seconds, $7 seat ids (sorted, distinct).
const holdSeatsSQL = accountCTE + `, held AS (
    UPDATE seats
       SET status = 'HELD', hold_id = $3, hold_until = now() + make_interval(secs => $6),
           booking_id = NULL, version = version + 1
     WHERE event_id = $1 AND seat_id = ANY ($7::text[])
       AND ` + seatFree + `
    RETURNING seat_id, band
)
INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, expires_at)
SELECT $3, $1, $2, coalesce(array_agg(seat_id ORDER BY seat_id), '{}'), $4, count(*),
       now() + make_interval(secs => $6)
  FROM held
RETURNING version, expires_at, created_at, (SELECT array_agg(band) FROM held)`

// accountCTE adds the hold's tickets to the account's counter and the hold
// to the account's list of holds (so a settle can find it by primary key
// once it has lapsed: settleQuotaSQL); the counter's CHECK refuses passing the
// limit. $1 event, $2 account, $3 hold id, $4 tickets, $5 limit.
const accountCTE = `
WITH account AS (
    INSERT INTO account_tickets AS a (event_id, account, tickets, max_tickets, holds)
    VALUES ($1, $2, $4, $5, ARRAY[$3::uuid])
    ON CONFLICT (event_id, account) DO UPDATE
       SET tickets = a.tickets + EXCLUDED.tickets, max_tickets = EXCLUDED.max_tickets, holds = a.holds || EXCLUDED.holds
)`

// holdGASQL is holdSeatsSQL for general admission: the counter's WHERE
// refuses to go below zero, and a refused decrement claims nothing.
const holdGASQL = accountCTE + `, ga AS (
    UPDATE ga_inventory SET remaining = remaining - $4
     WHERE event_id = $1 AND remaining >= $4
    RETURNING remaining
)
INSERT INTO holds (id, event_id, account, quantity, claimed, expires_at)
SELECT $3, $1, $2, $4, $4 * count(*), now() + make_interval(secs => $6)
  FROM ga
RETURNING version, expires_at, created_at,
          coalesce((SELECT b.price_paise * $4 FROM ga_inventory g JOIN price_bands b ON b.event_id = g.event_id AND b.code = g.band
            WHERE g.event_id = $1), 0)::bigint`

// takenSeatsSQL names, after a failed hold, the seats that are not free:
// held, booked, or not in the event at all.
const takenSeatsSQL = `
SELECT want.id, s.seat_id IS NULL
  FROM unnest($2::text[]) AS want (id)
  LEFT JOIN seats s ON s.event_id = $1 AND s.seat_id = want.id
 WHERE s.seat_id IS NULL
    OR NOT ` + seatFree + `
 ORDER BY want.id`

// CreateHold holds seats, best-available seats or GA tickets for an account.
// It fails with ESeatsTaken (naming the seats, but for best-available), ESoldOut, ELimitExceeded,
// ENotFound (no event), EInvalid (a request that does not fit the event) or
// EUnavailable.
func (db *DB) CreateHold(ctx context.Context, p core.HoldParams) (*core.Hold, error) {
	if err := p.Request.Validate(); err != nil {
		return nil, err
	}
	ev, err := db.eventInfo(ctx, p.EventID)
	if err != nil {
		return nil, err
	}
	if ev.status != core.ShowPublished {
		return nil, core.Errorf(core.ENotOnSale, "event %d is %s: no seats are sold", p.EventID, ev.status).With("show_status", ev.status)
	}
	limit := ev.maxPerAccount
	if p.Limit > 0 && p.Limit < limit {
		limit = p.Limit
	}
	r := p.Request
	if n := max(len(r.Seats), r.Quantity, bestCount(r)); n > limit {
		// Refused before any seat is looked at: no account may pass it.
		return nil, core.Errorf(core.ELimitExceeded, "at most %d tickets per account: asked for %d", limit, n).
			With("limit", limit)
	}
	switch {
	case ev.seated && r.Quantity > 0:
		return nil, core.Errorf(core.EInvalid, "event %d has numbered seats: ask for seats or best_available", p.EventID)
	case !ev.seated && r.Quantity == 0:
		return nil, core.Errorf(core.EInvalid, "event %d is general admission: ask for a quantity", p.EventID)
	case r.BestAvailable != nil:
		return db.holdBestAvailable(ctx, p, ev, limit)
	case r.Quantity > 0:
		return db.retryOverLimit(ctx, p, r.Quantity, limit, func() (*core.Hold, error) { return db.holdGA(ctx, p, ev, limit) })
	}
	seats := slices.Clone(r.Seats)
	slices.Sort(seats)
	seats = slices.Compact(seats)
	if err := db.refuse(p.EventID, seats); err != nil { // refuse.go: a hold that cannot win costs no statement
		return nil, err
	}
	return db.retryOverLimit(ctx, p, len(seats), limit, func() (*core.Hold, error) { return db.holdSeats(ctx, p, ev, limit, seats, true) })
}

func bestCount(r core.HoldRequest) int {
	if r.BestAvailable == nil {
		return 0
	}
	return r.BestAvailable.Count
}

// retryOverLimit runs hold, and once more after a limit refusal when
// settling the account made room. The limit is lazy (sweepSQL): the
// tickets of an account's expired holds stay in its counter until its
// next refusal, and that refusal is the moment they must not count. So a
// refused hold settles the account (settleQuotaSQL: every expired hold's
// tickets back, exactly once) and is asked again when the counter after
// the settle leaves room for it, whoever returned the tickets (this
// settle, or another hold's of the same account a moment before: settle
// reads the counter afresh when it returned nothing itself). A refusal's
// message names the counter after the settle. asked is the hold's
// tickets, limit the account's.
func (db *DB) retryOverLimit(ctx context.Context, p core.HoldParams, asked, limit int, hold func() (*core.Hold, error)) (*core.Hold, error) {
	h, err := hold()
	if core.ErrorCode(err) != core.ELimitExceeded {
		return h, err
	}
	_, have, err := db.settleQuota(ctx, p.EventID, p.Account)
	if err != nil {
		return nil, err
	}
	if have+asked > limit {
		return nil, limitError(limit, have, asked)
	}
	h, err = hold()
	if core.ErrorCode(err) == core.ELimitExceeded {
		return nil, db.limitExceeded(ctx, p.EventID, p.Account, limit, asked)
	}
	return h, err
}

// holdSeats holds the named seats. A refusal because some are taken names
// them (one more statement) when name is set; best-available, which picked
// the seats itself and will pick again, needs no names (errPickedTaken).
func (db *DB) holdSeats(ctx context.Context, p core.HoldParams, ev eventInfo, limit int, seats []string, name bool) (*core.Hold, error) {
	h := &core.Hold{ID: newHoldID(), EventID: p.EventID, Account: p.Account, Seats: seats, Quantity: len(seats), Status: core.HoldActive}
	sent := time.Now() // before the database reads its clock (seatsHeld)
	// PostgreSQL does not promise the order in which one UPDATE locks its
	// rows; should two groups deadlock, the loser asks once more at once
	// (holdRetry) and gets the true answer instead of a spurious refusal.
	// The statement stays one autocommit statement at READ COMMITTED, not
	// inTx: a transaction around it would only hold the seats' row locks
	// for an extra round trip on the hottest path.
	var bands []string
	err := db.retry(ctx, holdRetry, "hold", func() error {
		return db.pool.QueryRow(ctx, holdSeatsSQL, p.EventID, p.Account, h.ID, len(seats), limit, ev.holdSeconds, seats).
			Scan(&h.Version, &h.ExpiresAt, &h.CreatedAt, &bands)
	}, "event", p.EventID)
	switch {
	case err == nil:
	case constraint(err) == "account_tickets_within_limit":
		return nil, errOverLimit(limit) // retryOverLimit settles the account and answers
	case constraint(err) == "holds_all_claimed" || core.ErrorCode(translate(err)) == core.ESeatsTaken:
		if !name {
			return nil, errPickedTaken()
		}
		return nil, db.seatsTaken(ctx, p.EventID, seats)
	default:
		return nil, translate(err)
	}
	h.AmountPaise = ev.price(bands)
	db.seatsHeld(p.EventID, seats, sent, ev.holdSeconds)
	db.seatsChanged(p.EventID, seats, false)
	h.EventStartsAt = ev.startsAt
	return h, nil
}

func (db *DB) holdGA(ctx context.Context, p core.HoldParams, ev eventInfo, limit int) (*core.Hold, error) {
	n := p.Request.Quantity
	h := &core.Hold{ID: newHoldID(), EventID: p.EventID, Account: p.Account, Seats: []string{}, Quantity: n, Status: core.HoldActive}
	// It takes the GA row, then the account row; a settle, a release or a
	// refused capture of the same account takes them the other way round:
	// the loser of that deadlock asks once more (holdRetry), as a seated
	// hold does.
	err := db.retry(ctx, holdRetry, "hold", func() error {
		return db.pool.QueryRow(ctx, holdGASQL, p.EventID, p.Account, h.ID, n, limit, ev.holdSeconds).
			Scan(&h.Version, &h.ExpiresAt, &h.CreatedAt, &h.AmountPaise)
	}, "event", p.EventID)
	switch constraint(err) {
	case "":
	case "holds_all_claimed":
		var remaining int
		if err := db.pool.QueryRow(ctx, gaRemainingSQL, p.EventID).Scan(&remaining); err != nil {
			return nil, translate(err)
		}
		return nil, core.Errorf(core.ESoldOut, "only %d tickets left", remaining).With("remaining", remaining)
	case "account_tickets_within_limit":
		return nil, errOverLimit(limit) // retryOverLimit settles the account and answers
	}
	if err != nil {
		return nil, translate(err)
	}
	h.EventStartsAt = ev.startsAt
	return h, nil
}

// gaRemainingSQL reads a GA event's tickets left, to tell a refused fan.
const gaRemainingSQL = `SELECT remaining FROM ga_inventory WHERE event_id = $1`

func (db *DB) seatsTaken(ctx context.Context, event int64, seats []string) error {
	rows, err := db.pool.Query(ctx, takenSeatsSQL, event, seats)
	if err != nil {
		return translate(err)
	}
	taken, unknown := []string{}, []string{}
	for rows.Next() {
		var id string
		var missing bool
		if err := rows.Scan(&id, &missing); err != nil {
			return translate(err)
		}
		if missing {
			unknown = append(unknown, id)
		} else {
			taken = append(taken, id)
		}
	}
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	e := core.Errorf(core.ESeatsTaken, "%d of the seats are no longer available", len(taken)+len(unknown)).
		With("seats", append(taken, unknown...))
	if len(unknown) > 0 {
		e.With("unknown_seats", unknown)
	}
	return e
}

// accountTicketsSQL reads an account's counter for an event, to tell a fan
// refused at the limit. It is read after a settle (retryOverLimit), so it
// counts the tickets the account holds or bought, and of its expired holds
// only one that lapsed since, or one that became owed during the settle
// and that others held through every run of it (settleTries).
const accountTicketsSQL = `SELECT tickets FROM account_tickets WHERE event_id = $1 AND account = $2`

func (db *DB) limitExceeded(ctx context.Context, event int64, account string, limit, asked int) error {
	var have int
	err := db.pool.QueryRow(ctx, accountTicketsSQL, event, account).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return translate(err)
	}
	return limitError(limit, have, asked)
}

func limitError(limit, have, asked int) error {
	return core.Errorf(core.ELimitExceeded, "at most %d tickets per account: you have %d and asked for %d", limit, have, asked).
		With("limit", limit).With("have", have)
}

// errOverLimit is a hold statement's refusal by the counter's CHECK,
// before retryOverLimit settles the account and words the answer.
func errOverLimit(limit int) error {
	return core.Errorf(core.ELimitExceeded, "at most %d tickets per account", limit).With("limit", limit)
}

// newHoldID returns a version 7 UUID (RFC 9562): 48 bits of Unix
// milliseconds, then 74 random bits. The random bits keep hold ids
// impossible to guess and never reused. The time prefix makes the holds
// primary key grow at its right edge, as the holds themselves do: a new
// hold's key, and the new key entry an end of a hold adds when it cannot
// be a HOT update (its page full), land on a few adjacent index pages
// instead of one random page each. With random (version 4) ids those index
// writes were most of a sweep's cost (before migration 00011 no end of a
// hold was HOT): the holds that expire together were made together.
func newHoldID() string {
	var b [16]byte
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err)
	}
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// holdSQL reads one hold by id, with its total at the event's band prices
// and the event's start (holdExtrasSQL); scanHold scans it. holdStateSQL
// reads the hold alone: extend and release check it first, at the
// instant of expiry, and fetch the extras only after they are done.
const (
	holdColumnsSQL = `h.id::text, h.event_id, h.account, h.seat_ids, h.quantity, h.status, h.version, h.expires_at, h.extended, h.created_at`
	holdExtrasSQL  = `
       CASE WHEN cardinality(h.seat_ids) > 0
            THEN (SELECT coalesce(sum(b.price_paise), 0) FROM seats s JOIN price_bands b ON b.event_id = s.event_id AND b.code = s.band
                   WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids))
            ELSE (SELECT b.price_paise * h.quantity FROM ga_inventory g JOIN price_bands b ON b.event_id = g.event_id AND b.code = g.band
                   WHERE g.event_id = h.event_id)
       END::bigint,
       (SELECT e.starts_at FROM events e WHERE e.id = h.event_id)`
	holdSQL           = `SELECT ` + holdColumnsSQL + `,` + holdExtrasSQL + ` FROM holds h WHERE h.id = $1`
	holdStateSQL      = `SELECT ` + holdColumnsSQL + `, NULL::bigint, NULL::timestamptz FROM holds h WHERE h.id = $1`
	holdOnlyExtrasSQL = `SELECT ` + holdExtrasSQL + ` FROM holds h WHERE h.id = $1`
)

// withExtras fills a hold's total and its event's start, for the answer
// to a change already committed: a failed read leaves them out rather
// than failing the change.
func (db *DB) withExtras(ctx context.Context, h *core.Hold) *core.Hold {
	var amount *int64
	var starts *time.Time
	if err := db.pool.QueryRow(ctx, holdOnlyExtrasSQL, h.ID).Scan(&amount, &starts); err != nil {
		return h
	}
	if amount != nil {
		h.AmountPaise = *amount
	}
	if starts != nil {
		h.EventStartsAt = *starts
	}
	return h
}

func scanHold(row pgx.Row) (*core.Hold, error) {
	var h core.Hold
	var amount *int64
	var starts *time.Time
	err := row.Scan(&h.ID, &h.EventID, &h.Account, &h.Seats, &h.Quantity, &h.Status, &h.Version, &h.ExpiresAt, &h.Extended, &h.CreatedAt,
		&amount, &starts)
	if amount != nil {
		h.AmountPaise = *amount
	}
	if starts != nil {
		h.EventStartsAt = *starts
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no such hold")
	}
	if err != nil {
		return nil, translate(err)
	}
	return &h, nil
}

// Hold returns a hold by id, or ENotFound (also for a malformed id).
func (db *DB) Hold(ctx context.Context, id string) (*core.Hold, error) {
	if !core.ValidUUID(id) {
		return nil, core.Errorf(core.ENotFound, "no such hold")
	}
	return scanHold(db.pool.QueryRow(ctx, holdSQL, id))
}

// endHoldSQL ends one hold and returns what it held: its seats (only those
// still under this hold id), the account's tickets (and takes the hold off
// the account's list: nothing is left to settle) and GA tickets. $1 hold,
// $2 required version (0: any), $3 new status (EXPIRED instead when the
// hold has lapsed: a lapsed seated hold stays ACTIVE in its row, migration
// 00012). The hold row is matched on
// id, version and ACTIVE status, so a stale caller for an ended hold H1
// changes nothing, and the seat rows are matched on hold id, so nothing
// touches a seat another hold H2 owns now, even one of the same account.
const endHoldSQL = `
WITH h AS (
    UPDATE holds SET status = CASE WHEN expires_at <= now() THEN 'EXPIRED' ELSE $3 END, version = version + 1, ended_at = now()
     WHERE id = $1 AND status = 'ACTIVE' AND ($2::bigint = 0 OR version = $2)
    RETURNING id, event_id, account, seat_ids, quantity, version, status
), freed AS (
    UPDATE seats s
       SET status = 'AVAILABLE', hold_id = NULL, hold_until = NULL, version = s.version + 1
      FROM h
     WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids) AND s.hold_id = h.id AND s.status = 'HELD'
    RETURNING s.seat_id
), account AS (
    UPDATE account_tickets a SET tickets = a.tickets - h.quantity, holds = array_remove(a.holds, h.id)
      FROM h WHERE a.event_id = h.event_id AND a.account = h.account
), ga AS (
    UPDATE ga_inventory g SET remaining = g.remaining + h.quantity
      FROM h WHERE g.event_id = h.event_id AND cardinality(h.seat_ids) = 0
)
SELECT h.version, h.status, h.event_id, coalesce((SELECT array_agg(seat_id) FROM freed), '{}') FROM h`

// ReleaseHold gives a hold's seats back to sale and the account its quota.
// A hold that has lapsed but is still ACTIVE in its row (a seated hold no
// sweep ends, or a GA hold not yet swept) is ended as EXPIRED, its quota
// returned as the settle would, and what is still under its id freed; the
// answer says EXPIRED, as the hold read before it did. Fails with
// ENotFound, EWrongEvent, EForbidden (not the owner), EVersionMismatch or
// EHoldNotActive.
func (db *DB) ReleaseHold(ctx context.Context, ref core.HoldRef) (*core.Hold, error) {
	h, err := db.ownedHold(ctx, ref)
	if err != nil {
		return nil, err
	}
	var freed []string
	var event int64
	err = db.pool.QueryRow(ctx, endHoldSQL, ref.ID, ref.Version, core.HoldReleased).Scan(&h.Version, &h.Status, &event, &freed)
	if errors.Is(err, pgx.ErrNoRows) {
		// Changed since we read it: report what it is now.
		return nil, db.notActive(ctx, ref.ID, ref.Version)
	}
	if err != nil {
		return nil, translate(err)
	}
	db.seatsChanged(event, freed, true)
	return db.withExtras(ctx, h), nil
}

// ownedHold loads the hold ref names and checks event, owner, version and
// status, in that order.
func (db *DB) ownedHold(ctx context.Context, ref core.HoldRef) (*core.Hold, error) {
	if !core.ValidUUID(ref.ID) {
		return nil, core.Errorf(core.ENotFound, "no such hold")
	}
	h, err := scanHold(db.pool.QueryRow(ctx, holdStateSQL, ref.ID))
	if err != nil {
		return nil, err
	}
	switch {
	case ref.EventID != 0 && h.EventID != ref.EventID:
		return nil, core.Errorf(core.EWrongEvent, "hold %s is for event %d, not %d", ref.ID, h.EventID, ref.EventID)
	case h.Account != ref.Account:
		return nil, core.Errorf(core.EForbidden, "hold %s belongs to another account", ref.ID)
	case ref.Version != 0 && h.Version != ref.Version:
		return nil, core.Errorf(core.EVersionMismatch, "hold %s is at version %d, not %d", ref.ID, h.Version, ref.Version).
			With("version", h.Version)
	case h.Status != core.HoldActive:
		return nil, core.Errorf(core.EHoldNotActive, "hold %s is %s", ref.ID, h.Status).With("hold_status", h.Status)
	}
	return h, nil
}

func (db *DB) notActive(ctx context.Context, id string, version int64) error {
	h, err := db.Hold(ctx, id)
	if err != nil {
		return err
	}
	if version != 0 && h.Version != version {
		return core.Errorf(core.EVersionMismatch, "hold %s is at version %d, not %d", id, h.Version, version).With("version", h.Version)
	}
	return core.Errorf(core.EHoldNotActive, "hold %s is %s", id, h.Status).With("hold_status", h.Status)
}

// extendSQL adds the extension (core.ExtendBy unless configured) to a valid, never-extended hold and to each of its
// seats, matched on hold id and unexpired. $1 hold, $2 version, $3 seconds.
const extendSQL = `
WITH h AS (
    UPDATE holds
       SET expires_at = expires_at + make_interval(secs => $3), extended = true, version = version + 1
     WHERE id = $1 AND version = $2 AND status = 'ACTIVE' AND NOT extended AND expires_at > now()
    RETURNING id, event_id, seat_ids, expires_at, version
), seats AS (
    UPDATE seats s SET hold_until = h.expires_at, version = s.version + 1
      FROM h
     WHERE s.event_id = h.event_id AND s.seat_id = ANY (h.seat_ids) AND s.hold_id = h.id
       AND s.status = 'HELD' AND s.hold_until > now()
    RETURNING s.seat_id
)
SELECT h.version, h.expires_at, cardinality(h.seat_ids), (SELECT count(*) FROM seats) FROM h`

// ExtendHold extends a hold once (by core.ExtendBy unless configured), only while it is valid and
// still owns every one of its seats. Fails with EHoldExpired,
// EAlreadyExtended, EHoldNotActive, EForbidden, EWrongEvent, EVersionMismatch
// or ENotFound.
func (db *DB) ExtendHold(ctx context.Context, ref core.HoldRef) (*core.Hold, error) {
	id := ref.ID
	h, err := db.ownedHold(ctx, ref)
	if err != nil {
		return nil, err
	}
	switch {
	case h.Extended:
		return nil, core.Errorf(core.EAlreadyExtended, "hold %s was extended already", id)
	case !time.Now().Before(h.ExpiresAt):
		return nil, core.Errorf(core.EHoldExpired, "hold %s expired at %s", id, h.ExpiresAt.Format(time.RFC3339))
	}
	// The new version and expiry go into locals and reach h only after the
	// commit: inTx may run fn again, and a retry must still ask for the
	// version read above, not one an aborted try scanned.
	var version int64
	var expires time.Time
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		var want, got int
		err := tx.QueryRow(ctx, extendSQL, id, h.Version, db.extend.Seconds()).Scan(&version, &expires, &want, &got)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.Errorf(core.EHoldExpired, "hold %s is no longer valid", id)
		}
		if err != nil {
			return err
		}
		if got != want {
			// A seat left this hold (it cannot while the hold is valid, but
			// the check costs nothing): extend nothing.
			return core.Errorf(core.EHoldExpired, "hold %s no longer owns all its seats", id)
		}
		return nil
	})
	if err != nil {
		return nil, translate(err)
	}
	h.Version, h.ExpiresAt, h.Extended = version, expires, true
	return db.withExtras(ctx, h), nil
}
