// Command holdstorm is the first cut of the demo sale: a crowd of fans with
// admit tokens storms the core's hold API for the stadium concert, the way
// they will once the gateway admits them. Fans ask for best-available seats
// or pick seats from a stale map (and lose races), some try to pass the
// ticket limit, some release or extend their holds. It prints what happened
// and then checks in the database that no seat is held twice.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/shared/admission"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the storm's setup (shared/config): flags, and DATABASE_URL. A
// tool run by hand: no table in docs/configuration.md; -h lists the settings.
type config struct {
	Core        string `flag:"core" default:"http://127.0.0.1:8081" help:"core base URL"`
	DatabaseURL string `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"the core's database, for the final check"`
	AdmitKey    string `flag:"admit-key" default:".run/keys/admit.key" help:"admit-token private key (the gateway's, in development)"`
	Fans        int    `flag:"fans" default:"3000" min:"1" help:"fans in the storm"`
	Concurrency int    `flag:"concurrency" default:"48" min:"1" help:"fans acting at once"`
}

func main() {
	var c config
	if code := shconfig.Status("holdstorm", &c); code >= 0 {
		os.Exit(code)
	}
	if err := run(context.Background(), c.Core, c.DatabaseURL, c.AdmitKey, c.Fans, c.Concurrency); err != nil {
		fmt.Fprintln(os.Stderr, "holdstorm:", err)
		os.Exit(1)
	}
}

type event struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	Seated   bool   `json:"seated"`
	Capacity int    `json:"capacity"`
	Bands    []struct {
		Code string `json:"code"`
	} `json:"price_bands"`
}

type tally struct {
	mu       sync.Mutex
	outcomes map[string]int
	lat      map[string][]time.Duration
}

func (t *tally) add(kind string, status int, code string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := fmt.Sprintf("%-16s %d %s", kind, status, code)
	t.outcomes[k]++
	t.lat[kind] = append(t.lat[kind], d)
}

func run(ctx context.Context, coreURL, dbURL, keyFile string, fans, conc int) error {
	priv, err := admission.ReadPrivateKeyFile(keyFile)
	if err != nil {
		return err
	}
	signer := admission.NewSigner(priv)
	var list struct{ Events []event }
	if err := getJSON(coreURL+"/v1/events?kind=concert", &list); err != nil {
		return err
	}
	var ev *event
	for i := range list.Events {
		if e := &list.Events[i]; e.Seated && (ev == nil || e.Capacity > ev.Capacity) {
			ev = e
		}
	}
	if ev == nil {
		return fmt.Errorf("no seated concert in the catalog: run the seed first")
	}
	fmt.Printf("holdstorm: %d fans, %d at a time, on %q (event %d, %d seats)\n", fans, conc, ev.Name, ev.ID, ev.Capacity)

	// The "stale map": the front rows of the lower stands that every fan
	// who picks seats by hand goes for.
	sections := []string{"NL1", "NL2", "SL1", "SL2", "EL1", "EL2", "WL1", "WL2"}
	rows := []string{"A", "B", "C", "D"}
	t := &tally{outcomes: map[string]int{}, lat: map[string][]time.Duration{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	evID := strconv.FormatInt(ev.ID, 10)
	start := time.Now()
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range fans {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			tok, err := signer.Admit(fmt.Sprintf("fan-%06d", i), ev.ID, 0, 10*time.Minute)
			if err != nil {
				panic(err)
			}
			do := func(kind, method, path string, body any, hdr ...string) (int, map[string]any) {
				var r io.Reader
				if body != nil {
					b, _ := json.Marshal(body)
					r = bytes.NewReader(b)
				}
				req, _ := http.NewRequestWithContext(ctx, method, coreURL+path, r)
				req.Header.Set("Authorization", "Bearer "+tok)
				for k := 0; k+1 < len(hdr); k += 2 {
					req.Header.Set(hdr[k], hdr[k+1])
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					t.add(kind, 0, "transport_error", time.Since(t0))
					return 0, nil
				}
				defer resp.Body.Close()
				var out map[string]any
				json.NewDecoder(resp.Body).Decode(&out)
				code, _ := out["error"].(string)
				t.add(kind, resp.StatusCode, code, time.Since(t0))
				return resp.StatusCode, out
			}
			count := []int{1, 2, 2, 3, 4, 4, 4, 4, 5, 6}[rand.IntN(10)]
			var status int
			var hold map[string]any
			switch p := rand.IntN(100); {
			case p < 5: // greedy: more than the limit in one go
				status, hold = do("hold over limit", "POST", "/v1/events/"+evID+"/holds",
					map[string]any{"best_available": map[string]any{"band": ev.Bands[rand.IntN(len(ev.Bands))].Code, "count": 8}})
			case p < 40: // picks seats by hand from the stale map
				sec, row := sections[rand.IntN(len(sections))], rows[rand.IntN(len(rows))]
				n := 1 + rand.IntN(100-count)
				seats := make([]string, count)
				for k := range seats {
					seats[k] = fmt.Sprintf("%s-%s-%d", sec, row, n+k)
				}
				status, hold = do("hold seats", "POST", "/v1/events/"+evID+"/holds", map[string]any{"seats": seats})
				if status == 409 { // a seat went a moment ago: fall back to best available
					status, hold = do("hold best", "POST", "/v1/events/"+evID+"/holds",
						map[string]any{"best_available": map[string]any{"band": "PLATINUM", "count": count}})
				}
			default:
				status, hold = do("hold best", "POST", "/v1/events/"+evID+"/holds",
					map[string]any{"best_available": map[string]any{"band": ev.Bands[rand.IntN(len(ev.Bands))].Code, "count": count}})
			}
			if status != 201 {
				return
			}
			id, _ := hold["hold_id"].(string)
			version := fmt.Sprintf(`"%v"`, hold["version"])
			switch p := rand.IntN(100); {
			case p < 15: // closes the app: releases (a real app would on its way out)
				do("release", "DELETE", "/v1/holds/"+id, nil, "If-Match", version)
			case p < 45: // taps Pay: the one extension
				do("extend", "POST", "/v1/holds/"+id+"/extend", nil, "If-Match", version)
				if rand.IntN(10) == 0 { // double tap
					do("extend again", "POST", "/v1/holds/"+id+"/extend", nil)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	fmt.Printf("\n%-40s %8s\n", "request  status  outcome", "count")
	keys := make([]string, 0, len(t.outcomes))
	for k := range t.outcomes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	total := 0
	for _, k := range keys {
		fmt.Printf("%-40s %8d\n", k, t.outcomes[k])
		total += t.outcomes[k]
	}
	fmt.Printf("\n%d requests in %.1fs (%.0f/s)\n", total, elapsed.Seconds(), float64(total)/elapsed.Seconds())
	fmt.Printf("%-16s %8s %8s %8s\n", "latency", "p50 ms", "p99 ms", "max ms")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range t.lat {
			if !yield(k) {
				return
			}
		}
	}) {
		d := t.lat[k]
		slices.Sort(d)
		fmt.Printf("%-16s %8.1f %8.1f %8.1f\n", k, ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1]))
	}
	return check(ctx, dbURL, ev.ID)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// check verifies in the database what the storm must not have broken.
func check(ctx context.Context, dbURL string, ev int64) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var held, holds int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM seats WHERE event_id = $1 AND status = 'HELD' AND hold_until >= now()`, ev).Scan(&held); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM holds WHERE event_id = $1 AND status = 'ACTIVE' AND expires_at > now()`, ev).Scan(&holds); err != nil {
		return err
	}
	fmt.Printf("\nafter the storm: %d active holds own %d seats\n", holds, held)
	// An expired seated hold stays ACTIVE in its row (no sweep ends it:
	// migration 00012), its seats free by lazy expiry: only an unexpired
	// one is live.
	checks := []struct{ name, sql string }{
		{"no seat in two live holds", `SELECT count(*) FROM (SELECT sid FROM holds h, unnest(h.seat_ids) sid
            WHERE h.event_id = $1 AND h.status = 'ACTIVE' AND h.expires_at > now() GROUP BY sid HAVING count(*) > 1) d`},
		// A seat whose hold lapsed stays HELD under it, ended or not (the
		// sweeper writes no seat row: lazy expiry freed it): only a seat
		// held into the future must be under the active hold that lists it.
		{"every held seat under the active hold that lists it", `SELECT count(*) FROM seats s LEFT JOIN holds h ON h.id = s.hold_id
            WHERE s.event_id = $1 AND s.status = 'HELD' AND s.hold_until >= now()
              AND (h.id IS NULL OR h.status <> 'ACTIVE' OR NOT s.seat_id = ANY (h.seat_ids))`},
		{"every live hold owns all its seats", `SELECT count(*) FROM holds h, unnest(h.seat_ids) sid
            LEFT JOIN seats s ON s.seat_id = sid
            WHERE h.event_id = $1 AND s.event_id = $1 AND h.status = 'ACTIVE' AND h.expires_at > now() AND (s.hold_id IS DISTINCT FROM h.id OR s.status <> 'HELD')`},
		{"no account over its limit", `SELECT count(*) FROM account_tickets WHERE event_id = $1 AND (tickets > max_tickets OR tickets < 0)`},
		// The limit is lazy (core/postgres sweepSQL): an expired hold's
		// tickets count (ACTIVE past its expiry, or swept and marked owed)
		// until its account's next refusal.
		{"account counters equal their active, booked and owed holds", `SELECT count(*) FROM (SELECT account, tickets FROM account_tickets WHERE event_id = $1) a
            FULL JOIN (SELECT account, sum(quantity) n FROM holds WHERE event_id = $1 AND (status IN ('ACTIVE', 'BOOKED') OR owed) GROUP BY 1) h USING (account)
            WHERE coalesce(a.tickets, 0) <> coalesce(h.n, 0)`},
		{"every active or owed hold on its account's list", `SELECT count(*) FROM holds h LEFT JOIN account_tickets a ON a.event_id = h.event_id AND a.account = h.account
            WHERE h.event_id = $1 AND (h.status = 'ACTIVE' OR h.owed) AND NOT h.id = ANY (coalesce(a.holds, '{}'))`},
	}
	failed := 0
	for _, c := range checks {
		var n int
		if err := conn.QueryRow(ctx, c.sql, ev).Scan(&n); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		verdict := "PASS"
		if n != 0 {
			verdict = "FAIL"
			failed++
		}
		fmt.Printf("  %s  %s (%d violations)\n", verdict, c.name, n)
	}
	if failed > 0 {
		return fmt.Errorf("%d invariants broken", failed)
	}
	return nil
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
