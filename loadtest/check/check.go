// Package check is the invariant checker run after every sale: it reads the
// core's database and the payment provider's ledger and reports each rule
// with PASS or FAIL and the counts behind it.
package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
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
}

// Admission is one fan's way through the line, as the crowd saw it.
type Admission struct {
	Prequeue   bool      // joined before onsale (its place drawn at onsale)
	First      int64     // the first place it was given (a lapsed turn sends a fan back)
	Position   int64     // its place in line when admitted
	AdmittedAt time.Time // zero if never admitted
	Account    string    // the account the fan signed in to ("" for a guest)
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
}

// totals mirrors the provider ledger's per-reference totals.
type totals struct {
	Authorized int64 `json:"authorized"`
	Charged    int64 `json:"charged"`
	Captured   int64 `json:"captured"`
	Voided     int64 `json:"voided"`
	Refunded   int64 `json:"refunded"`
}

// Run checks every invariant.
func Run(ctx context.Context, in Input) ([]Result, error) {
	conn, err := pgx.Connect(ctx, in.DatabaseURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var out []Result
	count := func(name, sql string, args ...any) {
		var n int
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			out = append(out, Result{name, false, "query failed: " + err.Error()})
			return
		}
		out = append(out, Result{name, n == 0, fmt.Sprintf("%d violations", n)})
	}
	ev := in.Event
	count("no seat sold twice (booked seats belong to one confirmed booking that lists them)", `
SELECT count(*) FROM seats s LEFT JOIN bookings b ON b.id = s.booking_id
 WHERE s.event_id = $1 AND s.status = 'BOOKED'
   AND (b.id IS NULL OR b.status <> 'CONFIRMED' OR NOT s.seat_id = ANY (b.seat_ids))`, ev)
	count("no seat in two confirmed bookings", `
SELECT count(*) FROM (SELECT sid FROM bookings b, unnest(b.seat_ids) sid
 WHERE b.event_id = $1 AND b.status = 'CONFIRMED' GROUP BY sid HAVING count(*) > 1) d`, ev)
	count("every confirmed booking has exactly its seats BOOKED under its id", `
SELECT count(*) FROM bookings b, unnest(b.seat_ids) sid
  LEFT JOIN seats s ON s.event_id = $1 AND s.seat_id = sid
 WHERE b.event_id = $1 AND b.status = 'CONFIRMED' AND (s.status IS DISTINCT FROM 'BOOKED' OR s.booking_id IS DISTINCT FROM b.id)`, ev)
	count("no account above its limit", `SELECT count(*) FROM account_tickets WHERE event_id = $1 AND (tickets > max_tickets OR tickets < 0)`, ev)
	out = append(out, accountResults(ctx, conn, in)...)
	if in.RedisURL != "" {
		out = append(out, linePlaces(ctx, conn, in))
	}
	count("account counters equal their active and booked holds", `
SELECT count(*) FROM (SELECT account, tickets FROM account_tickets WHERE event_id = $1) a
  FULL JOIN (SELECT account, sum(quantity) n FROM holds WHERE event_id = $1 AND status IN ('ACTIVE', 'BOOKED') GROUP BY 1) h USING (account)
 WHERE coalesce(a.tickets, 0) <> coalesce(h.n, 0)`, ev)
	margin := in.SweepInterval + 5*time.Second
	count(fmt.Sprintf("no hold outlived its expiry by more than one sweep interval plus a margin (%v)", margin), `
SELECT count(*) FROM holds WHERE event_id = $1 AND status = 'EXPIRED' AND ended_at > expires_at + make_interval(secs => $2)`, ev, margin.Seconds())
	count("no booking left unsettled (every payment ended confirmed, refunded or failed)", `
SELECT count(*) FROM bookings WHERE event_id = $1 AND status IN ('PAYMENT_PENDING', 'REFUND_DUE')`, ev)

	// Money: every booking's ledger adds up to the paisa.
	ledger, err := fetchLedger(ctx, in.LedgerURL, in.ProviderKey)
	if err != nil {
		out = append(out, Result{"money conservation", false, err.Error()})
	} else {
		rows, err := conn.Query(ctx, `SELECT id, status, amount_paise FROM bookings WHERE event_id = $1`, ev)
		if err != nil {
			return nil, err
		}
		var examples []string
		off := 0
		var taken, kept, refunded int64
		n := 0
		for rows.Next() {
			var id, amount int64
			var status string
			if err := rows.Scan(&id, &status, &amount); err != nil {
				return nil, err
			}
			n++
			t := ledger[fmt.Sprintf("booking-%d", id)]
			taken += t.Captured
			refunded += t.Refunded
			ok := true
			switch status {
			case "CONFIRMED":
				ok = t.Captured == amount && t.Refunded == 0
				kept += t.Captured
			case "REFUNDED":
				ok = t.Captured == t.Refunded && t.Authorized-t.Voided-(t.Captured-t.Charged) == 0
			case "FAILED":
				ok = t.Captured == t.Refunded && t.Authorized-t.Voided-(t.Captured-t.Charged) == 0
			}
			if !ok {
				off++
				if len(examples) < 3 {
					examples = append(examples, fmt.Sprintf("booking %d %s: %+v (amount %d)", id, status, t, amount))
				}
			}
		}
		rows.Close()
		var sold int64
		conn.QueryRow(ctx, `SELECT coalesce(sum(amount_paise), 0) FROM bookings WHERE event_id = $1 AND status = 'CONFIRMED'`, ev).Scan(&sold)
		detail := fmt.Sprintf("%d bookings; taken %s, refunded %s, kept %s = confirmed sales %s", n, rupees(taken), rupees(refunded), rupees(kept), rupees(sold))
		pass := off == 0 && kept == sold && taken-refunded == sold
		if off > 0 {
			detail += fmt.Sprintf("; %d bookings off, e.g. %s", off, strings.Join(examples, "; "))
		}
		out = append(out, Result{"every charge ends captured-and-confirmed or refunded (money conservation to the paisa)", pass, detail})
	}

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
	out = append(out, Result{"active sessions never beat total_active_users", over == 0,
		fmt.Sprintf("%d samples, most active %d", len(in.Samples), worstActive)})
	out = append(out, offeredRate(in.Samples, worstClaims))
	out = append(out, queueOrder(in))
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
	return Result{name, bad == 0, fmt.Sprintf("%d windows, %d over; at most %.0f%% of what the dial allowed; claims peaked at %d/min",
		windows, bad, worst*100, worstClaims)}
}

func queueOrder(in Input) Result {
	early, admitted, maxPre, minLate := 0, 0, int64(0), int64(math.MaxInt64)
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
		i := sort.Search(len(in.Samples), func(i int) bool { return !in.Samples[i].At.Before(a.AdmittedAt) })
		if i < len(in.Samples) && a.Position > in.Samples[i].Serving {
			early++
		}
	}
	pass := early == 0 && (minLate == math.MaxInt64 || maxPre < minLate)
	return Result{"every fan admitted in queue order (pre-queue shuffle excepted)", pass,
		fmt.Sprintf("%d admissions, %d before their place was offered; pre-queue places up to %d, later arrivals from %d",
			admitted, early, maxPre, minLate)}
}

func rupees(paise int64) string { return fmt.Sprintf("₹%d.%02d", paise/100, paise%100) }

func fetchLedger(ctx context.Context, url, key string) (map[string]totals, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("ledger: %s %s", resp.Status, b)
	}
	var l struct {
		Totals map[string]totals `json:"totals"`
	}
	return l.Totals, json.NewDecoder(resp.Body).Decode(&l)
}
