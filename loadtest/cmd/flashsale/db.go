package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/loadtest/crowd"
)

// pendingBookings counts the event's bookings still waiting for money or a refund.
const pendingBookings = `SELECT count(*) FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE')`

// settle waits (at most 3 minutes) until no booking of the event is
// pending at the core, so that the checker sees every payment settled: a
// payment no webhook settles waits for the reconciler (twice its
// ONSALE_RECONCILE_AFTER when no payment reached the provider).
func settle(ctx context.Context, c Config) {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		n, err := pending(ctx, c)
		if err == nil && n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

func pending(ctx context.Context, c Config) (int, error) {
	conn, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, pendingBookings, c.Event).Scan(&n)
	return n, err
}

// returnsSQL is how the event's holds ended, grouped: released (at
// ended_at), lapsed (EXPIRED, ACTIVE past its end and not yet swept, or
// released only after its end, when lazy expiry had freed its seats
// already) at the hold's end or extended first, or kept; with their
// count and mean time from the hold to the seats coming back. A hold that
// became a sale (BOOKED) is kept. A late payer's is not: its payment
// settled after the hold had lapsed, the booking was refunded, and the
// seats came back at the hold's end, extended at the Pay step (counting
// those as kept, 1.3-1.5% of holds at 60,000-600,000 fans, made the
// forecast's chains too short: the last seat's chain went through a 50 s
// lapse in four sales out of four while "0.1%" of holds lapsed so). A
// re-hold is a hold of a seat held before (any of its seats): a chain's
// later link, counted apart too (crowd.Returns.Rehold).
const returnsSQL = `
WITH again AS ( -- re-holds: not the first hold of one of their seats
    SELECT DISTINCT id FROM (
        SELECT id, row_number() OVER (PARTITION BY seat ORDER BY created_at, id) AS n
          FROM (SELECT id, created_at, unnest(seat_ids) AS seat FROM holds WHERE event_id = $1) s) r
     WHERE n > 1
)
SELECT CASE WHEN status = 'BOOKED' THEN 'kept'
            WHEN status = 'RELEASED' AND ended_at < expires_at THEN 'released'
            WHEN status IN ('EXPIRED', 'RELEASED') OR (status = 'ACTIVE' AND expires_at < now())
                 THEN CASE WHEN extended THEN 'extended' ELSE 'lapsed' END
            ELSE 'kept' END AS ended,
       h.id IN (SELECT id FROM again) AS rehold,
       count(*),
       coalesce(extract(epoch FROM avg(CASE WHEN status = 'RELEASED' AND ended_at < expires_at THEN ended_at ELSE expires_at END - created_at)), 0)::float8
  FROM holds h WHERE event_id = $1 GROUP BY 1, 2`

// holdReturns is what returnsSQL measures, for the forecast after the
// sale (nil: no hold was made).
func holdReturns(ctx context.Context, c Config) (*crowd.Returns, error) {
	conn, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, returnsSQL, c.Event)
	if err != nil {
		return nil, err
	}
	type group struct {
		n     int64
		after time.Duration
	}
	type kind struct {
		ended  string
		rehold bool
	}
	groups := map[kind]group{}
	for rows.Next() {
		var k kind
		var g group
		var after float64
		if err := rows.Scan(&k.ended, &k.rehold, &g.n, &after); err != nil {
			return nil, err
		}
		g.after = time.Duration(after * float64(time.Second))
		groups[k] = g
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// returns are the shares of the holds among them (the first holds, or
	// the re-holds).
	returns := func(among func(rehold bool) bool) *crowd.Returns {
		sum := map[string]group{}
		all := int64(0)
		for k, g := range groups {
			if !among(k.rehold) {
				continue
			}
			s := sum[k.ended]
			// the mean time, weighted by count
			s.after = time.Duration((float64(s.after)*float64(s.n) + float64(g.after)*float64(g.n)) / float64(s.n+g.n))
			s.n += g.n
			sum[k.ended], all = s, all+g.n
		}
		if all == 0 {
			return nil
		}
		share := func(kind string) float64 { return float64(sum[kind].n) / float64(all) }
		r := &crowd.Returns{Released: share("released"), ReleasedAfter: sum["released"].after}
		for _, kind := range []struct{ group, name string }{{"lapsed", "at the hold's end"}, {"extended", "extended at the Pay step first"}} {
			if g := sum[kind.group]; g.n > 0 {
				r.Lapses = append(r.Lapses, crowd.Lapse{Share: share(kind.group), After: g.after, Name: kind.name})
			}
		}
		return r
	}
	// A chain's first hold ends as the first holds did, its later ones as
	// the re-holds did.
	r := returns(func(rehold bool) bool { return !rehold })
	if r != nil {
		r.Rehold = returns(func(rehold bool) bool { return rehold })
		// The seats of a hold that came back are held again by how many
		// holds: re-holds per hold that came back.
		var again, back int64
		for k, g := range groups {
			if k.rehold {
				again += g.n
			}
			if k.ended != "kept" {
				back += g.n
			}
		}
		if back > 0 {
			r.Branch = float64(again) / float64(back)
		}
	}
	return r, nil
}

// tailSQL is how the sale's tail went (from $2, when every seat was held
// or sold): the holds made from then on, how many of them lapsed (at the
// hold's end, or extended first) and how many were re-holds, and how many
// holds came back from then on (returnsSQL's classes). The forecast's odds
// and Branch are the whole sale's; the tail decides the sale's end, and a
// returned hold's seats may be split among more hunters there, when they
// are the only free seats (a diagnostic: the forecast does not use it).
const tailSQL = `
WITH again AS (
    SELECT DISTINCT id FROM (
        SELECT id, row_number() OVER (PARTITION BY seat ORDER BY created_at, id) AS n
          FROM (SELECT id, created_at, unnest(seat_ids) AS seat FROM holds WHERE event_id = $1) s) r
     WHERE n > 1
), ended AS (
    SELECT id, created_at, extended,
           status = 'RELEASED' AND ended_at < expires_at AS released,
           status <> 'BOOKED' AND (status <> 'ACTIVE' OR expires_at < now()) AS back,
           CASE WHEN status = 'RELEASED' AND ended_at < expires_at THEN ended_at ELSE expires_at END AS back_at
      FROM holds WHERE event_id = $1
)
SELECT count(*) FILTER (WHERE created_at >= $2),
       count(*) FILTER (WHERE created_at >= $2 AND back AND NOT released AND NOT extended),
       count(*) FILTER (WHERE created_at >= $2 AND back AND NOT released AND extended),
       count(*) FILTER (WHERE created_at >= $2 AND id IN (SELECT id FROM again)),
       count(*) FILTER (WHERE back AND back_at >= $2)
  FROM ended`

// tail describes the sale's tail from tailSQL: a sentence for the report.
func tail(ctx context.Context, c Config, from time.Time, onsale time.Time) (string, error) {
	conn, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var made, lapsed, extended, again, back int64
	if err := conn.QueryRow(ctx, tailSQL, c.Event, from).Scan(&made, &lapsed, &extended, &again, &back); err != nil {
		return "", err
	}
	if made == 0 {
		return "", nil
	}
	s := fmt.Sprintf("The tail (from every seat held or sold, %.0f s after onsale): %d holds made, %.1f%% lapsed at the hold's end and %.1f%% lapsed extended",
		from.Sub(onsale).Seconds(), made, 100*float64(lapsed)/float64(made), 100*float64(extended)/float64(made))
	if back > 0 {
		s += fmt.Sprintf("; %d re-holds for the %d holds that came back from then on (%.2f each)", again, back, float64(again)/float64(back))
	}
	return s + ".", nil
}

// lastSeatsSQL is every hold ever made on a seat of each of the last
// bookings confirmed ($2 of them; a booking's seats were held together),
// in order: what made the sale's tail as long as it was (how many holds
// each seat went through, and how long it waited between them).
const lastSeatsSQL = `
WITH last AS (
    SELECT id, hold_id, confirmed_at, seat_ids[1] AS seat
      FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED' AND cardinality(seat_ids) > 0
     ORDER BY confirmed_at DESC LIMIT $2
)
SELECT l.seat, l.confirmed_at, h.created_at, h.expires_at, h.ended_at, h.status, h.id = l.hold_id
  FROM last l JOIN holds h ON h.event_id = $1 AND l.seat = ANY (h.seat_ids)
 ORDER BY l.confirmed_at DESC, l.seat, h.created_at`

// lastSeats describes the chains of holds of the seats sold last: a line
// a seat, times since onsale.
func lastSeats(ctx context.Context, c Config, onsale time.Time, n int) ([]string, error) {
	conn, err := pgx.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, lastSeatsSQL, c.Event, n)
	if err != nil {
		return nil, err
	}
	type hold struct {
		created, expires time.Time
		ended            *time.Time
		status           string
		booked           bool
	}
	type chain struct {
		seat      string
		confirmed time.Time
		holds     []hold
	}
	var chains []chain
	for rows.Next() {
		var seat string
		var confirmed time.Time
		var h hold
		if err := rows.Scan(&seat, &confirmed, &h.created, &h.expires, &h.ended, &h.status, &h.booked); err != nil {
			return nil, err
		}
		if len(chains) == 0 || chains[len(chains)-1].seat != seat {
			chains = append(chains, chain{seat: seat, confirmed: confirmed})
		}
		chains[len(chains)-1].holds = append(chains[len(chains)-1].holds, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	at := func(t time.Time) string { return fmt.Sprintf("+%.1f s", t.Sub(onsale).Seconds()) }
	var lines []string
	for _, ch := range chains {
		var b strings.Builder
		fmt.Fprintf(&b, "seat %s, %d holds: ", ch.seat, len(ch.holds))
		var free time.Time // when the seat came back from the hold before
		for i, h := range ch.holds {
			if i > 0 {
				fmt.Fprintf(&b, ", back %.1f s later ", h.created.Sub(free).Seconds())
			}
			fmt.Fprintf(&b, "held %s", at(h.created))
			switch {
			case h.booked:
				fmt.Fprintf(&b, ", confirmed %s", at(ch.confirmed))
			case h.ended != nil && h.status == "RELEASED" && h.ended.Before(h.expires):
				free = *h.ended
				fmt.Fprintf(&b, ", %s %s", strings.ToLower(h.status), at(free))
			default: // lapsed at its end (the sweeper records it later)
				free = h.expires
				fmt.Fprintf(&b, ", lapsed %s", at(free))
			}
		}
		lines = append(lines, b.String())
	}
	return lines, nil
}
