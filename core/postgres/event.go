package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
)

// createVenueSQL creates the layout's venue unless it exists (venues are
// keyed by name and city, so every event on a layout shares one);
// venueSQL reads the one that exists. A venue's time zone never changes
// under its shows: their dates and times are read in it.
const (
	createVenueSQL = `
INSERT INTO venues (name, city, timezone) VALUES ($1, $2, $3)
ON CONFLICT (name, city) DO NOTHING
RETURNING id`
	venueSQL = `SELECT id, timezone FROM venues WHERE name = $1 AND city = $2`
)

const createEventSQL = `
INSERT INTO events (venue_id, name, kind, starts_at, onsale_at, seated, capacity, max_per_account, hold_seconds, status, series_id, layout_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`

const createBandSQL = `INSERT INTO price_bands (event_id, code, name, price_paise) VALUES ($1, $2, $3, $4)`

// createGASQL opens a GA event's counter full: remaining = capacity.
const createGASQL = `INSERT INTO ga_inventory (event_id, band, capacity, remaining) VALUES ($1, $2, $3, $3)`

// analyzeSeatsSQL refreshes the planner's statistics after a bulk load.
// Fresh statistics keep the hold UPDATE on the primary key index, which
// visits (and locks) a group's seats in key order, so overlapping groups
// queue instead of deadlocking.
const analyzeSeatsSQL = `ANALYZE seats`

// seatColumns are the columns COPY fills, in the order of each seat's row.
var seatColumns = []string{"event_id", "seat_id", "pos", "section", "row_label", "row_no", "number", "band"}

// CreateEvent creates an event on its layout's venue (created when new),
// published, with its price bands and either one row per seat or a GA
// counter, in one transaction: the demo's seed. Operators create shows
// with CreateShows (show.go).
func (db *DB) CreateEvent(ctx context.Context, s layout.EventSpec) (int64, error) {
	l := s.Layout
	if l == nil {
		return 0, core.Errorf(core.EInvalid, "event %q has no layout", s.Name)
	}
	if s.MaxPerAccount == 0 {
		s.MaxPerAccount = 6
	}
	if s.HoldSeconds == 0 {
		s.HoldSeconds = 480
	}
	var id int64
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		venue, err := venueID(ctx, tx, l.Venue)
		if err != nil {
			return err
		}
		bands := make([]core.PriceBand, len(l.Bands))
		for i, b := range l.Bands {
			bands[i] = core.PriceBand{Code: b.Code, Name: b.Name, PricePaise: b.PricePaise}
		}
		id, err = insertEvent(ctx, tx, newEvent{venue: venue, name: s.Name, kind: s.Kind, startsAt: s.StartsAt, onsaleAt: s.OnsaleAt,
			maxPerAccount: s.MaxPerAccount, holdSeconds: s.HoldSeconds, status: core.ShowPublished, bands: bands}, l)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, analyzeSeatsSQL)
		return err
	})
	if err != nil {
		return 0, translate(fmt.Errorf("create event %q: %w", s.Name, err))
	}
	return id, nil
}

// venueID finds or creates a layout's venue (by name and city). A layout
// naming another time zone than its existing venue's is refused
// (EConflict); one naming none takes the venue's.
func venueID(ctx context.Context, tx pgx.Tx, v layout.Venue) (int64, error) {
	tz := v.Timezone
	if tz == "" {
		tz = "Asia/Kolkata"
	}
	var id int64
	err := tx.QueryRow(ctx, createVenueSQL, v.Name, v.City, tz).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		var have string
		if err := tx.QueryRow(ctx, venueSQL, v.Name, v.City).Scan(&id, &have); err != nil {
			return 0, fmt.Errorf("venue: %w", err)
		}
		if v.Timezone != "" && v.Timezone != have {
			return 0, core.Errorf(core.EConflict, "%s, %s is in %s, not %s: its shows' times are read in it", v.Name, v.City, have, v.Timezone)
		}
		return id, nil
	}
	if err != nil {
		return 0, fmt.Errorf("venue: %w", err)
	}
	return id, nil
}

// newEvent is a show's row.
type newEvent struct {
	venue                      int64
	name, kind, status         string
	startsAt, onsaleAt         time.Time
	maxPerAccount, holdSeconds int
	series, layout             *int64
	bands                      []core.PriceBand
}

// insertEvent writes one show on layout l in tx: its row, its priced
// bands, and one row per seat (COPY: 40,000 rows take well under a
// second) or its GA counter. The caller runs analyzeSeatsSQL once after
// its last show.
func insertEvent(ctx context.Context, tx pgx.Tx, e newEvent, l *layout.Layout) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, createEventSQL, e.venue, e.name, e.kind, e.startsAt, e.onsaleAt, l.Seated(), l.Capacity(),
		e.maxPerAccount, e.holdSeconds, e.status, e.series, e.layout).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("event: %w", err)
	}
	for _, b := range e.bands {
		if _, err := tx.Exec(ctx, createBandSQL, id, b.Code, b.Name, b.PricePaise); err != nil {
			return 0, fmt.Errorf("band %s: %w", b.Code, err)
		}
	}
	if !l.Seated() {
		_, err := tx.Exec(ctx, createGASQL, id, l.GeneralAdmission.Band, l.GeneralAdmission.Capacity)
		return id, err
	}
	seats := l.Seats()
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"seats"}, seatColumns,
		pgx.CopyFromSlice(len(seats), func(i int) ([]any, error) {
			s := seats[i]
			return []any{id, s.ID, s.Pos, s.Section, s.Row, s.RowNo, s.Number, s.Band}, nil
		}))
	if err != nil {
		return 0, fmt.Errorf("seats: %w", err)
	}
	return id, nil
}

// eventColumns reads events with their venue and price bands (dearest
// first); scanEvent scans a row of it. eventsSQL and eventSQL add the WHERE.
const eventColumns = `
SELECT e.id, e.name, e.kind, e.starts_at, e.onsale_at, e.seated, e.capacity, e.max_per_account, e.hold_seconds,
       e.status, coalesce(e.series_id, 0), e.cancel_reason, v.id, v.name, v.city, v.timezone,
       coalesce((SELECT json_agg(json_build_object('code', b.code, 'name', b.name, 'price_paise', b.price_paise)
                                 ORDER BY b.price_paise DESC)
                   FROM price_bands b WHERE b.event_id = e.id), '[]')
  FROM events e JOIN venues v ON v.id = e.venue_id`

func scanEvent(row pgx.Row) (*core.Event, error) {
	var e core.Event
	err := row.Scan(&e.ID, &e.Name, &e.Kind, &e.StartsAt, &e.OnsaleAt, &e.Seated, &e.Capacity, &e.MaxPerAccount, &e.HoldSeconds,
		&e.Status, &e.SeriesID, &e.CancelReason, &e.Venue.ID, &e.Venue.Name, &e.Venue.City, &e.Venue.Timezone, &e.Bands)
	return &e, err
}

// The catalog's filters: each NULL parameter matches everything; the date
// is compared in the venue's zone, so a 23:30 show in Mumbai is on the day
// Mumbai sees. $1 city (any case), $2 date, $3 kind, $4 statuses, $5 now,
// $6 and $7 the cursor (start, id; NULL: the first page), $8 the page
// size plus one (the extra row says there is a next page).
const catalogWhere = `
 WHERE e.status = ANY($4::text[])
   AND ($1::text IS NULL OR lower(v.city) = lower($1))
   AND ($2::date IS NULL OR (e.starts_at AT TIME ZONE v.timezone)::date = $2::date)
   AND ($3::text IS NULL OR e.kind = $3)`

// upcomingSQL lists shows not yet started, soonest first; pastSQL shows
// that have started, latest first.
const (
	upcomingSQL = eventColumns + catalogWhere + `
   AND e.starts_at >= $5
   AND ($6::timestamptz IS NULL OR (e.starts_at, e.id) > ($6, $7::bigint))
 ORDER BY e.starts_at, e.id
 LIMIT $8`
	pastSQL = eventColumns + catalogWhere + `
   AND e.starts_at < $5
   AND ($6::timestamptz IS NULL OR (e.starts_at, e.id) < ($6, $7::bigint))
 ORDER BY e.starts_at DESC, e.id DESC
 LIMIT $8`
)

const eventSQL = eventColumns + ` WHERE e.id = $1`

// CatalogStatuses are the statuses a fan's catalog lists.
var CatalogStatuses = []string{core.ShowPublished, core.ShowClosed}

// Events lists one page of the shows matching f (core.EventFilter).
func (db *DB) Events(ctx context.Context, f core.EventFilter) (*core.EventPage, error) {
	var date *string
	if !f.Date.IsZero() {
		d := f.Date.Format(time.DateOnly)
		date = &d
	}
	if f.Limit <= 0 {
		f.Limit = core.DefaultPage
	}
	f.Limit = min(f.Limit, core.MaxPage)
	if f.Statuses == nil {
		f.Statuses = CatalogStatuses
	}
	if f.Now.IsZero() {
		f.Now = time.Now()
	}
	var after *time.Time
	if !f.After.IsZero() {
		after = &f.After.StartsAt
	}
	query := upcomingSQL
	if f.Past {
		query = pastSQL
	}
	rows, err := db.reads.Query(ctx, query, nullable(f.City), date, nullable(f.Kind), f.Statuses, f.Now, after, f.After.ID, f.Limit+1)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	page := &core.EventPage{Events: []core.Event{}}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, translate(err)
		}
		page.Events = append(page.Events, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	if len(page.Events) > f.Limit {
		page.Events = page.Events[:f.Limit]
		last := page.Events[f.Limit-1]
		page.Next = core.Cursor{StartsAt: last.StartsAt, ID: last.ID}.Encode()
	}
	return page, nil
}

// Event returns one event, or ENotFound.
func (db *DB) Event(ctx context.Context, id int64) (*core.Event, error) {
	e, err := scanEvent(db.reads.QueryRow(ctx, eventSQL, id))
	if err == pgx.ErrNoRows {
		return nil, core.Errorf(core.ENotFound, "no event %d", id)
	}
	if err != nil {
		return nil, translate(err)
	}
	return e, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// eventInfo is what the hold path needs to know about an event. It changes
// rarely, so it is cached for eventTTL instead of read on every hold.
type eventInfo struct {
	seated        bool
	maxPerAccount int
	holdSeconds   int
	startsAt      time.Time
	status        string
	bands         map[string]int64 // price in paise by band code
	fetched       time.Time
}

// price is what seats of the given bands cost, one band per seat. A band
// the event does not have costs nothing, as the join holdSeatsSQL had
// before priced it: a seat's band is always one of its event's (both are
// written by the one transaction that creates the event).
func (ei eventInfo) price(bands []string) int64 {
	var sum int64
	for _, b := range bands {
		sum += ei.bands[b]
	}
	return sum
}

const eventTTL = 5 * time.Second

// eventInfoSQL reads the event and its price bands in one snapshot. Prices
// and limits change only until core.EditFreeze before the sale opens (far
// longer than eventTTL), so a cached copy prices holds as well as the
// table does. The status changes at any time: a show closed or cancelled
// stops taking holds on this core at once (forget) and on the others
// within eventTTL.
const eventInfoSQL = `
SELECT seated, max_per_account, hold_seconds, starts_at, status,
       coalesce((SELECT array_agg(code ORDER BY code) FROM price_bands WHERE event_id = e.id), '{}'),
       coalesce((SELECT array_agg(price_paise ORDER BY code) FROM price_bands WHERE event_id = e.id), '{}')
  FROM events e WHERE id = $1`

func (db *DB) eventInfo(ctx context.Context, id int64) (eventInfo, error) {
	now := time.Now()
	db.mu.Lock()
	ei, ok := db.events[id]
	db.mu.Unlock()
	if ok && now.Sub(ei.fetched) < eventTTL {
		return ei, nil
	}
	var codes []string
	var prices []int64
	err := db.pool.QueryRow(ctx, eventInfoSQL, id).
		Scan(&ei.seated, &ei.maxPerAccount, &ei.holdSeconds, &ei.startsAt, &ei.status, &codes, &prices)
	if err == pgx.ErrNoRows {
		return ei, core.Errorf(core.ENotFound, "no event %d", id)
	}
	if err != nil {
		return ei, translate(err)
	}
	ei.bands = make(map[string]int64, len(codes))
	for i, c := range codes {
		ei.bands[c] = prices[i]
	}
	ei.fetched = now
	db.mu.Lock()
	db.events[id] = ei
	db.mu.Unlock()
	return ei, nil
}

// forget drops the cached facts of event id, after this core changed them.
func (db *DB) forget(id int64) {
	db.mu.Lock()
	delete(db.events, id)
	db.mu.Unlock()
}

// resetCatalogSQL empties the catalog and the holds on it (the seed
// command's -reset). Bookings, payments and tickets are records of money
// and are left alone.
const resetCatalogSQL = `TRUNCATE venues, events, price_bands, seats, ga_inventory, holds, account_tickets`

// ResetCatalog deletes every venue, event, seat and hold (for the demo's
// seed -reset; never called by the core).
func (db *DB) ResetCatalog(ctx context.Context) error {
	_, err := db.pool.Exec(ctx, resetCatalogSQL)
	return translate(err)
}

// eventIDSQL finds an event by name and start: the demo catalog's identity
// of an event, so seeding twice creates nothing twice.
const eventIDSQL = `SELECT id FROM events WHERE name = $1 AND starts_at = $2 ORDER BY id LIMIT 1`

// EventID returns the id of the event with this name and start, or 0 when
// there is none.
func (db *DB) EventID(ctx context.Context, name string, startsAt time.Time) (int64, error) {
	var id int64
	err := db.pool.QueryRow(ctx, eventIDSQL, name, startsAt).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, translate(err)
}
