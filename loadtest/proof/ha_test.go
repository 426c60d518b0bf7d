package proof

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/servicetest"
)

// startCluster starts etcd and three Patroni members for the test, stopped
// at its end. A missing engine skips the test, or fails it under
// ONSALE_REQUIRE_SERVICES=1 (make test).
func startCluster(t *testing.T, o topology.PGOptions) *topology.PG {
	t.Helper()
	if o.Base == 0 {
		base, err := topology.FreeBlock(topology.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		o.Base = base
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pg, err := topology.StartPG(c, o)
	if errors.Is(err, topology.ErrNoPGEngine) {
		servicetest.Missing(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("stop the PostgreSQL cluster: %v", err)
		}
	})
	return pg
}

// haStack is the real core (bin/core), one or more processes on one
// database, with the payment simulator in process.
type haStack struct {
	*proofStack
	cores []*stack.Stack
}

// newHAStack starts n cores on dbURL (already created and empty), seeds
// the stadium concert and returns the stack. coreEnv[i], when given, is
// added to core i's environment.
func newHAStack(t *testing.T, dbURL string, n int, coreEnv ...[]string) *haStack {
	t.Helper()
	b := paysim.DefaultBehaviour()
	b.UPIDelayMin, b.UPIDelayMax = time.Hour, time.Hour // tests settle UPI payments themselves
	b.WebhookRetryBase, b.WebhookRetryMax = 20*time.Millisecond, 200*time.Millisecond
	sim, err := paysim.New(paysim.Config{APIKey: apiKey, WebhookSecret: webhookSecret, Control: true, Behaviour: b}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); simSrv.Close() })
	env := []string{"ONSALE_DB_MAX_CONNS=16", "ONSALE_OUTBOX_LEASE=5s", "ONSALE_OUTBOX_POLL=100ms", "ONSALE_SWEEP_INTERVAL=1h",
		"ONSALE_PUBLIC_URL=http://onsale.test", "ONSALE_LOG_LEVEL=warn", "ONSALE_SMS_URL="}
	dir := t.TempDir() // one key directory: every core trusts the same keys
	h := &haStack{}
	for i := range n {
		e := slices.Clone(env)
		if i < len(coreEnv) {
			e = append(e, coreEnv[i]...)
		}
		apps, err := stack.Start(ctx, stack.Options{Dir: dir, Apps: []string{stack.Core}, DatabaseURL: dbURL, PaysimURL: simSrv.URL, CoreEnv: e})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { apps.Stop() })
		h.cores = append(h.cores, apps)
	}
	sim.SetWebhookURL(h.cores[0].CoreURL + "/v1/webhooks/payments")
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	key, err := admission.ReadPrivateKeyFile(h.cores[0].AdmitKey)
	if err != nil {
		t.Fatal(err)
	}
	h.proofStack = &proofStack{db: db, dbURL: dbURL, sim: sim, simURL: simSrv.URL, apps: h.cores[0], coreURL: h.cores[0].CoreURL,
		admit: admission.NewSigner(key)}
	h.event = seedStadium(t, dbURL)
	return h
}

// freeSeats returns n seats of the event, in order, skipping skip.
func (s *proofStack) freeSeats(t *testing.T, n, skip int) []string {
	t.Helper()
	rows, err := s.db.Query(ctx, `SELECT seat_id FROM seats WHERE event_id = $1 AND status = 'AVAILABLE' ORDER BY seat_id OFFSET $2 LIMIT $3`,
		s.event, skip, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		out = append(out, id)
	}
	if len(out) < n {
		t.Fatalf("only %d free seats; want %d", len(out), n)
	}
	return out
}

// ack is a booking a fan was told is confirmed.
type ack struct {
	booking int64
	hold    string
	seat    string
	account string
	at      time.Time
	core    string
}

// sample is one answer a fan got, for the failover figures.
type sample struct {
	op       string // hold, confirm
	sent, at time.Time
	status   int // 0: no HTTP answer (connection refused, timeout)
}

// crowd is a set of concurrent fans booking single seats through the real
// core with the card flow: hold, then confirm (Idempotency-Key per hold),
// each retried on 503, 409 request_in_flight, 502 and no answer, as a fan's
// app does. It keeps every confirmation it was told about and every answer.
type crowd struct {
	s      *proofStack
	client *http.Client

	mu      sync.Mutex
	acks    []ack
	samples []sample
	orphans int // a hold retried after a lost answer found its seat taken (by the lost hold itself)
	odd     []string
}

func newCrowd(s *proofStack) *crowd {
	return &crowd{s: s, client: &http.Client{Timeout: 30 * time.Second}}
}

// run starts one fan per seat list, each on its core URL, booking its
// seats one after another until ctx ends; the returned func waits for them.
func (c *crowd) run(ctx context.Context, name string, coreURLs []string, seats [][]string) (wait func()) {
	var wg sync.WaitGroup
	for i, list := range seats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := coreURLs[i%len(coreURLs)]
			for n, seat := range list {
				if ctx.Err() != nil {
					return
				}
				c.book(ctx, url, fmt.Sprintf("%s-%d-%d", name, i, n), seat)
			}
		}()
	}
	return wg.Wait
}

// call sends one request; status 0 is no HTTP answer.
func (c *crowd) call(op, method, url, account string, body any, hdr ...string) (int, map[string]any) {
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, url, bytes.NewReader(j))
	tok, err := c.s.admit.Admit(account, c.s.event, 0, 10*time.Minute)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	sent := time.Now()
	resp, err := c.client.Do(req)
	status := 0
	var out map[string]any
	if err == nil {
		status = resp.StatusCode
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		json.Unmarshal(raw, &out)
		if status == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			c.note("%s %s: 503 without Retry-After", method, url)
		}
	}
	c.mu.Lock()
	c.samples = append(c.samples, sample{op: op, sent: sent, at: time.Now(), status: status})
	c.mu.Unlock()
	return status, out
}

func (c *crowd) note(format string, args ...any) {
	c.mu.Lock()
	if len(c.odd) < 20 {
		c.odd = append(c.odd, fmt.Sprintf(format, args...))
	}
	c.mu.Unlock()
}

// retryable: what a fan's app retries after a pause.
func retryable(status int, body map[string]any) bool {
	switch status {
	case 0, http.StatusServiceUnavailable, http.StatusBadGateway:
		return true
	case http.StatusConflict:
		return body["error"] == eIdemInFlight
	}
	return false
}

// book holds one seat and confirms it with a card, retrying as a fan does
// while ctx lasts.
func (c *crowd) book(ctx context.Context, coreURL, account, seat string) {
	hold, retried := "", false
	for ctx.Err() == nil {
		st, body := c.call("hold", "POST", fmt.Sprintf("%s/v1/events/%d/holds", coreURL, c.s.event), account, map[string]any{"seats": []string{seat}})
		if st == http.StatusCreated {
			hold, _ = body["hold_id"].(string)
			break
		}
		if st == http.StatusConflict && body["error"] == "seats_taken" && retried {
			c.mu.Lock()
			c.orphans++ // the first try's hold committed, its answer lost
			c.mu.Unlock()
			return
		}
		if !retryable(st, body) {
			c.note("hold %s: %d %v", seat, st, body)
			return
		}
		retried = true
		time.Sleep(100 * time.Millisecond)
	}
	if hold == "" {
		return
	}
	for ctx.Err() == nil {
		st, body := c.call("confirm", "POST", coreURL+"/v1/holds/"+hold+"/confirm", account, map[string]any{"payment_token": "tok_visa"},
			"Idempotency-Key", "confirm-"+hold)
		b := body
		if nested, ok := body["booking"].(map[string]any); ok {
			b = nested
		}
		if (st == http.StatusOK || st == http.StatusAccepted) && b["status"] == bookingConfirmed {
			id, _ := b["booking_id"].(float64)
			c.mu.Lock()
			c.acks = append(c.acks, ack{booking: int64(id), hold: hold, seat: seat, account: account, at: time.Now(), core: coreURL})
			c.mu.Unlock()
			return
		}
		if !retryable(st, body) {
			c.note("confirm %s: %d %v", hold, st, body)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *crowd) ackCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acks)
}

// acksSince counts the confirmations told after t.
func (c *crowd) acksSince(t time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, a := range c.acks {
		if a.at.After(t) {
			n++
		}
	}
	return n
}

// statuses counts answers by operation and status ("hold 503": 12).
func (c *crowd) statuses() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, s := range c.samples {
		out[fmt.Sprintf("%s %d", s.op, s.status)]++
	}
	return out
}

// window is what the fans saw of an outage that began at or after from:
// the first error answer (503 or none) and the first success sent after
// it.
func (c *crowd) window(from time.Time) (firstErr, firstOK time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ss := slices.Clone(c.samples)
	sort.Slice(ss, func(i, j int) bool { return ss[i].at.Before(ss[j].at) })
	for _, s := range ss {
		if s.at.Before(from) {
			continue
		}
		bad := s.status == 0 || s.status >= 500
		switch {
		case firstErr.IsZero() && bad:
			firstErr = s.at
		case !firstErr.IsZero() && !bad && s.status < 300 && s.sent.After(firstErr):
			return firstErr, s.at
		}
	}
	return firstErr, firstOK
}

// lost returns the acknowledged bookings the database does not have as
// CONFIRMED with their seat booked under them (db: a pool on the
// primary). A booking id is checked with its hold: ids lost with a primary
// may be handed out again by the new one.
func (c *crowd) lost(t *testing.T, db *pgxpool.Pool, event int64) []ack {
	t.Helper()
	c.mu.Lock()
	acks := slices.Clone(c.acks)
	c.mu.Unlock()
	var out []ack
	for _, a := range acks {
		var ok bool
		err := db.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM bookings b JOIN seats s ON s.event_id = b.event_id AND s.seat_id = $4
                WHERE b.id = $1 AND b.hold_id = $2::uuid AND b.status = 'CONFIRMED' AND b.event_id = $3
                  AND s.status = 'BOOKED' AND s.booking_id = b.id)`, a.booking, a.hold, event, a.seat).Scan(&ok)
		if err != nil {
			t.Fatalf("check booking %d: %v", a.booking, err)
		}
		if !ok {
			out = append(out, a)
		}
	}
	return out
}

// soldTwice lists seats in more than one CONFIRMED booking, and seats two
// fans were both told they bought.
func (c *crowd) soldTwice(t *testing.T, db *pgxpool.Pool, event int64) []string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT seat FROM bookings, unnest(seat_ids) AS seat
 WHERE event_id = $1 AND status = 'CONFIRMED' GROUP BY seat HAVING count(*) > 1`, event)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, "in the database: "+s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	told := map[string]string{}
	for _, a := range c.acks {
		if other, ok := told[a.seat]; ok && other != a.account {
			out = append(out, fmt.Sprintf("told to %s and %s: %s", other, a.account, a.seat))
		}
		told[a.seat] = a.account
	}
	return out
}

// split deals seats to n fans.
func split(seats []string, n int) [][]string {
	out := make([][]string, n)
	for i, s := range seats {
		out[i%n] = append(out[i%n], s)
	}
	return out
}

// waitUntil polls cond every 50 ms until it holds or d passes; it reports
// whether it held (the caller says what it means).
func waitUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

func statusLine(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %d; ", k, m[k])
	}
	return b.String()
}
