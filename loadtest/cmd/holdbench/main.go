// Command holdbench measures the hold path against baselines measured in the
// same run on the same database:
//
//   - holds per second through the core's HTTP API (concurrent clients, each
//     reusing its admit token, random 4-seat groups, a fresh 40,000-seat event
//     per round) beside pgbench running the seed's single HOLD_SQL at the
//     same concurrency on a 40,000-seat show_seats table, fresh per round;
//   - the core's sweeper on 40,000 seats with 4,000 expired holds beside the
//     seed's plain sweeper UPDATE on the same shape of data.
//
// The core must already be running (bench.sh starts it); holdbench creates
// its events directly in the core's database.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/shared/admission"
)

type config struct {
	coreURL  string
	dbURL    string
	key      string
	clients  int
	rounds   int
	perRound int
	sweeps   int
	out      string
}

func main() {
	var c config
	flag.StringVar(&c.coreURL, "core", "http://127.0.0.1:8081", "the running core's base URL")
	flag.StringVar(&c.dbURL, "database-url", os.Getenv("DATABASE_URL"), "the core's database")
	flag.StringVar(&c.key, "admit-key", ".run/keys/admit.key", "admit-token private key file (the core trusts its public half)")
	flag.IntVar(&c.clients, "clients", 16, "concurrent clients, for both the API and pgbench")
	flag.IntVar(&c.rounds, "rounds", 8, "rounds of each hold benchmark, alternating, each on fresh seats")
	flag.IntVar(&c.perRound, "holds-per-client", 100, "hold attempts per client per round (16 x 100 x 4 seats fill 16% of the 40,000)")
	flag.IntVar(&c.sweeps, "sweeps", 5, "repetitions of each sweeper measurement")
	flag.StringVar(&c.out, "out", "", "also write the results as JSON to this file")
	flag.Parse()
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
	db, err := postgres.Open(ctx, c.dbURL, postgres.Options{MaxConns: 4})
	if err != nil {
		return err
	}
	defer db.Close()
	priv, err := admission.ReadPrivateKeyFile(c.key)
	if err != nil {
		return err
	}
	signer := admission.NewSigner(priv)
	pgbench, err := findPgbench()
	if err != nil {
		return err
	}
	if _, err := db.Pool().Exec(ctx, baselineSchema); err != nil {
		return fmt.Errorf("baseline schema: %w", err)
	}
	fmt.Printf("holdbench: %d clients, %d rounds of %d hold attempts each; pgbench at %s\n", c.clients, c.rounds, c.clients*c.perRound, pgbench)

	var api, base, prod []sample
	var apiReq, apiOK, baseReq, baseOK, prodReq, prodOK int
	var apiSecs, baseSecs, prodSecs float64
	for round := range c.rounds {
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
		if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM show_seats WHERE show_id = $1 AND status = 'HELD'`, show).Scan(&held); err != nil {
			return err
		}
		base = append(base, bs...)
		baseReq += len(bs)
		baseOK += held / 4
		baseSecs += bsecs

		// pgbench on the core's own hold statement, fresh event: what the
		// statement costs without HTTP, JSON, tokens and the Go client.
		pev, err := benchEvent(ctx, db)
		if err != nil {
			return err
		}
		ps, psecs, err := runPgbenchScript(ctx, pgbench, c, productScript(pev), "")
		if err != nil {
			return err
		}
		if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM holds WHERE event_id = $1`, pev).Scan(&held); err != nil {
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

	sweepOurs, sweepSeed, err := benchSweep(ctx, db, c.sweeps)
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
	fmt.Printf("ratio API / pgbench seed HOLD_SQL: %.2f of requests per second, %.2f of successful holds per second (aim: at least 0.8)\n", ratio, okRatio)
	fmt.Printf("  of which: core statement / seed statement (both pgbench) %.2f; API / core statement %.2f\n",
		rProd.PerSecond/rBase.PerSecond, rAPI.PerSecond/rProd.PerSecond)
	fmt.Println()
	fmt.Printf("sweeper, 40,000 seats with 4,000 expired holds (median of %d):\n", c.sweeps)
	fmt.Printf("  core sweeper (holds, seats, account counters in one statement): %7.1f ms\n", ms(sweepOurs))
	fmt.Printf("  seed sweeper (one plain UPDATE of show_seats):                  %7.1f ms\n", ms(sweepSeed))
	fmt.Printf("  ratio core / seed: %.2f\n", float64(sweepOurs)/float64(sweepSeed))

	if c.out != "" {
		b, _ := json.MarshalIndent(map[string]any{
			"clients": c.clients, "rounds": c.rounds, "attempts_per_round": c.clients * c.perRound,
			"api": rAPI, "pgbench": rBase, "pgbench_core_statement": rProd, "ratio_requests": ratio, "ratio_holds": okRatio,
			"sweep_core_ms": ms(sweepOurs), "sweep_seed_ms": ms(sweepSeed),
		}, "", "  ")
		if err := os.WriteFile(c.out, b, 0o644); err != nil {
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

// runAPI runs one round of holds through the core on a fresh stadium event.
func benchEvent(ctx context.Context, db *postgres.DB) (int64, error) {
	return db.CreateEvent(ctx, seed.EventSpec{Name: "holdbench", Kind: core.KindConcert, Layout: seed.MustLayout("stadium"),
		StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now(), MaxPerAccount: 1_000_000})
}

func runAPI(ctx context.Context, db *postgres.DB, signer *admission.Signer, c config) ([]sample, int, float64, error) {
	ev, err := benchEvent(ctx, db)
	if err != nil {
		return nil, 0, 0, err
	}
	seats := seed.MustLayout("stadium").Seats()
	url := fmt.Sprintf("%s/v1/events/%d/holds", c.coreURL, ev)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.clients * 2, DisableCompression: true}, Timeout: 10 * time.Second}
	var mu sync.Mutex
	var all []sample
	ok := 0
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for i := range c.clients {
		tok, err := signer.Admit(fmt.Sprintf("bench-%d-%d", ev, i), ev, 0, time.Hour)
		if err != nil {
			return nil, 0, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []sample
			won := 0
			var body bytes.Buffer
			for range c.perRound {
				// Four adjacent seats in a random row: rows hold 100 seats.
				p := rand.IntN(len(seats)/100)*100 + rand.IntN(97)
				body.Reset()
				fmt.Fprintf(&body, `{"seats":["%s","%s","%s","%s"]}`, seats[p].ID, seats[p+1].ID, seats[p+2].ID, seats[p+3].ID)
				req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body.Bytes()))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, sample{time.Since(t0)})
				switch resp.StatusCode {
				case 201:
					won++
				case 409:
				default:
					mu.Lock()
					firstErr = fmt.Errorf("hold answered %d", resp.StatusCode)
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
func freshShow(ctx context.Context, db *postgres.DB, show int64) error {
	_, err := db.Pool().Exec(ctx, `DELETE FROM show_seats WHERE show_id = $1`, show)
	if err == nil {
		_, err = db.Pool().Exec(ctx, `INSERT INTO show_seats (show_id, seat_id) SELECT $1, 'S-' || g FROM generate_series(0, 39999) g`, show)
	}
	if err == nil {
		_, err = db.Pool().Exec(ctx, `ANALYZE show_seats`)
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
// with most seats free, that path is rare and cheaper, not dearer.
func productScript(ev int64) string {
	sections, rows := "{", "{"
	for i, sec := range seed.MustLayout("stadium").Sections {
		if i > 0 {
			sections += ","
		}
		sections += sec.Code
	}
	for i, r := range seed.MustLayout("stadium").Sections[0].Rows {
		if i > 0 {
			rows += ","
		}
		rows += r.Label
	}
	sections, rows = sections+"}", rows+"}"
	id := func(k int) string {
		return fmt.Sprintf("('%s'::text[])[:s] || '-' || ('%s'::text[])[:r] || '-' || (:n + %d)", sections, rows, k)
	}
	e := strconv.FormatInt(ev, 10)
	return `\set s random(1, 16)
\set r random(1, 25)
\set n random(1, 97)
WITH account AS (
    INSERT INTO account_tickets AS a (event_id, account, tickets, max_tickets)
    VALUES (` + e + `, 'pgbench-' || :client_id, 4, 1000000)
    ON CONFLICT (event_id, account) DO UPDATE
       SET tickets = a.tickets + EXCLUDED.tickets, max_tickets = EXCLUDED.max_tickets
), held AS (
    UPDATE seats
       SET status = 'HELD', hold_id = gen_random_uuid(), hold_until = now() + make_interval(secs => 480),
           booking_id = NULL, version = version + 1
     WHERE event_id = ` + e + ` AND seat_id = ANY (ARRAY[` + id(0) + `, ` + id(1) + `, ` + id(2) + `, ` + id(3) + `])
       AND (status = 'AVAILABLE' OR (status = 'HELD' AND hold_until < now()))
    RETURNING seat_id, hold_id
)
INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, expires_at)
SELECT coalesce(min(hold_id::text)::uuid, gen_random_uuid()), ` + e + `, 'pgbench-' || :client_id,
       coalesce(array_agg(seat_id ORDER BY seat_id), '{}'), greatest(count(*), 1), greatest(count(*), 1),
       now() + make_interval(secs => 480)
  FROM held;
`
}

// runPgbenchScript runs script with pgbench, c.perRound transactions per
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
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(c.clients), "-j", "2",
		"-t", strconv.Itoa(c.perRound), "-f", file, "-l", "--log-prefix", filepath.Join(dir, "log")}
	if define != "" {
		args = append(args, "-D", define)
	}
	cmd := exec.CommandContext(ctx, pgbench, append(args, c.dbURL)...)
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
func benchSweep(ctx context.Context, db *postgres.DB, reps int) (time.Duration, time.Duration, error) {
	var ours, theirs []time.Duration
	seats := seed.MustLayout("stadium").Seats()
	for rep := range reps {
		// Core: 8,000 one-seat holds by 8,000 accounts, half of them expired.
		ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "sweepbench", Kind: core.KindConcert, Layout: seed.MustLayout("stadium"),
			StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now()})
		if err != nil {
			return 0, 0, err
		}
		// Any expired holds left by earlier steps are swept first, untimed.
		if _, err := db.Sweep(ctx); err != nil {
			return 0, 0, err
		}
		ids := make([]string, 8000)
		for i := range ids {
			ids[i] = seats[i*5].ID
		}
		_, err = db.Pool().Exec(ctx, `
WITH h AS (
    INSERT INTO holds (id, event_id, account, seat_ids, quantity, claimed, expires_at)
    SELECT gen_random_uuid(), $1::bigint, 'sweep-' || $1::bigint || '-' || n, ARRAY[sid], 1, 1,
           CASE WHEN n % 2 = 0 THEN now() - interval '1 second' ELSE now() + interval '8 minutes' END
      FROM unnest($2::text[]) WITH ORDINALITY AS u (sid, n)
    RETURNING id, account, seat_ids[1] AS sid, expires_at
), a AS (
    INSERT INTO account_tickets (event_id, account, tickets, max_tickets) SELECT $1::bigint, account, 1, 6 FROM h
)
UPDATE seats s SET status = 'HELD', hold_id = h.id, hold_until = h.expires_at, version = s.version + 1
  FROM h WHERE s.event_id = $1::bigint AND s.seat_id = h.sid`, ev, ids)
		if err != nil {
			return 0, 0, fmt.Errorf("sweep setup: %w", err)
		}
		db.Pool().Exec(ctx, `VACUUM ANALYZE seats, holds, account_tickets`)
		t0 := time.Now()
		r, err := db.Sweep(ctx)
		d := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		if r.Holds != 4000 || r.Seats != 4000 {
			return 0, 0, fmt.Errorf("core sweep %d freed %d holds, %d seats; want 4000, 4000", rep, r.Holds, r.Seats)
		}
		ours = append(ours, d)

		// Seed: the same shape in show_seats, swept by the seed's UPDATE.
		show := int64(1000 + rep)
		if err := freshShow(ctx, db, show); err != nil {
			return 0, 0, err
		}
		// Only this show in the table, as in the seed's experiment.
		if _, err := db.Pool().Exec(ctx, `DELETE FROM show_seats WHERE show_id <> $1`, show); err != nil {
			return 0, 0, err
		}
		_, err = db.Pool().Exec(ctx, `
UPDATE show_seats SET status = 'HELD', booking_id = g,
       hold_until = CASE WHEN g % 2 = 0 THEN now() - interval '1 second' ELSE now() + interval '8 minutes' END
  FROM generate_series(1, 8000) g
 WHERE show_id = $1 AND seat_id = 'S-' || (g * 5 - 5)`, show)
		if err != nil {
			return 0, 0, err
		}
		db.Pool().Exec(ctx, `VACUUM ANALYZE show_seats`)
		t0 = time.Now()
		tag, err := db.Pool().Exec(ctx, `
UPDATE show_seats
   SET status = 'AVAILABLE', booking_id = NULL, hold_until = NULL
 WHERE status = 'HELD' AND hold_until < now()`)
		d = time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		if tag.RowsAffected() != 4000 {
			return 0, 0, fmt.Errorf("seed sweep freed %d seats; want 4000", tag.RowsAffected())
		}
		theirs = append(theirs, d)
	}
	slices.Sort(ours)
	slices.Sort(theirs)
	return ours[len(ours)/2], theirs[len(theirs)/2], nil
}
