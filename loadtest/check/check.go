// Package check is the invariant checker run after every sale: it reads the
// core's database and the payment provider's ledger, beside what the crowd
// itself saw (the operators' samples, each fan's way through the line, the
// confirmations each fan was told about), and reports each rule with PASS
// or FAIL and the counts behind it.
//
// An invariant with no evidence fails: a rule that looked at no samples, no
// admissions, no confirmations or no rows has shown nothing, and a
// harness that hands the checker nothing (a broken sampler, an empty
// database) must not read as a clean sale (evidence.go).
package check

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Result is one invariant's verdict.
type Result struct {
	Name   string
	Pass   bool
	Detail string
}

// Sample is one reading of the gateway's admin stats during the sale.
type Sample struct {
	At                time.Time // when the gateway read these (its view of the room)
	Active, Offers    int64
	AdmittedPerMinute int64
	Queued            int64
	Dial, Cap         int64
	Serving           int64 // every place up to this one has been offered
	// Effective is the admission rate the gateway applies (per minute;
	// the dial or less, lowered while the core is unhealthy) and Health
	// why it differs from the dial (the gateway's health state and the
	// reason of its last decrease); Effective is -1 when the gateway does
	// not report one.
	Effective float64
	Health    string
}

// Admission is one fan's way through the line, as the crowd saw it.
type Admission struct {
	Prequeue   bool      // joined before onsale (its place drawn at onsale)
	First      int64     // the first place it was given (a lapsed turn sends a fan back); 0: never seen (its turn lapsed before it polled)
	Position   int64     // its place in line when admitted
	AdmittedAt time.Time // zero if never admitted
	Account    string    // the account the fan signed in to ("" for a guest)
	Fan        int       // the fan's number in the crowd
	// Places is the fan's place in line as the fan saw it change (join,
	// every new position, a requeue, a reset, the end), oldest first.
	Places []Place
}

// Input names what the checker looks at.
type Input struct {
	DatabaseURL   string
	Event         int64
	LedgerURL     string // the provider's /v1/ledger
	ProviderKey   string
	SweepInterval time.Duration
	Samples       []Sample
	Admissions    []Admission
	// RedisURL is the gateway's Redis, for the line (no line check when
	// empty); AccountsRequired says the event's dial account_required was
	// on: every place, hold and booking must be an account's.
	RedisURL         string
	AccountsRequired bool
	// Confirmations are the bookings the fans were told were confirmed
	// (the crowd's own list, compared with the database); Claim is the
	// claim_seconds dial: a fan that did not poll for that long let its
	// turn lapse and may be sent back (placesKept).
	Confirmations []Confirmation
	Claim         time.Duration
	// Outages are the provider's outage windows during the sale: the
	// money check says how many bookings had money move around them.
	Outages []Window
	// Skew is how much older than its time a sample's reading may be:
	// with several gateways a fan is admitted by one gateway's view while
	// the operators read another's, whose as_of is when it finished
	// refreshing (the tick, then the dials), not when the tick ran. The
	// queue-order rule compares an admission with the first sample taken
	// Skew after it. 0 with one gateway.
	Skew time.Duration
}

// Window is a span of time, [Start, End).
type Window struct{ Start, End time.Time }

// Run checks every invariant.
func Run(ctx context.Context, in Input) ([]Result, error) {
	conn, err := pgx.Connect(ctx, in.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var out []Result
	ev := in.Event
	ev0, err := readEvidence(ctx, conn, ev)
	if err != nil {
		return nil, err
	}
	// count runs a query counting violations; seen is how much the rule
	// looked at (none: the rule fails, having shown nothing).
	count := func(name string, seen evidenceOf, sql string, args ...any) {
		var n int
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			out = append(out, Result{name, false, "query failed: " + err.Error()})
			return
		}
		out = append(out, seen.rule(Result{name, n == 0, fmt.Sprintf("%d violations", n)}))
	}
	count("no seat sold twice (booked seats belong to one confirmed booking that lists them)", ev0.confirmed, `
SELECT count(*) FROM seats s LEFT JOIN bookings b ON b.id = s.booking_id
 WHERE s.event_id = $1 AND s.status = 'BOOKED'
   AND (b.id IS NULL OR b.status <> 'CONFIRMED' OR NOT s.seat_id = ANY (b.seat_ids))`, ev)
	count("no seat in two confirmed bookings", ev0.confirmed, `
SELECT count(*) FROM (SELECT sid FROM bookings b, unnest(b.seat_ids) sid
 WHERE b.event_id = $1 AND b.status = 'CONFIRMED' GROUP BY sid HAVING count(*) > 1) d`, ev)
	count("every confirmed booking has exactly its seats BOOKED under its id", ev0.confirmed, `
SELECT count(*) FROM bookings b, unnest(b.seat_ids) sid
  LEFT JOIN seats s ON s.event_id = $1 AND s.seat_id = sid
 WHERE b.event_id = $1 AND b.status = 'CONFIRMED' AND (s.status IS DISTINCT FROM 'BOOKED' OR s.booking_id IS DISTINCT FROM b.id)`, ev)
	count("no account above its limit", ev0.counters, `SELECT count(*) FROM account_tickets WHERE event_id = $1 AND (tickets > max_tickets OR tickets < 0)`, ev)
	out = append(out, accountResults(ctx, conn, in)...)
	if in.RedisURL != "" {
		out = append(out, linePlaces(ctx, conn, in))
	}
	// The limit is lazy (core/postgres sweepSQL): an expired hold's tickets
	// stay counted, the hold ACTIVE past its expiry or marked owed, until
	// the account's next refused hold settles it; and such a hold must be
	// on its account's list, or no settle could find it.
	count("account counters equal their active, booked and owed holds, each on its account's list", ev0.holds, `
SELECT (SELECT count(*) FROM (SELECT account, tickets FROM account_tickets WHERE event_id = $1) a
  FULL JOIN (SELECT account, sum(quantity) n FROM holds WHERE event_id = $1 AND (status IN ('ACTIVE', 'BOOKED') OR owed) GROUP BY 1) h USING (account)
 WHERE coalesce(a.tickets, 0) <> coalesce(h.n, 0))
     + (SELECT count(*) FROM holds h LEFT JOIN account_tickets a ON a.event_id = h.event_id AND a.account = h.account
         WHERE h.event_id = $1 AND (h.status = 'ACTIVE' OR h.owed) AND NOT h.id = ANY (coalesce(a.holds, '{}')))`, ev)
	// A seated hold lapses by itself: its seats are free the instant their
	// hold_until passes, which must be the hold's own expiry (an extension
	// moves both); no sweep ends it (migration 00012). A GA hold's tickets
	// come back only when the sweep ends it.
	margin := in.SweepInterval + 5*time.Second
	count(fmt.Sprintf("no hold outlived its expiry: held seats lapse with their hold, GA holds swept within one sweep interval plus a margin (%v)", margin), ev0.expired, `
SELECT (SELECT count(*) FROM seats s LEFT JOIN holds h ON h.id = s.hold_id
         WHERE s.event_id = $1 AND s.status = 'HELD' AND s.hold_until IS DISTINCT FROM h.expires_at)
     + (SELECT count(*) FROM holds WHERE event_id = $1 AND cardinality(seat_ids) = 0
           AND (status = 'EXPIRED' AND ended_at > expires_at + make_interval(secs => $2)
                -- a hold no sweep ended (the checker runs while the core still sweeps)
                OR status = 'ACTIVE' AND expires_at < now() - make_interval(secs => $2)))`, ev, margin.Seconds())
	count("no booking left unsettled (every payment ended confirmed, refunded or failed)", ev0.bookings, `
SELECT count(*) FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE')`, ev)
	if r := &out[len(out)-1]; !r.Pass && ev0.bookings.N > 0 {
		r.Detail += unsettled(ctx, conn, ev)
	}

	// Money: every booking's ledger adds up to the paisa (money.go).
	m, err := money(ctx, conn, in)
	if err != nil {
		return nil, err
	}
	out = append(out, m...)

	// Admission against the dials, from the samples taken during the sale.
	var over int
	var worstActive, worstClaims int64
	for _, s := range in.Samples {
		if s.Active > s.Cap {
			over++
		}
		worstActive = max(worstActive, s.Active)
		worstClaims = max(worstClaims, s.AdmittedPerMinute)
	}
	out = append(out, evidenceOf{len(in.Samples), "no samples of the gateway's admin stats"}.rule(
		Result{"active sessions never beat total_active_users", over == 0, fmt.Sprintf("%d samples, most active %d", len(in.Samples), worstActive)}))
	out = append(out, offeredRate(in.Samples, worstClaims))
	out = append(out, queueOrder(in))

	// What the fans were told and saw (observed.go).
	out = append(out, confirmationsKept(ctx, conn, in))
	out = append(out, placesKept(in.Admissions, in.Claim))
	return out, nil
}

// queueOrder checks that fans were let in in line order: nobody was
// admitted before the serving counter reached its place (checked against
// the first sample taken after the admission), and every pre-queue fan
// (shuffled at onsale) stood ahead of every fan who came later.
// offeredRate checks admission against new_users_per_minute: the places
// offered (the serving counter) in any window of a minute or more between
// two samples, against what the dial allows over the window (plus a tick,
// 100 ms, for when in it each reading's tick ran), plus the bucket's one
// second of burst. Claims (admitted_per_minute) are
// not the admission: fans claim when they next poll, so claims bunch when
// polls run late, and may pass the dial while the offers never do.
func offeredRate(samples []Sample, worstClaims int64) Result {
	const name = "places offered never beat new_users_per_minute (any minute, plus one second of burst)"
	var bad, windows int
	worst := 0.0 // offered / allowed
	j := 0
	for i := range samples {
		for j < len(samples) && samples[j].At.Sub(samples[i].At) < time.Minute {
			j++
		}
		if j == len(samples) {
			break
		}
		a, b := samples[i], samples[j]
		dial := int64(0)
		for _, s := range samples[i : j+1] {
			dial = max(dial, s.Dial)
		}
		allowed := float64(dial)*(b.At.Sub(a.At)+100*time.Millisecond).Minutes() + float64(dial)/60 + 1
		offered := float64(b.Serving - a.Serving)
		windows++
		worst = max(worst, offered/allowed)
		if offered > allowed {
			bad++
		}
	}
	return evidenceOf{windows, "no minute-long window between two samples"}.rule(Result{name, bad == 0,
		fmt.Sprintf("%d windows, %d over; at most %.0f%% of what the dial allowed; claims peaked at %d/min", windows, bad, worst*100, worstClaims)})
}

func queueOrder(in Input) Result {
	early, admitted, checked, maxPre, minLate := 0, 0, 0, int64(0), int64(math.MaxInt64)
	for _, a := range in.Admissions {
		if a.First > 0 {
			if a.Prequeue {
				maxPre = max(maxPre, a.First)
			} else {
				minLate = min(minLate, a.First)
			}
		}
		if a.AdmittedAt.IsZero() {
			continue
		}
		admitted++
		i := sort.Search(len(in.Samples), func(i int) bool { return !in.Samples[i].At.Before(a.AdmittedAt.Add(in.Skew)) })
		if i < len(in.Samples) {
			checked++
			if a.Position > in.Samples[i].Serving {
				early++
			}
		}
	}
	pass := early == 0 && (minLate == math.MaxInt64 || maxPre < minLate)
	return evidenceOf{checked, "no admission with a sample taken after it"}.rule(Result{"every fan admitted in queue order (pre-queue shuffle excepted)", pass,
		fmt.Sprintf("%d admissions (%d checked against a later sample), %d before their place was offered; pre-queue places up to %d, later arrivals from %d",
			admitted, checked, early, maxPre, minLate)})
}

// unsettledSQL is a few of the event's unsettled bookings, oldest first,
// for the verdict's detail. $1 event.
const unsettledSQL = `
SELECT id, status, flow, coalesce(payment_id, ''), extract(epoch FROM now() - created_at)::int, extract(epoch FROM now() - updated_at)::int
  FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE') ORDER BY id LIMIT 3`

// unsettled names a few unsettled bookings: what a failure needs to be
// looked into.
func unsettled(ctx context.Context, conn *pgx.Conn, ev int64) string {
	rows, err := conn.Query(ctx, unsettledSQL, ev)
	if err != nil {
		return ""
	}
	var ex []string
	var id int64
	var status, flow, payment string
	var age, idle int
	pgx.ForEachRow(rows, []any{&id, &status, &flow, &payment, &age, &idle}, func() error {
		ex = append(ex, fmt.Sprintf("booking %d %s (%s, payment %q, created %d s ago, last changed %d s ago)", id, status, flow, payment, age, idle))
		return nil
	})
	if len(ex) == 0 {
		return ""
	}
	return ", e.g. " + strings.Join(ex, "; ")
}

func rupees(paise int64) string { return fmt.Sprintf("₹%d.%02d", paise/100, paise%100) }
