package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
)

// Operators' layouts and shows (core/show.go has the rules). Every change
// writes its audit entry in its own transaction.

const importLayoutSQL = `
INSERT INTO layouts (venue_id, name, doc, seated, capacity, created_by) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (venue_id, name) DO NOTHING
RETURNING id, created_at`

// ImportLayout stores a validated layout as name on its venue (created
// when new), or EConflict when the venue has a layout of that name.
func (db *DB) ImportLayout(ctx context.Context, name string, l *layout.Layout, by core.Actor) (*core.VenueLayout, error) {
	doc, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("import layout: %w", err)
	}
	vl := &core.VenueLayout{Name: name, Seated: l.Seated(), Capacity: l.Capacity(), Bands: bandsOf(l), CreatedBy: by.Operator}
	err = db.inTx(ctx, func(tx pgx.Tx) error {
		venue, err := venueID(ctx, tx, l.Venue)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, importLayoutSQL, venue, name, doc, l.Seated(), l.Capacity(), by.Operator).Scan(&vl.ID, &vl.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return core.Errorf(core.EConflict, "%s, %s has a layout named %q: import under another name", l.Venue.Name, l.Venue.City, name)
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT id, name, city, timezone FROM venues WHERE id = $1`, venue).
			Scan(&vl.Venue.ID, &vl.Venue.Name, &vl.Venue.City, &vl.Venue.Timezone); err != nil {
			return err
		}
		return audit(ctx, tx, by, "layout.import", "layout:"+strconv.FormatInt(vl.ID, 10), nil, vl)
	})
	if err != nil {
		return nil, translate(err)
	}
	return vl, nil
}

func bandsOf(l *layout.Layout) []core.PriceBand {
	bands := make([]core.PriceBand, len(l.Bands))
	for i, b := range l.Bands {
		bands[i] = core.PriceBand{Code: b.Code, Name: b.Name, PricePaise: b.PricePaise}
	}
	return bands
}

const layoutColumns = `
SELECT l.id, l.name, l.seated, l.capacity, l.created_at, l.created_by, l.doc,
       v.id, v.name, v.city, v.timezone
  FROM layouts l JOIN venues v ON v.id = l.venue_id`

func scanLayout(row pgx.Row) (*core.VenueLayout, *layout.Layout, error) {
	var vl core.VenueLayout
	var doc []byte
	err := row.Scan(&vl.ID, &vl.Name, &vl.Seated, &vl.Capacity, &vl.CreatedAt, &vl.CreatedBy, &doc,
		&vl.Venue.ID, &vl.Venue.Name, &vl.Venue.City, &vl.Venue.Timezone)
	if err != nil {
		return nil, nil, err
	}
	l, err := layout.ParseBytes(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("layout %d as stored: %w", vl.ID, err)
	}
	vl.Bands = bandsOf(l)
	return &vl, l, nil
}

// VenueLayout returns an imported layout and its document, or ENotFound.
func (db *DB) VenueLayout(ctx context.Context, id int64) (*core.VenueLayout, *layout.Layout, error) {
	vl, l, err := scanLayout(db.pool.QueryRow(ctx, layoutColumns+` WHERE l.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, core.Errorf(core.ENotFound, "no layout %d", id)
	}
	if err != nil {
		return nil, nil, translate(err)
	}
	return vl, l, nil
}

// VenueLayouts lists the imported layouts by city, venue and name.
func (db *DB) VenueLayouts(ctx context.Context) ([]core.VenueLayout, error) {
	rows, err := db.pool.Query(ctx, layoutColumns+` ORDER BY v.city, v.name, l.name, l.id`)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []core.VenueLayout{}
	for rows.Next() {
		vl, _, err := scanLayout(rows)
		if err != nil {
			return nil, translate(err)
		}
		out = append(out, *vl)
	}
	return out, translate(rows.Err())
}

// CreateShows creates plan's shows as drafts on layout l (the plan's, as
// read by VenueLayout), one per start, sharing a series id (the first
// show's), each audited, in one transaction.
func (db *DB) CreateShows(ctx context.Context, plan core.ShowPlan, vl *core.VenueLayout, l *layout.Layout, by core.Actor) ([]core.Event, error) {
	var ids []int64
	var out []core.Event
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		ids, out = ids[:0], out[:0]
		var series *int64
		for _, start := range plan.Starts {
			id, err := insertEvent(ctx, tx, newEvent{venue: vl.Venue.ID, name: plan.Title, kind: plan.Kind, startsAt: start,
				onsaleAt: plan.OnsaleAt, maxPerAccount: plan.MaxPerAccount, holdSeconds: plan.HoldSeconds, status: core.ShowDraft,
				series: series, layout: &vl.ID, bands: plan.Bands}, l)
			if err != nil {
				return err
			}
			if series == nil {
				series = &id
				if _, err := tx.Exec(ctx, `UPDATE events SET series_id = id WHERE id = $1`, id); err != nil {
					return err
				}
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			e, err := scanEvent(tx.QueryRow(ctx, eventSQL, id))
			if err != nil {
				return err
			}
			if err := audit(ctx, tx, by, "show.create", showSubject(id), nil, e); err != nil {
				return err
			}
			out = append(out, *e)
		}
		if l.Seated() {
			_, err := tx.Exec(ctx, analyzeSeatsSQL)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, translate(fmt.Errorf("create shows %q: %w", plan.Title, err))
	}
	return out, nil
}

func showSubject(id int64) string { return "event:" + strconv.FormatInt(id, 10) }

// lockShow reads show id for a change in tx.
func lockShow(ctx context.Context, tx pgx.Tx, id int64) (*core.Event, error) {
	e, err := scanEvent(tx.QueryRow(ctx, eventSQL+` FOR UPDATE OF e`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no event %d", id)
	}
	return e, err
}

const updateShowSQL = `
UPDATE events SET name = $2, starts_at = $3, onsale_at = $4, max_per_account = $5, hold_seconds = $6, updated_at = now()
 WHERE id = $1`

const updatePriceSQL = `UPDATE price_bands SET price_paise = $3 WHERE event_id = $1 AND code = $2`

// UpdateShow edits show id: edit turns the show as it is (locked) into the
// show as it should be, or refuses; the show must be core.Editable at the
// database's now. The change and its audit entry commit together.
func (db *DB) UpdateShow(ctx context.Context, id int64, edit func(before core.Event, now time.Time) (core.Event, error), by core.Actor) (*core.Event, error) {
	var after *core.Event
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		before, err := lockShow(ctx, tx, id)
		if err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return err
		}
		if err := before.Editable(now); err != nil {
			return err
		}
		// A waiting room may let fans in before the show's own on-sale time
		// (an operator's on-sale dial): once anyone has held a seat, prices
		// and limits stand, so what a hold showed is what a booking charges.
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM account_tickets WHERE event_id = $1)`, id).Scan(&held); err != nil {
			return err
		}
		if held {
			return core.Errorf(core.EShowLocked, "fans have held seats of this show: it can no longer be edited (close or cancel it)")
		}
		e, err := edit(*before, now)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, updateShowSQL, id, e.Name, e.StartsAt, e.OnsaleAt, e.MaxPerAccount, e.HoldSeconds); err != nil {
			return err
		}
		for _, b := range e.Bands {
			if _, err := tx.Exec(ctx, updatePriceSQL, id, b.Code, b.PricePaise); err != nil {
				return err
			}
		}
		if after, err = scanEvent(tx.QueryRow(ctx, eventSQL, id)); err != nil {
			return err
		}
		return audit(ctx, tx, by, "show.update", showSubject(id), before, after)
	})
	db.forget(id)
	if err != nil {
		return nil, translate(err)
	}
	return after, nil
}

// SetShowStatus moves show id to status to (core.ShowTransition), audited as
// the transition's action (show.publish, show.close, ...).
func (db *DB) SetShowStatus(ctx context.Context, id int64, to string, by core.Actor) (*core.Event, error) {
	var after *core.Event
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		before, err := lockShow(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := core.ShowTransition(before.Status, to); err != nil {
			return err
		}
		if to == core.ShowPublished && !before.StartsAt.After(time.Now()) {
			return core.Errorf(core.EConflict, "the show started at %s: a show that has started is not put on sale", before.StartsAt.Format(time.RFC3339))
		}
		if _, err := tx.Exec(ctx, `UPDATE events SET status = $2, updated_at = now() WHERE id = $1`, id, to); err != nil {
			return err
		}
		if after, err = scanEvent(tx.QueryRow(ctx, eventSQL, id)); err != nil {
			return err
		}
		return audit(ctx, tx, by, "show."+core.ActionOf(before.Status, to), showSubject(id), before, after)
	})
	db.forget(id)
	if err != nil {
		return nil, translate(err)
	}
	return after, nil
}

// endSeatedHoldsSQL and endGAHoldsSQL end the live holds of a cancelled show, found by its
// indexes (holds have none by event, and need none on their hot path): a
// seated hold through its show's HELD seats, a GA hold through the GA
// expiry index. A lapsed seated hold is left as it is: it can no longer be
// booked (bookSQL, showGoesAhead). A booking committing as this runs holds
// its hold's row lock: this waits for it, and the next statement's
// snapshot sees its booking. $1 event.
const (
	endSeatedHoldsSQL = `
UPDATE holds SET status = 'RELEASED', version = version + 1, ended_at = now()
 WHERE id IN (SELECT hold_id FROM seats WHERE event_id = $1 AND status = 'HELD' AND hold_id IS NOT NULL) AND status = 'ACTIVE'`
	endGAHoldsSQL = `
UPDATE holds SET status = 'RELEASED', version = version + 1, ended_at = now()
 WHERE cardinality(seat_ids) = 0 AND expires_at > now() AND event_id = $1 AND status = 'ACTIVE'`
)

// cancelBookingsSQL moves every confirmed booking of a cancelled show to
// the step core.Transition gives OutcomeCancelled (the same for every
// confirmed booking of a flow: $2 the status, $3 the async flow's jobs,
// $4 the sync flow's), as advanceSQL and enqueueSQL would one by one,
// but in one statement: a 40,000-seat show's bookings take one round trip,
// not 80,000. $1 event.
const cancelBookingsSQL = `
WITH moved AS (
    UPDATE bookings SET status = $2, updated_at = now(), confirmed_at = NULL
     WHERE event_id = $1 AND status = ` + sqlConfirmed + `
    RETURNING id, flow
), queued AS (
    INSERT INTO outbox (kind, booking_id, round)
    SELECT k.kind, m.id, 1 + coalesce((SELECT max(o.round) FROM outbox o WHERE o.kind = k.kind AND o.booking_id = m.id), 0)
      FROM moved m CROSS JOIN LATERAL unnest(CASE WHEN m.flow = ` + sqlFlowSync + ` THEN $4::text[] ELSE $3::text[] END) AS k(kind)
     WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.kind = k.kind AND o.booking_id = m.id AND o.status = ` + sqlJobPending + `)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT count(*) FROM queued)`

// cancelStep is what OutcomeCancelled does to a confirmed booking of each
// flow (core.Transition): the status, and the jobs of each flow.
func cancelStep() (next core.BookingStatus, async, sync []string) {
	kinds := func(js []core.JobKind) []string {
		out := make([]string, len(js))
		for i, j := range js {
			out[i] = string(j)
		}
		return out
	}
	a, okA := core.Transition(core.BookingConfirmed, core.FlowAsync, core.OutcomeCancelled)
	s, okS := core.Transition(core.BookingConfirmed, core.FlowSync, core.OutcomeCancelled)
	if !okA || !okS || a.Next != s.Next || a.Captured || s.Captured {
		panic("core.Transition: a cancelled show's confirmed bookings must move alike, without capturing")
	}
	return a.Next, kinds(a.Jobs), kinds(s.Jobs)
}

// cancelConfirmed moves a cancelled show's confirmed bookings (cancelBookingsSQL).
func cancelConfirmed(ctx context.Context, tx pgx.Tx, event int64) (int, error) {
	next, async, sync := cancelStep()
	var moved, queued int
	err := tx.QueryRow(ctx, cancelBookingsSQL, event, next, async, sync).Scan(&moved, &queued)
	return moved, err
}

// CancelShow cancels show id for by, in one transaction: the show becomes
// cancelled (no payment starts and no seats are booked from then: bookSQL
// and createBookingSQL read the status), its live holds end, and each
// confirmed booking moves to REFUND_DUE with its give-back job and its
// holder's email and SMS queued in the outbox (core.Transition,
// OutcomeCancelled). The outbox carries them out after commit, each under
// its booking's idempotency key, so a core killed at any point refunds each
// booking exactly once when it (or another core) resumes. Its tickets are
// left in place, revoked: the gates' lists name them.
func (db *DB) CancelShow(ctx context.Context, id int64, reason string, by core.Actor) (*core.Event, *core.Cancellation, error) {
	var after *core.Event
	var bookings int
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		before, err := lockShow(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := core.ShowTransition(before.Status, core.ShowCancelled); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE events SET status = 'cancelled', cancelled_at = now(), cancel_reason = $2, updated_at = now() WHERE id = $1`,
			id, reason); err != nil {
			return err
		}
		for _, end := range []string{endSeatedHoldsSQL, endGAHoldsSQL} {
			if _, err := tx.Exec(ctx, end, id); err != nil {
				return err
			}
		}
		if bookings, err = cancelConfirmed(ctx, tx, id); err != nil {
			return err
		}
		if after, err = scanEvent(tx.QueryRow(ctx, eventSQL, id)); err != nil {
			return err
		}
		type cancel struct {
			*core.Event
			Reason   string `json:"cancel_reason"`
			Bookings int    `json:"bookings_refunded"`
		}
		return audit(ctx, tx, by, "show.cancel", showSubject(id), before, cancel{after, reason, bookings})
	})
	db.forget(id)
	if err != nil {
		return nil, nil, translate(err)
	}
	c, err := db.Cancellation(ctx, id)
	return after, c, err
}

// stragglersSQL finds cancelled shows that still have confirmed bookings:
// a booking that read its show's status just before the cancellation
// committed, and committed after the cancellation's own statement.
const stragglersSQL = `
SELECT e.id FROM events e
 WHERE e.status = 'cancelled' AND EXISTS (SELECT 1 FROM bookings b WHERE b.event_id = e.id AND b.status = ` + sqlConfirmed + `)`

// CancelStragglers is the cancellations' backstop (the sweeper runs it):
// each confirmed booking of a cancelled show is moved as the cancellation
// moved the others, and counted.
func (db *DB) CancelStragglers(ctx context.Context) (int, error) {
	rows, err := db.pool.Query(ctx, stragglersSQL)
	if err != nil {
		return 0, translate(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, translate(err)
	}
	total := 0
	for _, id := range ids {
		var n int
		err := db.inTx(ctx, func(tx pgx.Tx) error {
			var err error
			n, err = cancelConfirmed(ctx, tx, id)
			return err
		})
		if err != nil {
			return total, translate(err)
		}
		if n > 0 {
			db.log.Warn("cancelled show's late bookings moved to refund", "event", id, "bookings", n)
		}
		total += n
	}
	return total, nil
}

// cancellationSQL counts a show's cancelled bookings (those the
// cancellation moved: each has its one cancel_email job) by where their
// money is, the messages to their holders, and the jobs that gave up.
const cancellationSQL = `
WITH c AS (
  SELECT b.id, b.status, b.amount_paise FROM bookings b
   WHERE b.event_id = $1 AND EXISTS (SELECT 1 FROM outbox o WHERE o.booking_id = b.id AND o.kind = 'cancel_email')
), j AS (
  SELECT o.kind, o.status, o.created_at FROM outbox o
   WHERE o.kind IN ('refund', 'void', 'cancel_email', 'cancel_sms') AND o.booking_id IN (SELECT id FROM c)
)
SELECT e.status, e.cancelled_at, e.cancel_reason,
       (SELECT count(*) FROM c),
       (SELECT count(*) FROM c WHERE status = 'REFUND_DUE'),
       (SELECT count(*) FROM c WHERE status = 'REFUNDED'),
       (SELECT coalesce(sum(amount_paise), 0) FROM c WHERE status = 'REFUNDED'),
       (SELECT coalesce(sum(amount_paise), 0) FROM c WHERE status = 'REFUND_DUE'),
       (SELECT count(*) FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED'),
       (SELECT count(*) FROM j WHERE kind IN ('cancel_email', 'cancel_sms') AND status = 'DONE'),
       (SELECT count(*) FROM j WHERE kind IN ('cancel_email', 'cancel_sms') AND status = 'PENDING'),
       (SELECT count(*) FROM j WHERE status = 'DEAD'),
       (SELECT min(created_at) FROM j WHERE kind IN ('refund', 'void') AND status = 'PENDING')
  FROM events e
 WHERE e.id = $1`

// Cancellation reports how far a show's cancellation has come (for any
// show: a show not cancelled reports nothing due).
func (db *DB) Cancellation(ctx context.Context, id int64) (*core.Cancellation, error) {
	var c core.Cancellation
	var status string
	var at, oldest *time.Time
	err := db.pool.QueryRow(ctx, cancellationSQL, id).Scan(&status, &at, &c.Reason, &c.Bookings, &c.RefundDue, &c.Refunded,
		&c.RefundedPaise, &c.DuePaise, &c.StillConfirmed, &c.Notified, &c.NotifyPending, &c.DeadJobs, &oldest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, core.Errorf(core.ENotFound, "no event %d", id)
	}
	if err != nil {
		return nil, translate(err)
	}
	c.EventID, c.Cancelled = id, status == core.ShowCancelled
	if at != nil {
		c.CancelledAt = *at
	}
	if oldest != nil {
		c.OldestDue = *oldest
	}
	c.Done = c.Cancelled && c.RefundDue == 0 && c.StillConfirmed == 0 && c.NotifyPending == 0
	return &c, nil
}
