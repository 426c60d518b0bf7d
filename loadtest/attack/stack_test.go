package attack

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/servicetest"
)

var ctx = context.Background()

// attackStack is the product as processes (package stack: paysim, core and
// gateway from bin/) on a database of the suite's own, with what the
// attacks need to forge and to check: the run's keys (to sign good tokens
// beside the forged ones), the database, Redis.
type attackStack struct {
	apps     *stack.Stack
	db       *pgxpool.Pool
	dbURL    string
	rdb      *goredis.Client
	gateway  string // base URLs
	core     string
	paysim   string
	debug    string // the gateway's pprof listener (forces a GC before a memory reading)
	admit    *admission.Signer
	admitKey ed25519.PrivateKey // the gateway's key, to forge with
	signing  ed25519.PrivateKey // the core's key: account tokens, hold grants
	event    int64              // the cinema show on sale now
	table    *table
}

func newStack(t *testing.T) *attackStack {
	t.Helper()
	redisURL := servicetest.Env(t, "REDIS_URL")
	dbURL, drop, err := stack.FreshDatabase(ctx, servicetest.Env(t, "DATABASE_URL"), "attack")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drop(context.Background()) })
	debug, err := stack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	// Default limits: the per-address limits are part of what is attacked.
	// Each attack speaks from a loopback address of its own (client), so
	// one attack's bucket is never another's.
	apps, err := stack.Start(ctx, stack.Options{Dir: t.TempDir(), DatabaseURL: dbURL, RedisURL: redisURL,
		PaysimEnv:  []string{`ONSALE_PAYSIM_BEHAVIOUR={"upi_delay_min":"1h","upi_delay_max":"1h"}`},
		CoreEnv:    []string{"ONSALE_LOG_LEVEL=warn", "ONSALE_SWEEP_INTERVAL=1h", "ONSALE_SMS_URL="},
		GatewayEnv: []string{"ONSALE_LOG_LEVEL=warn", "ONSALE_DEBUG_ADDR=" + debug}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { apps.Stop() })
	// Redis keys are per event id: this database's ids start where no
	// other test's will be.
	if err := stack.SpreadEventIDs(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	opt, err := goredis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	admitKey, err := admission.ReadPrivateKeyFile(apps.AdmitKey)
	if err != nil {
		t.Fatal(err)
	}
	signing, err := admission.ReadPrivateKeyFile(apps.SigningKey)
	if err != nil {
		t.Fatal(err)
	}
	s := &attackStack{apps: apps, db: db, dbURL: dbURL, rdb: rdb, gateway: apps.GatewayURL, core: apps.CoreURL,
		paysim: apps.PaysimURL, debug: "http://" + debug, admit: admission.NewSigner(admitKey), admitKey: admitKey, signing: signing, table: &table{}}
	s.event = s.seed(t)
	// A fan joins before the attacks: the event's room exists, as it does
	// in a sale, so a refused request that reaches the room finds it made.
	if r := do(t, client(2), "POST", fmt.Sprintf("%s/v1/events/%d/queue", s.gateway, s.event), nil); r.status != 200 {
		t.Fatalf("the first fan's join = %s %s", r.seen(), r.raw)
	}
	return s
}

// seed seeds the demo catalog (bin/seed, the stadium cut to a few rows) and
// returns one of its cinema shows, on sale since a minute ago, starting in
// six hours, holds of eight minutes.
func (s *attackStack) seed(t *testing.T) int64 {
	t.Helper()
	bin, err := stack.Binary("", "seed")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-database-url", s.dbURL, "-stadium-seats", "100").CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	var id int64
	err = s.db.QueryRow(ctx, `
UPDATE events SET onsale_at = now() - interval '1 minute', starts_at = now() + interval '6 hours', hold_seconds = 480
 WHERE id = (SELECT id FROM events WHERE kind = 'movie' ORDER BY id DESC LIMIT 1)
RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// client is an HTTP client whose connections come from the loopback
// address 127.0.0.<n>: each attack its own address, so the gateway's
// per-address buckets of one attack are not another's.
func client(n int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(n))}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
		MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

// reply is an answer: status, headers, the JSON body's error code.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// code is the error code of an error answer ("" if none).
func (r reply) code() string {
	c, _ := r.body["error"].(string)
	return c
}

// seen says an answer the way the table shows it: "401 unauthorized".
func (r reply) seen() string {
	if c := r.code(); c != "" {
		return fmt.Sprintf("%d %s", r.status, c)
	}
	return fmt.Sprint(r.status)
}

// do sends a request (body: nil, a string, or JSON of any other value) with
// headers as name, value pairs.
func do(t testing.TB, c *http.Client, method, url string, body any, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode, header: resp.Header}
	out.raw, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(out.raw, &out.body)
	return out
}

// bearer is the Authorization header's pair for do.
func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// admitToken is a genuine admit token (the gateway's key) for account.
func (s *attackStack) admitToken(t testing.TB, account string, event int64) string {
	t.Helper()
	tok, err := s.admit.Admit(account, event, 0, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// seats are n seats of the event that are AVAILABLE now, by seat id.
func (s *attackStack) seats(t testing.TB, n int) []string {
	t.Helper()
	rows, err := s.db.Query(ctx, `SELECT seat_id FROM seats WHERE event_id = $1 AND status = 'AVAILABLE' ORDER BY pos LIMIT $2`, s.event, n)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(ids) < n {
		t.Fatalf("seats: %v (%d of %d available)", err, len(ids), n)
	}
	return ids
}

// hold holds n available seats for account through the gateway and
// returns the hold's id and its grant (hold_token).
func (s *attackStack) hold(t testing.TB, c *http.Client, account string, n int) (id, grant string) {
	t.Helper()
	r := do(t, c, "POST", fmt.Sprintf("%s/v1/events/%d/holds", s.gateway, s.event), map[string]any{"seats": s.seats(t, n)},
		bearer(s.admitToken(t, account, s.event))...)
	if r.status != 201 {
		t.Fatalf("hold = %s %s", r.seen(), r.raw)
	}
	id, _ = r.body["hold_id"].(string)
	grant, _ = r.body["hold_token"].(string)
	return id, grant
}

// pay starts the UPI flow on a hold (the simulator leaves it pending for an
// hour) and returns the booking id and the payment id.
func (s *attackStack) pay(t testing.TB, c *http.Client, account, hold string) (int64, string) {
	t.Helper()
	r := do(t, c, "POST", s.gateway+"/v1/holds/"+hold+"/payment",
		map[string]any{"email": "fan@onsale.test", "phone": "+919800000001"},
		append(bearer(s.admitToken(t, account, s.event)), "Idempotency-Key", "pay-"+hold)...)
	if r.status != 201 {
		t.Fatalf("pay = %s %s", r.seen(), r.raw)
	}
	b, _ := r.body["booking"].(map[string]any)
	p, _ := r.body["payment"].(map[string]any)
	id, _ := b["booking_id"].(float64)
	pid, _ := p["id"].(string)
	return int64(id), pid
}

// state is what an attack could have changed: a fingerprint of every row
// of every table of the core, the Redis keys of the events the attack
// names and whether the room's event set holds them.
type state struct {
	tables map[string]string // table -> "rows:md5"
	redis  []string
}

// attackersOwn leaves the attacker's own rows out of a table's fingerprint:
// a refused payment request's answer is kept under the attacker's own
// idempotency key (its replay answers the same), which is the attacker's
// state, not the victim's. Attackers' identities start with "mallory".
var attackersOwn = map[string]string{"idempotency_keys": "account NOT LIKE 'mallory%'"}

// jobsOnly fingerprints a table by what was queued, not by its worker's
// progress: the outbox's jobs (kind and booking) are what an attack could
// add; attempts, leases and errors move by themselves while the jobs of
// earlier attacks' bookings (ticket email with no relay) retry.
var jobsOnly = map[string]string{"outbox": "(t.id, t.kind, t.booking_id)::text"}

// volatile are the event's keys that change by themselves: the room's
// ticks (the admission bucket, offers, sessions, claims) and the core's
// seat-map cache (shared/seatmap, written after the holds of earlier
// attacks): not a refused request's doing.
var volatile = []string{"bucket", "offers", "active", "claims", "seatmap"}

// room is the Redis state an attack on event could change: the names of its
// keys (those the ticks leave alone), the places handed out (identities,
// pre-queue, last position) and whether the room's event set has it.
func (s *attackStack) room(t testing.TB, ev int64) []string {
	t.Helper()
	prefix := fmt.Sprintf("{evt:%d}:", ev)
	keys, err := s.rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if !slices.Contains(volatile, strings.TrimPrefix(k, prefix)) {
			out = append(out, k)
		}
	}
	ids, err1 := s.rdb.HLen(ctx, prefix+"ids").Result()
	pre, err2 := s.rdb.ZCard(ctx, prefix+"pre").Result()
	seq, err3 := s.rdb.Get(ctx, prefix+"seq").Result()
	in, err4 := s.rdb.SIsMember(ctx, "onsale:events", ev).Result()
	if err := errors.Join(err1, err2, err4); err != nil || (err3 != nil && err3 != goredis.Nil) {
		t.Fatalf("room %d: %v %v", ev, err, err3)
	}
	if len(out) > 0 || in {
		out = append(out, fmt.Sprintf("%sids=%d pre=%d seq=%q in-set=%v", prefix, ids, pre, seq, in))
	}
	return out
}

// snap reads the state for the events.
func (s *attackStack) snap(t testing.TB, events ...int64) state {
	t.Helper()
	rows, err := s.db.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	st := state{tables: map[string]string{}}
	for _, n := range names {
		var count int64
		var sum string
		row := "t::text"
		if p, ok := jobsOnly[n]; ok {
			row = p
		}
		q := `SELECT count(*), coalesce(md5(string_agg(` + row + `, '|' ORDER BY ` + row + `)), '') FROM ` + pgx.Identifier{n}.Sanitize() + ` t`
		if w, ok := attackersOwn[n]; ok {
			q += " WHERE " + w
		}
		if err := s.db.QueryRow(ctx, q).Scan(&count, &sum); err != nil {
			t.Fatal(err)
		}
		st.tables[n] = fmt.Sprintf("%d:%s", count, sum)
	}
	for _, ev := range events {
		st.redis = append(st.redis, s.room(t, ev)...)
	}
	sort.Strings(st.redis)
	return st
}

// unchanged fails the test when the state moved from before, naming what.
func (s *attackStack) unchanged(t testing.TB, before state, events ...int64) {
	t.Helper()
	s.unchangedBut(t, before, nil, events...)
}

// unchangedBut is unchanged for every table but those named in moves: the
// tables an acknowledged attack is expected to write (its provider event,
// the refund it queues), which its caller checks row by row instead.
func (s *attackStack) unchangedBut(t testing.TB, before state, moves []string, events ...int64) {
	t.Helper()
	after := s.snap(t, events...)
	var moved []string
	for n, v := range after.tables {
		if before.tables[n] != v && !slices.Contains(moves, n) {
			moved = append(moved, fmt.Sprintf("table %s (%s -> %s)", n, before.tables[n], v))
		}
	}
	if !slices.Equal(before.redis, after.redis) {
		moved = append(moved, fmt.Sprintf("redis keys %v -> %v", before.redis, after.redis))
	}
	if len(moved) > 0 {
		sort.Strings(moved)
		t.Errorf("the attack changed state:\n  %s", strings.Join(moved, "\n  "))
	}
}

// want asserts an answer's status and code, and records the row.
func (s *attackStack) want(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || r.code() != code {
		t.Errorf("answer = %s %s; want %d %s", r.seen(), r.raw, status, code)
	}
}

// metric is the sum of a metric's samples (every label set) on a /metrics page.
func metric(t testing.TB, c *http.Client, url, name string) float64 {
	t.Helper()
	r := do(t, c, "GET", url, nil)
	var sum float64
	for _, line := range strings.Split(string(r.raw), "\n") {
		if n, v, ok := strings.Cut(line, " "); ok && (n == name || strings.HasPrefix(n, name+"{")) {
			var f float64
			fmt.Sscan(v, &f)
			sum += f
		}
	}
	return sum
}

// gatewayHeap is the gateway's heap in use right after a collection: the
// profiler's heap endpoint with gc=1 collects first, then /metrics reads
// the runtime's figure.
func (s *attackStack) gatewayHeap(t testing.TB, c *http.Client) float64 {
	t.Helper()
	do(t, c, "GET", s.debug+"/debug/pprof/heap?gc=1", nil)
	return metric(t, c, s.apps.GatewayAdminURL+"/metrics", "go_memstats_heap_inuse_bytes")
}
