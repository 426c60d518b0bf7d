package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onsale/onsale/core"
)

// gateDay is the one rule for the gate's "events of the day", shared by
// the online redemption and the offline pack: an event of venue v (aliases
// e and v) that starts from core.GateDayBefore before at to the end of at's
// day in the venue's zone, or to core.GateDayAhead after at when that is
// later (a show at 00:05 is scanned from 23:00). at is a placeholder ($n)
// of a timestamptz.
func gateDay(at string) string {
	return fmt.Sprintf(`(e.starts_at >= %[1]s - interval '%[2]d seconds'
   AND e.starts_at < greatest((date_trunc('day', %[1]s AT TIME ZONE v.timezone) + interval '1 day') AT TIME ZONE v.timezone,
                              %[1]s + interval '%[3]d seconds'))`,
		at, int64(core.GateDayBefore/time.Second), int64(core.GateDayAhead/time.Second))
}

// redeemSQL checks a ticket in, once: the ticket must exist under its
// booking and event, the booking must be CONFIRMED and captured, and the
// event must be at the staff's venue; then the insert of its checkins row
// is the redemption, when the event is one of the gate's events of the
// day at the scan's time (gateDay), or, for an offline scan synced later,
// at the sync's time: the scanner already let the fan in from its pack,
// and a scanner clock behind by a day must not leave the ticket unused
// for another gate. ON CONFLICT DO NOTHING on the row's keys makes it
// exactly once: of two gates scanning the ticket at the same instant, one
// inserts and the other waits for that insert to commit and inserts
// nothing. The row returned tells the caller what it found (no row: no
// such ticket) and whether this statement inserted.
// $1 booking, $2 n, $3 event, $4 venue, $5 gate, $6 staff, $7 scanned at, $8 offline,
// $9 scan id (empty: none), $10 the client's time (NULL none).
var redeemSQL = `
WITH t AS (
  SELECT t.id, t.booking_id, t.n, t.event_id, coalesce(t.seat_id, '') AS seat, e.name AS event_name,
         b.status = 'CONFIRMED' AND b.captured_at IS NOT NULL AS valid, e.venue_id, v.timezone,
         e.starts_at, (` + gateDay("$7::timestamptz") + `
            OR ($8::boolean AND ` + gateDay("now()") + `)) AS today
    FROM tickets t
    JOIN bookings b ON b.id = t.booking_id
    JOIN events e ON e.id = t.event_id
    JOIN venues v ON v.id = e.venue_id
   WHERE t.booking_id = $1 AND t.n = $2 AND t.event_id = $3
), ins AS (
  INSERT INTO checkins (booking_id, n, ticket_id, event_id, gate, staff, scanned_at, offline, scan_id, client_at)
  SELECT booking_id, n, id, event_id, $5, $6, $7, $8, NULLIF($9, '')::uuid, $10 FROM t WHERE valid AND venue_id = $4 AND today
  ON CONFLICT DO NOTHING
  RETURNING scanned_at
)
SELECT t.seat, t.event_name, t.valid, t.venue_id, t.timezone, t.starts_at, t.today, ins.scanned_at IS NOT NULL
  FROM t LEFT JOIN ins ON true`

// checkinSQL reads a ticket's check-in. $1 booking, $2 n.
const checkinSQL = `
SELECT c.gate, c.staff, c.scanned_at, c.offline, v.timezone, coalesce(c.scan_id::text, '')
  FROM checkins c JOIN events e ON e.id = c.event_id JOIN venues v ON v.id = e.venue_id
 WHERE c.booking_id = $1 AND c.n = $2`

// Redeem implements core.CheckIns: one statement decides, and only when it
// inserted nothing does a second read say why.
func (db *DB) Redeem(ctx context.Context, s core.Scan) (*core.CheckIn, error) {
	c := &core.CheckIn{Ticket: core.TicketRef(s.Booking, s.N), Event: s.Event, Booking: s.Booking,
		Gate: s.Staff.Gate, Staff: core.StaffPrefix + s.Staff.Name, At: s.At.Truncate(time.Microsecond), Offline: s.Offline}
	var valid, today, inserted bool
	var venue int64
	var starts time.Time
	var clientAt *time.Time
	if !s.ClientAt.IsZero() {
		clientAt = &s.ClientAt
	}
	err := db.pool.QueryRow(ctx, redeemSQL, s.Booking, s.N, s.Event, s.Staff.Venue, s.Staff.Gate, c.Staff, c.At, s.Offline, s.ScanID, clientAt).
		Scan(&c.Seat, &c.EventName, &valid, &venue, &c.Timezone, &starts, &today, &inserted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, core.Errorf(core.ETicketRevoked, "ticket %s is not a ticket of this event any more (withdrawn)", c.Ticket)
	case err != nil:
		return nil, translate(fmt.Errorf("redeem ticket: %w", err))
	case inserted:
		return c, nil
	case !valid:
		return nil, core.Errorf(core.ETicketRevoked, "ticket %s is revoked: its booking was cancelled or refunded", c.Ticket).With("ticket", c.Ticket)
	case venue != s.Staff.Venue:
		return nil, core.Errorf(core.EWrongVenue, "ticket %s is for %s, at another venue", c.Ticket, c.EventName).With("ticket", c.Ticket)
	case !today:
		if loc, err := time.LoadLocation(c.Timezone); err == nil {
			starts = starts.In(loc)
		}
		return nil, core.Errorf(core.EWrongEvent, "ticket %s is for %s on %s, not one of today's events here", c.Ticket, c.EventName,
			starts.Format("2 Jan 15:04")).With("ticket", c.Ticket).With("starts_at", starts.Format(time.RFC3339))
	}
	first := &core.CheckIn{Ticket: c.Ticket, Event: c.Event, Booking: c.Booking, Seat: c.Seat, EventName: c.EventName}
	var scanID string
	if err := db.pool.QueryRow(ctx, checkinSQL, s.Booking, s.N).Scan(&first.Gate, &first.Staff, &first.At, &first.Offline, &first.Timezone, &scanID); err != nil {
		return nil, translate(fmt.Errorf("read check-in: %w", err))
	}
	// The same scan sent again (an online answer lost after the commit, a
	// sync resent): it is this scan's own row, not a duplicate. Without a
	// scan id (an older scanner), the same offline scan synced again is
	// known by its gate, staff and time.
	if s.ScanID != "" && strings.EqualFold(scanID, s.ScanID) && first.Gate == c.Gate && first.Staff == c.Staff ||
		s.ScanID == "" && s.Offline && first.Offline && first.Gate == c.Gate && first.Staff == c.Staff && first.At.Equal(c.At) {
		return first, nil
	}
	return nil, first.AlreadyUsed()
}

// Offline pack statements. $1 venue, $2 now.
var gateEventsSQL = `SELECT e.id, e.name, e.starts_at FROM events e JOIN venues v ON v.id = e.venue_id
 WHERE e.venue_id = $1 AND ` + gateDay("$2::timestamptz") + ` ORDER BY e.starts_at, e.id`

const (
	gateVenueSQL = `SELECT id, name, city, timezone FROM venues WHERE id = $1`
	// $1 event ids.
	gateRevokedSQL = `
SELECT t.booking_id, t.n FROM bookings b JOIN tickets t ON t.booking_id = b.id
 WHERE b.event_id = ANY($1) AND NOT (b.status = 'CONFIRMED' AND b.captured_at IS NOT NULL)
 ORDER BY 1, 2`
	// $2 recorded since (-infinity: all).
	gateUsedSQL = `
SELECT booking_id, n, event_id, gate, staff, scanned_at, offline FROM checkins
 WHERE event_id = ANY($1) AND recorded_at >= $2 ORDER BY booking_id, n`
)

// Offline implements core.CheckIns.
func (db *DB) Offline(ctx context.Context, venue int64, now, since time.Time) (*core.OfflinePack, error) {
	p := &core.OfflinePack{AsOf: now, Events: []core.GateEvent{}, Revoked: []string{}, Used: []core.CheckIn{}}
	from := pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	if !since.IsZero() {
		p.Since = &since
		from = pgtype.Timestamptz{Time: since.Add(-core.GateSinceOverlap), Valid: true}
	}
	err := db.pool.QueryRow(ctx, gateVenueSQL, venue).Scan(&p.Venue.ID, &p.Venue.Name, &p.Venue.City, &p.Venue.Timezone)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no venue %d", venue)
	} else if err != nil {
		return nil, translate(fmt.Errorf("gate venue: %w", err))
	}
	rows, _ := db.pool.Query(ctx, gateEventsSQL, venue, now)
	p.Events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.GateEvent, error) {
		var e core.GateEvent
		return e, r.Scan(&e.ID, &e.Name, &e.StartsAt)
	})
	if err != nil {
		return nil, translate(fmt.Errorf("gate events: %w", err))
	}
	ids := make([]int64, len(p.Events))
	for i, e := range p.Events {
		ids[i] = e.ID
	}
	rows, _ = db.pool.Query(ctx, gateRevokedSQL, ids)
	p.Revoked, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var b int64
		var n int
		err := r.Scan(&b, &n)
		return core.TicketRef(b, n), err
	})
	if err != nil {
		return nil, translate(fmt.Errorf("gate revoked: %w", err))
	}
	rows, _ = db.pool.Query(ctx, gateUsedSQL, ids, from)
	p.Used, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (core.CheckIn, error) {
		var c core.CheckIn
		var n int
		err := r.Scan(&c.Booking, &n, &c.Event, &c.Gate, &c.Staff, &c.At, &c.Offline)
		c.Ticket = core.TicketRef(c.Booking, n)
		return c, err
	})
	if err != nil {
		return nil, translate(fmt.Errorf("gate used: %w", err))
	}
	return p, nil
}
