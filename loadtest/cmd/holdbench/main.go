// Command holdbench measures the hold path against baselines measured in the
// same run on the same database:
//
//   - holds per second through the core's HTTP API (concurrent clients, each
//     reusing its admit token and its kept-alive connection (client.go: a
//     client as lean as pgbench), random 4-seat groups, a fresh 40,000-seat
//     event per round) beside pgbench running the seed's single HOLD_SQL at the
//     same concurrency on a 40,000-seat show_seats table, fresh per round;
//   - the core's sweeper on 40,000 seats with 4,000 expired holds beside the
//     seed's plain sweeper UPDATE on the same shape of data, and on 4,000
//     expired GA holds (the only holds it still ends).
//
// holdbench is black-box: it talks to the core over HTTP and to its database
// in SQL, never through the core's Go packages. The core must already be
// running (bench.sh starts it, sweeping every hour so the hold path runs
// alone) on a database seeded by bin/seed: each round's event is a copy of
// the seeded 40,000-seat stadium concert, made in SQL. For the sweeper,
// holdbench starts a second core of its own (package loadtest/stack) on the
// same database that sweeps every second, and times its sweeps from its
// /metrics.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/admission"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the benchmark's setup (shared/config); deploy/local/bench.sh
// passes the running core and its database. DATABASE_URL's password never
// reaches -h or a log.
type config struct {
	CoreURL     string `flag:"core" default:"http://127.0.0.1:8081" help:"the running core's base URL"`
	DatabaseURL string `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"the core's database"`
	AdmitKey    string `flag:"admit-key" default:".run/keys/admit.key" help:"admit-token private key file (the core trusts its public half)"`
	Clients     int    `flag:"clients" default:"16" min:"1" max:"1000" help:"concurrent clients, for both the API and pgbench"`
	Rounds      int    `flag:"rounds" default:"8" min:"1" max:"1000" help:"rounds of each hold benchmark, alternating, each on fresh seats"`
	PerRound    int    `flag:"holds-per-client" default:"100" min:"1" max:"100000" help:"hold attempts per client per round (16 x 100 x 4 seats fill 16% of the 40,000)"`
	Sweeps      int    `flag:"sweeps" default:"5" min:"1" max:"1000" help:"repetitions of each sweeper measurement"`
	Out         string `flag:"out" help:"also write the results as JSON to this file"`
	Template    int64  `flag:"template-event" default:"0" min:"0" help:"the seeded 40,000-seat stadium concert copied for every round (0: find it)"`

	seats []string // the template's seat ids in layout order (rows of 100)
}

func main() {
	var c config
	if code := shconfig.Status("holdbench", &c); code >= 0 {
		os.Exit(code)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "holdbench:", err)
		os.Exit(1)
	}
}

type result struct {
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Succeeded int     `json:"succeeded"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
}

func run(ctx context.Context, c config) error {
	db, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if c.Template == 0 {
		if err := db.QueryRow(ctx, findStadiumSQL).Scan(&c.Template); err != nil {
			return fmt.Errorf("find the seeded stadium concert (run bin/seed first): %w", err)
		}
	}
	rows, err := db.Query(ctx, `SELECT seat_id FROM seats WHERE event_id = $1 ORDER BY pos`, c.Template)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		c.seats = append(c.seats, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(c.seats) != 40000 {
		return fmt.Errorf("event %d has %d seats; want the 40,000-seat stadium", c.Template, len(c.seats))
	}
	priv, err := admission.ReadPrivateKeyFile(c.AdmitKey)
	if err != nil {
		return err
	}
	signer := admission.NewSigner(priv)
	pgbench, err := findPgbench()
	if err != nil {
		return err
	}
	if _, err := db.Exec(ctx, baselineSchema); err != nil {
		return fmt.Errorf("baseline schema: %w", err)
	}
	fmt.Printf("holdbench: %d clients, %d rounds of %d hold attempts each; pgbench at %s\n", c.Clients, c.Rounds, c.Clients*c.PerRound, pgbench)

	var api, base, prod []sample
	var apiReq, apiOK, baseReq, baseOK, prodReq, prodOK int
	var apiSecs, baseSecs, prodSecs float64
	for round := range c.Rounds {
		// pgbench first, then the API, each on fresh data, so drift hits both.
		show := int64(round + 1)
		if err := freshShow(ctx, db, show); err != nil {
			return err
		}
		bs, bsecs, err := runPgbench(ctx, pgbench, c, show)
		if err != nil {
			return err
		}
		var held int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM show_seats WHERE show_id = $1 AND status = 'HELD'`, show).Scan(&held); err != nil {
			return err
		}
		base = append(base, bs...)
		baseReq += len(bs)
		baseOK += held / 4
		baseSecs += bsecs

		// pgbench on the core's own hold statement, fresh event: what the
		// statement costs without HTTP, JSON, tokens and the Go client.
		pev, err := benchEvent(ctx, db, c.Template, "holdbench", 1_000_000)
		if err != nil {
			return err
		}
		script, err := productScript(ctx, db, pev)
		if err != nil {
			return err
		}
		ps, psecs, err := runPgbenchScript(ctx, pgbench, c, script, "")
		if err != nil {
			return err
		}
		if err := db.QueryRow(ctx, `SELECT count(*) FROM holds WHERE event_id = $1`, pev).Scan(&held); err != nil {
			return err
		}
		prod = append(prod, ps...)
		prodReq += len(ps)
		prodOK += held
		prodSecs += psecs

		as, ok, secs, err := runAPI(ctx, db, signer, c)
		if err != nil {
			return err
		}
		api = append(api, as...)
		apiReq += len(as)
		apiOK += ok
		apiSecs += secs
		fmt.Printf("  round %d: pgbench seed %.0f tx/s, pgbench core statement %.0f tx/s, API %.0f req/s\n",
			round+1, float64(len(bs))/bsecs, float64(len(ps))/psecs, float64(len(as))/secs)
	}
	rAPI := summarize("API holds (HTTP, JSON, admit token, hold + limit + hold row)", api, apiReq, apiOK, apiSecs)
	rBase := summarize("pgbench seed HOLD_SQL (one UPDATE, prepared)", base, baseReq, baseOK, baseSecs)
	rProd := summarize("pgbench core hold statement (UPDATE + limit + hold row)", prod, prodReq, prodOK, prodSecs)

	sweep, err := benchSweep(ctx, db, c)
	if err != nil {
		return err
	}

	fmt.Println()
	fmt.Printf("%-62s %9s %9s %9s %8s %8s\n", "hold path", "requests", "held", "per sec", "p50 ms", "p99 ms")
	for _, r := range []result{rAPI, rProd, rBase} {
		fmt.Printf("%-62s %9d %9d %9.0f %8.2f %8.2f\n", r.Name, r.Requests, r.Succeeded, r.PerSecond, r.P50ms, r.P99ms)
	}
	ratio := rAPI.PerSecond / rBase.PerSecond
	okRatio := (float64(apiOK) / apiSecs) / (float64(baseOK) / baseSecs)
	apiCore := rAPI.PerSecond / rProd.PerSecond
	coreSeed := rProd.PerSecond / rBase.PerSecond
	sweepRatio := float64(sweep.seated) / float64(sweep.seed)
	gaRatio := float64(sweep.ga) / float64(sweep.seed)
	fmt.Printf("ratio API / pgbench seed HOLD_SQL: %.2f of requests per second, %.2f of successful holds per second (aim: at least 0.6)\n", ratio, okRatio)
	fmt.Printf("ratio API / pgbench core statement: %.2f (aim: at least 0.8)\n", apiCore)
	fmt.Printf("ratio core statement / seed statement (both pgbench): %.2f (aim: at least 0.75)\n", coreSeed)
	fmt.Println()
	fmt.Printf("sweeper, 40,000 seats with 4,000 expired holds (median of %d; the core's from its /metrics):\n", c.Sweeps)
	fmt.Printf("  core sweeper, seated holds (none to end: seats lapse by themselves, quota back on demand): %7.1f ms\n", ms(sweep.seated))
	fmt.Printf("  seed sweeper (one plain UPDATE of show_seats):                                             %7.1f ms\n", ms(sweep.seed))
	fmt.Printf("  ratio core / seed: %.2f (aim: at most 1.0)\n", sweepRatio)
	fmt.Printf("  core sweeper, 4,000 expired GA holds instead (ended, tickets back on the counter):         %7.1f ms\n", ms(sweep.ga))
	fmt.Printf("  ratio core GA / seed: %.2f (the seed has no GA; for the record)\n", gaRatio)

	if c.Out != "" {
		b, _ := json.MarshalIndent(map[string]any{
			"clients": c.Clients, "rounds": c.Rounds, "attempts_per_round": c.Clients * c.PerRound,
			"api": rAPI, "pgbench": rBase, "pgbench_core_statement": rProd, "ratio_requests": ratio, "ratio_holds": okRatio,
			"ratio_api_core_statement": apiCore, "ratio_core_statement_seed": coreSeed,
			"sweep_core_ms": ms(sweep.seated), "sweep_seed_ms": ms(sweep.seed), "ratio_sweep": sweepRatio,
			"sweep_core_ga_ms": ms(sweep.ga), "ratio_sweep_ga": gaRatio,
		}, "", "  ")
		if err := os.WriteFile(c.Out, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type sample struct{ d time.Duration }

func summarize(name string, s []sample, req, ok int, secs float64) result {
	ds := make([]time.Duration, len(s))
	for i, x := range s {
		ds[i] = x.d
	}
	slices.Sort(ds)
	pct := func(p float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		return ms(ds[min(len(ds)-1, int(p*float64(len(ds))))])
	}
	return result{Name: name, Requests: req, Succeeded: ok, Seconds: secs, PerSecond: float64(req) / secs, P50ms: pct(0.50), P99ms: pct(0.99)}
}

// findStadiumSQL finds the seeded stadium concert: the one 40,000-seat event.
const findStadiumSQL = `SELECT id FROM events WHERE seated AND capacity = 40000 ORDER BY id LIMIT 1`

// cloneEventSQL copies event $1 (its row, price bands and seats, every seat
// free) as a new event named $2, on sale now, starting in a day, with at
// most $3 tickets an account; it returns the new id. The core sees what
// its own event creation would have written.
const cloneEventSQL = `
WITH e AS (
    INSERT INTO events (venue_id, name, kind, starts_at, onsale_at, seated, capacity, max_per_account, hold_seconds)
    SELECT venue_id, $2, kind, now() + interval '24 hours', now(), seated, capacity, $3, hold_seconds
      FROM events WHERE id = $1
    RETURNING id
), bands AS (
    INSERT INTO price_bands (event_id, code, name, price_paise)
    SELECT e.id, b.code, b.name, b.price_paise FROM price_bands b, e WHERE b.event_id = $1
), seats AS (
    INSERT INTO seats (event_id, seat_id, pos, section, row_label, row_no, number, band)
    SELECT e.id, s.seat_id, s.pos, s.section, s.row_label, s.row_no, s.number, s.band FROM seats s, e WHERE s.event_id = $1
)
SELECT id FROM e`

// benchEvent is a fresh copy of the stadium concert. The planner's
// statistics are refreshed after the copy, as the core's own event creation
// does after its bulk load: without it a plain (not generic) plan of the
// pgbench scripts may scan every seat, and the baseline would measure a bad
// plan instead of the statement.
//
// The copies of earlier rounds are ended first (their show time moved to
// the past): the core keeps a live picture of every seated event on sale
// (its seat-map keeper reads each one's taken seats every second), and a
// dozen live 40,000-seat copies would have it measure the bench's leftovers
// instead of one sale.
func benchEvent(ctx context.Context, db *pgxpool.Pool, template int64, name string, maxPerAccount int) (int64, error) {
	if _, err := db.Exec(ctx, `UPDATE events SET onsale_at = now() - interval '2 seconds', starts_at = now() - interval '1 second'
	                             WHERE name IN ('holdbench', 'sweepbench') AND starts_at > now()`); err != nil {
		return 0, fmt.Errorf("end the earlier copies: %w", err)
	}
	var id int64
	if err := db.QueryRow(ctx, cloneEventSQL, template, name, maxPerAccount).Scan(&id); err != nil {
		return 0, fmt.Errorf("copy the stadium concert: %w", err)
	}
	if _, err := db.Exec(ctx, `ANALYZE seats`); err != nil {
		return 0, fmt.Errorf("analyze the copy: %w", err)
	}
	// The core's seat-map keeper reads a new event's layout (40,000 seats:
	// about 30 ms of the core's CPU and as much of PostgreSQL's) at its
	// next rebuild, once a second. A sale's event is live an hour before
	// onsale, so its layout is read before the first hold: every run on a
	// fresh copy (the API's, and pgbench's on the core's statement, whose
	// copy the keeper reads just the same) waits for that read rather than
	// share the two cores with it.
	select {
	case <-time.After(keeperWarm):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return id, nil
}

// keeperWarm is how long a run waits after its event is made: past the
// keeper's next rebuild (core/seatmap.Interval, a second) and its reads.
const keeperWarm = 1500 * time.Millisecond

// runAPI runs one round of holds through the core on a fresh stadium event.
func runAPI(ctx context.Context, db *pgxpool.Pool, signer *admission.Signer, c config) ([]sample, int, float64, error) {
	ev, err := benchEvent(ctx, db, c.Template, "holdbench", 1_000_000)
	if err != nil {
		return nil, 0, 0, err
	}
	seats := c.seats
	path := fmt.Sprintf("/v1/events/%d/holds", ev)
	var mu sync.Mutex
	var all []sample
	ok := 0
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.Clients {
		tok, err := signer.Admit(fmt.Sprintf("bench-%d-%d", ev, i), ev, 0, time.Hour)
		if err != nil {
			return nil, 0, 0, err
		}
		client, err := newHoldClient(c.CoreURL, path, tok)
		if err != nil {
			return nil, 0, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer client.Close()
			var mine []sample
			won := 0
			var body bytes.Buffer
			for range c.PerRound {
				// Four adjacent seats in a random row: rows hold 100 seats.
				p := rand.IntN(len(seats)/100)*100 + rand.IntN(97)
				body.Reset()
				fmt.Fprintf(&body, `{"seats":["%s","%s","%s","%s"]}`, seats[p], seats[p+1], seats[p+2], seats[p+3])
				t0 := time.Now()
				code, err := client.post(body.Bytes())
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, sample{time.Since(t0)})
				switch code {
				case 201:
					won++
				case 409:
				default:
					mu.Lock()
					firstErr = fmt.Errorf("hold answered %d", code)
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			all = append(all, mine...)
			ok += won
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, ok, time.Since(start).Seconds(), firstErr
}

// The baseline is the seed's table, shaped as the seed has it.
const baselineSchema = `
CREATE TABLE IF NOT EXISTS show_seats (
    show_id    bigint,
    seat_id    text,
    status     text NOT NULL DEFAULT 'AVAILABLE',
    booking_id bigint,
    hold_until timestamptz,
    PRIMARY KEY (show_id, seat_id)
)`

// freshShow (re)creates a 40,000-seat show in show_seats, seat ids "S-<n>".
func freshShow(ctx context.Context, db *pgxpool.Pool, show int64) error {
	_, err := db.Exec(ctx, `DELETE FROM show_seats WHERE show_id = $1`, show)
	if err == nil {
		_, err = db.Exec(ctx, `INSERT INTO show_seats (show_id, seat_id) SELECT $1, 'S-' || g FROM generate_series(0, 39999) g`, show)
	}
	if err == nil {
		_, err = db.Exec(ctx, `ANALYZE show_seats`)
	}
	return err
}

// pgbenchScript is the seed's HOLD_SQL with a random group of four
// adjacent seats, as the API run asks for.
const pgbenchScript = `\set p random(0, 39996)
\set b random(1, 1000000000)
UPDATE show_seats
   SET status = 'HELD', booking_id = :b,
       hold_until = now() + make_interval(mins => 8)
 WHERE show_id = :show AND seat_id = ANY (ARRAY['S-' || :p, 'S-' || (:p + 1), 'S-' || (:p + 2), 'S-' || (:p + 3)])
   AND (status = 'AVAILABLE'
        OR (status = 'HELD' AND hold_until < now()));
`

func runPgbench(ctx context.Context, pgbench string, c config, show int64) ([]sample, float64, error) {
	return runPgbenchScript(ctx, pgbench, c, pgbenchScript, "show="+strconv.FormatInt(show, 10))
}

// productScript is the core's holdSeatsSQL (core/postgres/hold.go) as a
// pgbench script on event ev: one account per pgbench client, a random
// group of four adjacent seats named as the layout names them. One
// difference: pgbench aborts a client on any error, so a partial claim
// records the seats it got instead of failing the holds_all_claimed check;
// with most seats free, that path is rare and cheaper, not dearer. The
// section codes and row labels come from the event's seats, in layout order.
func productScript(ctx context.Context, db *pgxpool.Pool, ev int64) (string, error) {
	var secs, rowLabels []string
	if err := db.QueryRow(ctx, `SELECT array_agg(section ORDER BY p) FROM (SELECT section, min(pos) AS p FROM seats WHERE event_id = $1 GROUP BY section) x`, ev).Scan(&secs); err != nil {
		return "", err
	}
	if err := db.QueryRow(ctx, `SELECT array_agg(row_label ORDER BY p) FROM (SELECT row_label, min(pos) AS p FROM seats WHERE event_id = $1 AND section = $2 GROUP BY row_label) x`, ev, secs[0]).Scan(&rowLabels); err != nil {
		return "", err
	}
	sections, rows := "{"+strings.Join(secs, ",")+"}", "{"+strings.Join(rowLabels, ",")+"}"
	id := func(k int) string {
		return fmt.Sprintf("('%s'::text[])[:s] || '-' || ('%s'::text[])[:r] || '-' || (:n + %d)", sections, rows, k)
	}
	e := strconv.FormatInt(ev, 10)
	return `\set s random(1, 16)
\set r random(1, 25)
\set n random(1, 97)
WITH hid AS (SELECT ` + uuidv7SQL + ` AS id), account AS (
    INSERT INTO account_tickets AS a (event_id, account, tickets, max_tickets, holds)
    VALUES (` + e + `, 'pgbench-' || :client_id, 4, 1000000, ARRAY[(SELECT id FROM hid)])
    ON CONFLICT (event_id, account) DO UPDATE
       SET tickets = a.tickets + EXCLUDED.tickets, max_tickets = EXCLUDED.max_tickets, holds = a.holds || EXCLUDED.holds
), held AS (
    UPDATE seats
       SET status = 'HELD', hold_id = (SELECT id FROM hid), hold_until = now() + make_interval(secs => 480),
           booking_id = NULL, version = version + 1
     WHERE event_id = ` + e + ` AND seat_id = ANY (ARRAY[` + id(0) + `, ` + id(1) + `, ` + id(2) + `, ` + id(3) + `])
       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now()))
    RETURNING seat_id, band
)
INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, expires_at)
SELECT (SELECT id FROM hid), ` + e + `, 'pgbench-' || :client_id,
       coalesce(array_agg(seat_id ORDER BY seat_id), '{}'), greatest(count(*), 1), greatest(count(*), 1),
       now() + make_interval(secs => 480)
  FROM held
RETURNING version, expires_at, created_at, (SELECT array_agg(band) FROM held);
`, nil
}

// uuidv7SQL makes a hold id as the core does (core/postgres newHoldID): a
// version 7 UUID, the Unix milliseconds in front of random bits, so the
// holds the benchmark makes sit in the holds primary key as the core's
// own would (in creation order), not scattered as random ids would be.
const uuidv7SQL = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing
    substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) from 3) from 1 for 6), 52, 1), 53, 1), 'hex')::uuid`

// runPgbenchScript runs script with pgbench, c.PerRound transactions per
// client, and returns each transaction's latency and the run's length.
func runPgbenchScript(ctx context.Context, pgbench string, c config, script string, define string) ([]sample, float64, error) {
	dir, err := os.MkdirTemp("", "holdbench")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "hold.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		return nil, 0, err
	}
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(c.Clients), "-j", "2",
		"-t", strconv.Itoa(c.PerRound), "-f", file, "-l", "--log-prefix", filepath.Join(dir, "log")}
	if define != "" {
		args = append(args, "-D", define)
	}
	cmd := exec.CommandContext(ctx, pgbench, append(args, c.DatabaseURL)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, 0, fmt.Errorf("pgbench: %v\n%s", err, out.String())
	}
	secs := time.Since(start).Seconds()
	// Prefer pgbench's own rate, which leaves out connection set-up:
	// "tps = 4419.45 (without initial connection time)".
	var tps float64
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "tps = ") {
			tps, _ = strconv.ParseFloat(strings.Fields(line)[2], 64)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "log.*"))
	var s []sample
	for _, l := range logs {
		f, err := os.Open(l)
		if err != nil {
			return nil, 0, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// client_id transaction_no time_us script_no time_epoch time_us
			fs := strings.Fields(sc.Text())
			if len(fs) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fs[2], 10, 64)
			if err == nil {
				s = append(s, sample{time.Duration(us) * time.Microsecond})
			}
		}
		f.Close()
	}
	if len(s) == 0 {
		return nil, 0, fmt.Errorf("pgbench logged no transactions:\n%s", out.String())
	}
	if tps > 0 {
		secs = float64(len(s)) / tps
	}
	return s, secs, nil
}

func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) == 0 {
		return "", fmt.Errorf("pgbench not found (Debian package postgresql)")
	}
	slices.Sort(m)
	return m[len(m)-1], nil
}

// benchSweep times the core's sweeper and the seed's sweeper, each on
// 40,000 seats of which 4,000 are under expired holds and 4,000 under valid
// ones, fresh data for every repetition; it returns the medians.
//
// The core's sweeper runs in a core of holdbench's own on the same database,
// sweeping every second; its sweeps are read from /metrics (the
// onsale_core_sweep_duration_seconds histogram). The 4,000 holds expire a
// moment after the data is in place and vacuumed, so the sweep that returns
// them is a tick of that core; a repetition that saw another sweep between
// the two readings (an empty one, a tick under way as the holds expired)
// is measured again, so the core's figure is the one sweep's.
func benchSweep(ctx context.Context, db *pgxpool.Pool, c config) (sweepTimes, error) {
	var seated, ga, seed []time.Duration
	retries := 0 // over the whole measurement
	sweeper, stop, err := startSweeper(ctx, c.DatabaseURL)
	if err != nil {
		return sweepTimes{}, err
	}
	defer stop()
	for rep := 0; rep < c.Sweeps; rep++ {
		// Core: 8,000 one-seat holds by 8,000 accounts, half of them
		// expiring, each account's counter and list of holds as the hold
		// statement leaves them (the sweep writes neither: migration
		// 00010). Seated, then the same as GA holds.
		for _, isGA := range []bool{false, true} {
			d, err := coreSweep(ctx, db, c, sweeper, isGA, &retries)
			if err != nil {
				return sweepTimes{}, fmt.Errorf("core sweep %d (GA %v): %w", rep, isGA, err)
			}
			if isGA {
				ga = append(ga, d)
			} else {
				seated = append(seated, d)
			}
		}

		// Seed: the same shape in show_seats, swept by the seed's UPDATE.
		show := int64(1000 + rep)
		if err := freshShow(ctx, db, show); err != nil {
			return sweepTimes{}, err
		}
		// Only this show in the table, as in the seed's experiment.
		if _, err := db.Exec(ctx, `DELETE FROM show_seats WHERE show_id <> $1`, show); err != nil {
			return sweepTimes{}, err
		}
		_, err = db.Exec(ctx, `
UPDATE show_seats SET status = 'HELD', booking_id = g,
       hold_until = CASE WHEN g % 2 = 0 THEN now() - interval '1 second' ELSE now() + interval '8 minutes' END
  FROM generate_series(1, 8000) g
 WHERE show_id = $1 AND seat_id = 'S-' || (g * 5 - 5)`, show)
		if err != nil {
			return sweepTimes{}, err
		}
		db.Exec(ctx, `VACUUM ANALYZE show_seats`)
		t0 := time.Now()
		tag, err := db.Exec(ctx, `
UPDATE show_seats
   SET status = 'AVAILABLE', booking_id = NULL, hold_until = NULL
 WHERE status = 'HELD' AND hold_until < now()`)
		d := time.Since(t0)
		if err != nil {
			return sweepTimes{}, err
		}
		if tag.RowsAffected() != 4000 {
			return sweepTimes{}, fmt.Errorf("seed sweep freed %d seats; want 4000", tag.RowsAffected())
		}
		seed = append(seed, d)
	}
	return sweepTimes{median(seated), median(ga), median(seed)}, nil
}

// sweepTimes are the medians of the sweeper measurements.
type sweepTimes struct{ seated, ga, seed time.Duration }

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// coreSweep makes 8,000 holds on a fresh copy of the stadium concert (seated:
// a seat each; ga: one GA ticket each, the copy given a GA counter), half of
// them expiring 2 s later, and times, from the sweeping core's /metrics, the
// first sweep that starts once they have expired. It checks what that sweep
// left: seated, every expired hold's seat free to the next hold (lapsed:
// HELD under it with hold_until past) and no hold ended (a seated hold needs
// no sweep: migration 00012); GA, exactly the 4,000 expired holds ended and
// their tickets back on the counter. A measurement that saw another sweep
// is made again, at most c.Sweeps times over the whole run (*retries).
func coreSweep(ctx context.Context, db *pgxpool.Pool, c config, sweeper string, ga bool, retries *int) (time.Duration, error) {
	for {
		if err := sweepLeftovers(ctx, db); err != nil {
			return 0, err
		}
		ev, err := benchEvent(ctx, db, c.Template, "sweepbench", 6)
		if err != nil {
			return 0, err
		}
		ids := make([]string, 8000)
		for i := range ids {
			ids[i] = c.seats[i*5]
		}
		if ga {
			ids = make([]string, 8000) // no seats: GA
			if _, err := db.Exec(ctx, `INSERT INTO ga_inventory (event_id, band, capacity, remaining) VALUES ($1, 'GA', 8000, 0)`, ev); err != nil {
				return 0, fmt.Errorf("sweep setup: %w", err)
			}
		}
		expiry := time.Now().Add(2 * time.Second)
		_, err = db.Exec(ctx, `
WITH h AS (
    INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, expires_at)
    SELECT `+uuidv7SQL+`, $1::bigint, 'sweep-' || $1::bigint || '-' || n, CASE WHEN sid = '' THEN '{}' ELSE ARRAY[sid] END, 1, 1,
           CASE WHEN n % 2 = 0 THEN $3::timestamptz ELSE now() + interval '8 minutes' END
      FROM unnest($2::text[]) WITH ORDINALITY AS u (sid, n)
    RETURNING id, account, seat_ids[1] AS sid, expires_at
), a AS (
    INSERT INTO account_tickets (event_id, account, tickets, max_tickets, holds) SELECT $1::bigint, account, 1, 6, ARRAY[id] FROM h
)
UPDATE seats s SET status = 'HELD', hold_id = h.id, hold_until = h.expires_at, version = s.version + 1
  FROM h WHERE s.event_id = $1::bigint AND s.seat_id = h.sid`, ev, ids, expiry)
		if err != nil {
			return 0, fmt.Errorf("sweep setup: %w", err)
		}
		db.Exec(ctx, `VACUUM ANALYZE seats, holds, account_tickets`)
		if time.Now().After(expiry) {
			return 0, fmt.Errorf("sweep setup took past the holds' expiry; the sweep would not be timed alone")
		}
		time.Sleep(time.Until(expiry)) // the holds expire now
		before, err := sweepMetrics(ctx, sweeper)
		if err != nil {
			return 0, err
		}
		after := before
		deadline := time.Now().Add(30 * time.Second)
		for after.sweeps < before.sweeps+1 || (ga && after.holds < before.holds+4000) {
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("no sweep of the expired holds within 30 s")
			}
			// Not much more often: each reading is a scrape of the sweeping
			// core, which would share the machine's two cores with the sweep
			// it times.
			time.Sleep(100 * time.Millisecond)
			if after, err = sweepMetrics(ctx, sweeper); err != nil {
				return 0, err
			}
		}
		want := 0.0
		if ga {
			want = 4000
		}
		if h := after.holds - before.holds; h != want {
			return 0, fmt.Errorf("the sweep ended %.0f holds; want %.0f", h, want)
		}
		if n := after.sweeps - before.sweeps; n != 1 {
			// Another sweep ran between the readings beside the timed one
			// (a tick already under way when the holds expired): its time
			// would count as the timed sweep's. Measured again.
			fmt.Printf("  (core sweep: %.0f sweeps between the readings; measured again)\n", n)
			if *retries++; *retries > c.Sweeps {
				return 0, fmt.Errorf("%d repetitions saw more than one sweep", *retries)
			}
			continue
		}
		var free, remaining int
		if err := db.QueryRow(ctx, `
SELECT (SELECT count(*) FROM seats s JOIN holds h ON h.id = s.hold_id
         WHERE s.event_id = $1 AND s.status = 'HELD' AND s.hold_until < now() AND h.expires_at < now()),
       coalesce((SELECT remaining FROM ga_inventory WHERE event_id = $1), 0)`, ev).Scan(&free, &remaining); err != nil {
			return 0, err
		}
		if (!ga && free != 4000) || (ga && remaining != 4000) {
			return 0, fmt.Errorf("after the sweep %d seats lapsed and %d GA tickets are back; want 4,000 %s", free, remaining, map[bool]string{true: "tickets", false: "seats"}[ga])
		}
		return time.Duration((after.seconds - before.seconds) * float64(time.Second)), nil
	}
}

// expireLeftoversSQL ends every live GA hold now: the other half of each
// earlier repetition's GA holds, which would otherwise expire (8 minutes
// after they were made) inside a later timed window and be swept with its
// 4,000. A seated hold is never swept (migration 00012): it can stay.
const expireLeftoversSQL = `
UPDATE holds SET expires_at = now() - interval '1 second'
 WHERE status = 'ACTIVE' AND cardinality(seat_ids) = 0 AND expires_at > now()`

// liveHoldsSQL counts the GA holds not yet swept.
const liveHoldsSQL = `SELECT count(*) FROM holds WHERE status = 'ACTIVE' AND cardinality(seat_ids) = 0`

// sweepLeftovers expires every live GA hold and waits until the sweeping
// core (a tick a second) has returned them all, so a timed window sweeps only the
// holds made for it, however long the run.
func sweepLeftovers(ctx context.Context, db *pgxpool.Pool) error {
	if _, err := db.Exec(ctx, expireLeftoversSQL); err != nil {
		return fmt.Errorf("expire the leftover holds: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		if err := db.QueryRow(ctx, liveHoldsSQL).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d leftover holds still unswept after 60 s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startSweeper starts a core (bin/core, package loadtest/stack) on dbURL that
// sweeps every second and serves nothing holdbench sends holds to; it
// returns the base URL of the core's operators' listener (its /metrics)
// and a func that stops it.
func startSweeper(ctx context.Context, dbURL string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "holdbench-sweeper")
	if err != nil {
		return "", nil, err
	}
	s, err := stack.Start(ctx, stack.Options{Dir: dir, Apps: []string{stack.Core}, DatabaseURL: dbURL,
		CoreEnv: []string{"ONSALE_SWEEP_INTERVAL=1s", "ONSALE_LOG_LEVEL=warn", "ONSALE_DB_MAX_CONNS=4"}})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start the sweeping core: %w", err)
	}
	return s.CoreAdminURL, func() { s.Stop(); os.RemoveAll(dir) }, nil
}

type sweepCounts struct{ seconds, sweeps, holds float64 }

// sweepMetrics reads the sweeper's counters from the core's /metrics, on
// its operators' listener (adminURL).
func sweepMetrics(ctx context.Context, adminURL string) (sweepCounts, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, adminURL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sweepCounts{}, err
	}
	defer resp.Body.Close()
	var c sweepCounts
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "onsale_core_sweep_duration_seconds_sum":
			dst = &c.seconds
		case "onsale_core_sweep_duration_seconds_count":
			dst = &c.sweeps
		case "onsale_core_swept_holds_total":
			dst = &c.holds
		default:
			continue
		}
		if *dst, err = strconv.ParseFloat(value, 64); err != nil {
			return c, fmt.Errorf("metrics: %s: %w", name, err)
		}
		found++
	}
	if found != 3 {
		return c, fmt.Errorf("metrics of %s lack the sweeper's counters", adminURL)
	}
	return c, sc.Err()
}
