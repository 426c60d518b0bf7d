package proof

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology"
	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/servicetest"
)

// The failover's sale: the rate dial (new_users_per_minute), claim and
// session windows, and the fans of each wave per event.
const (
	foRate        = 600 // a minute: 10 places a second
	foClaim       = 20  // seconds
	foSession     = 600 // seconds: no session ends during the test
	foWave1       = 40  // join before the stall
	foWave2       = 40  // join while the replication stream is held back: acknowledged, then lost
	foWave3       = 20  // join after the kill: given the lost places again
	foPoll        = 300 * time.Millisecond
	foDeadline    = 50 * time.Second
	foSecret      = "failover-test-queue-secret-0123456789abcdef"
	foStallBefore = 1500 * time.Millisecond // wave 1 in line and being admitted
	foStallFor    = time.Second             // joins, claims and ticks of this second are lost
)

// TestRedisFailoverKeepsPlaces: two real gateways (bin/gateway) on a Redis
// Cluster of 3 masters and 3 replicas; fans join, poll and claim over
// HTTP while the master holding the events' slot is killed with SIGKILL.
// The master's replication stream is held back for a second before the
// kill (topology.ReplProxy), so the failover really loses acknowledged
// joins, claims and ticks. Two events on that master: one with the
// restore rule (gateway/redis/restore.lua), one with it switched off (the
// control). With the rule, every fan who was told a place is let in at
// that place, admission resumes by itself, and admission stays within
// the stated bound; without it, fans whose joins were lost end up at the
// back.
func TestRedisFailoverKeepsPlaces(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		servicetest.Missing(t, "redis-server is not installed")
	}
	if _, err := stack.Binary("", stack.Gateway); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	base, err := topology.FreeBlock(topology.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := topology.StartReplProxy(fmt.Sprintf("127.0.0.1:%d", base+37), fmt.Sprintf("127.0.0.1:%d", base+31))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	rc, err := topology.StartRedis(ctx, topology.RedisOptions{Dir: dir, Base: base, Announce: func(i int) int {
		if i == 0 { // n1, the master of the events' slot, behind the proxy
			return base + 37
		}
		return 0
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Stop() })
	rdb, err := redisconn.Open(ctx, rc.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()

	// Two events whose slot n1 holds.
	master := rc.Nodes[0]
	var events []int64
	for len(events) < 2 {
		id := 1_000_000_000 + rand.Int64N(1<<40)
		if m, err := rc.MasterOf(ctx, evtKey(id, "dials")); err == nil && m == master {
			events = append(events, id)
		}
	}
	fix, control := events[0], events[1]
	for _, ev := range events {
		if err := setupFailoverEvent(ctx, rdb, ev, ev == control); err != nil {
			t.Fatal(err)
		}
	}

	var gws []string
	for i := range 2 {
		apps, err := stack.Start(ctx, stack.Options{Dir: filepath.Join(dir, fmt.Sprintf("gw%d", i+1)), Apps: []string{stack.Gateway},
			RedisURL: rc.Addrs(), GatewayEnv: []string{"ONSALE_QUEUE_SECRET=" + foSecret, "ONSALE_CORE_URL=http://127.0.0.1:1",
				"ONSALE_IP_RATE=100000", "ONSALE_TOKEN_RATE=1000", "ONSALE_LOG_LEVEL=warn", "ONSALE_TICK=100ms",
				// no core here: its health feedback would read the missing core
				// as unreachable and hold admission at its floor, which is not
				// what this test measures
				"ONSALE_HEALTH=off"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { apps.Stop() })
		gws = append(gws, apps.GatewayURL)
	}

	// Admission starts now (server time: the bucket's clock).
	t0, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		err := rdb.HSet(ctx, evtKey(ev, "dials"), "paused", 0).Err()
		if err == nil {
			err = rdb.HIncrBy(ctx, evtKey(ev, "dials"), "version", 1).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run := &foRun{gws: gws, client: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 512}}, deadline: time.Now().Add(foDeadline)}
	wave := func(n, w int) {
		for _, ev := range events {
			for range n {
				run.start(ev, w)
			}
		}
	}
	wave(foWave1, 1)
	time.Sleep(foStallBefore)

	// Hold back n1's replication stream: every write from now on is lost
	// at the kill.
	if proxy.Replicating() == 0 {
		t.Fatal("n1's replica does not replicate through the proxy: the control could not make a loss")
	}
	proxy.Stall()
	tStall := time.Now()
	wave(foWave2, 2)
	time.Sleep(foStallFor)
	replica, err := rc.Replica(ctx, master)
	if err != nil || replica == nil {
		t.Fatalf("n1's replica: %v, %v", replica, err)
	}
	tKill := time.Now()
	if err := rc.Kill(master); err != nil {
		t.Fatal(err)
	}
	// What the failover loses is what the replica has not got: read it
	// there, now, before its promotion lets any gateway write (a fan's
	// token restoring its place would hide the loss from a later read).
	lost := map[int64]*foLoss{}
	for _, ev := range events {
		ids, err := readReplica(ctx, replica, evtKey(ev, "ids"))
		if err != nil {
			t.Fatal(err)
		}
		l := &foLoss{}
		for _, f := range run.fans(ev) {
			f.mu.Lock()
			switch {
			case f.first > 0 && f.joinedAt.Before(tKill) && ids[f.identity] == "":
				l.joins++
				f.lostJoin = true
			case !f.admittedAt.IsZero() && f.admittedAt.Before(tKill) && ids[f.identity] != "done":
				l.claims++
			}
			f.mu.Unlock()
		}
		lost[ev] = l
	}
	wave(foWave3, 3)
	promoted, err := rc.WaitFailover(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	tFailover := time.Now()
	proxy.Close() // what it held back is dropped, never delivered

	t.Logf("stall at +%v, kill at +%v, %s promoted at +%v (failover %.2f s)", tStall.Sub(run.began).Round(time.Millisecond),
		tKill.Sub(run.began).Round(time.Millisecond), promoted.Name, tFailover.Sub(run.began).Round(time.Millisecond),
		tFailover.Sub(tKill).Seconds())
	run.wait()

	for _, ev := range events {
		name := map[int64]string{fix: "restore rule", control: "control (rule off)"}[ev]
		l := lost[ev]
		t.Logf("%s: the failover lost %d acknowledged joins and %d claims", name, l.joins, l.claims)
		if l.joins == 0 {
			t.Fatalf("%s: no acknowledged join was lost: the stall made no loss, so this run proves nothing", name)
		}
	}

	// The restore rule: every fan told a place is let in at that place.
	fans := run.fans(fix)
	for _, f := range fans {
		if f.first == 0 {
			t.Errorf("restore rule: fan %s (wave %d) never got a place: joins %v", f.identity, f.wave, f.joinStatus)
			continue
		}
		if f.admittedAt.IsZero() {
			t.Errorf("restore rule: fan %s (wave %d, place %d, lost join %v) was not let in by the deadline; places seen %v",
				f.identity, f.wave, f.first, f.lostJoin, f.seen)
			continue
		}
		if f.admittedPos != f.first || slices.ContainsFunc(f.seen, func(p int64) bool { return p != f.first }) {
			t.Errorf("restore rule: fan %s (wave %d, lost join %v) joined at %d, saw %v, let in at %d: it lost its place",
				f.identity, f.wave, f.lostJoin, f.first, f.seen, f.admittedPos)
		}
	}
	// Admission resumed by itself after the failover.
	if !slices.ContainsFunc(fans, func(f *foFan) bool { return f.admittedAt.After(tFailover) }) {
		t.Errorf("restore rule: nobody was let in after the failover")
	}

	// The bound (restore.lua): admissions beyond the dials, per failover,
	// at most rate/60 + lost claims + restored fans sharing a place (at
	// most the lost joins). Two measures, by the server's clock (a
	// session's end less its length is when Redis took the claim):
	//   - every place let in was within the dial's places by then (rate x
	//     time since admission began + the bucket's one second): the lost
	//     tick let no burst of places through;
	//   - admissions in any window from the kill on, less the dial's rate
	//     over the window: what the failover let in beyond the dial
	//     (identities, so shared places count twice).
	perSec := float64(foRate) / 60
	var after []time.Time
	places := map[int64]int{}
	bucketOK := true
	for _, f := range fans {
		if f.admittedAt.IsZero() {
			continue
		}
		places[f.admittedPos]++
		if !f.claimedAt.Before(tKill) {
			after = append(after, f.claimedAt)
		}
		if dial := perSec*f.claimedAt.Sub(t0).Seconds() + perSec; float64(f.admittedPos) > dial+1 {
			bucketOK = false
			t.Errorf("restore rule: place %d let in at +%.2f s, beyond the dial's %.1f places by then: a burst",
				f.admittedPos, f.claimedAt.Sub(t0).Seconds(), dial)
		}
	}
	slices.SortFunc(after, func(a, b time.Time) int { return a.Compare(b) })
	excess := 0.0
	for i := range after {
		for j := i; j < len(after); j++ {
			excess = max(excess, float64(j-i+1)-perSec*after[j].Sub(after[i]).Seconds())
		}
	}
	shared := 0
	for _, n := range places {
		shared += n - 1
	}
	l := lost[fix]
	bound := perSec + float64(l.claims+l.joins)
	t.Logf("restore rule: %d fans let in, %d after the kill, %d at a place shared with another fan (bound: the lost joins, %d); "+
		"admissions beyond the dial after the kill at worst %.1f, bound rate/60 + lost claims + lost joins = %.0f + %d + %d = %.0f; "+
		"every place within the dial's: %v", len(places)+shared, len(after), shared, l.joins, excess, perSec, l.claims, l.joins, bound, bucketOK)
	if excess > bound || shared > l.joins {
		t.Errorf("restore rule: admissions beyond the dial %.1f (%d shared places); bound %.0f", excess, shared, bound)
	}
	if first, last := firstAdmission(fans, tKill); !first.IsZero() {
		t.Logf("admission stopped %.2f s (last admission before the kill to first after it)", first.Sub(last).Seconds())
	}

	// The control: without the rule, fans whose joins were lost lose their places.
	cmoved := 0
	for _, f := range run.fans(control) {
		if f.first > 0 && (f.admittedPos != f.first || slices.ContainsFunc(f.seen, func(p int64) bool { return p != f.first })) {
			cmoved++
		}
	}
	t.Logf("control (rule off): %d of %d fans lost their place (sent to the back)", cmoved, len(run.fans(control)))
	if cmoved == 0 {
		t.Errorf("control: no fan lost its place without the restore rule: the test cannot see the loss it guards against")
	}

	// Errors, as the fans saw them: joins for the dead master's events
	// answer 503 with Retry-After while it fails over; polls are answered
	// from the gateways' memory throughout.
	run.report(t, tKill)
}

// firstAdmission is the first admission after kill and the last before
// it (the fans' clock).
func firstAdmission(fans []*foFan, kill time.Time) (first, last time.Time) {
	for _, f := range fans {
		a := f.admittedAt
		switch {
		case a.IsZero():
		case a.Before(kill):
			if a.After(last) {
				last = a
			}
		case first.IsZero() || a.Before(first):
			first = a
		}
	}
	return first, last
}

// readReplica reads a hash from a replica itself (READONLY: a replica
// answers reads of its master's slots on that connection).
func readReplica(ctx context.Context, n *topology.RedisNode, key string) (map[string]string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
	defer c.Close()
	conn := c.Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		return nil, err
	}
	return conn.HGetAll(ctx, key).Result()
}

// evtKey is an event's key as gateway/redis names it.
func evtKey(ev int64, name string) string { return "{evt:" + strconv.FormatInt(ev, 10) + "}:" + name }

// setupFailoverEvent writes an event's dials as the gateway's store does
// (gateway/redis dialFields): on sale since an hour, paused until the test
// starts admission; control switches the restore rule off for it.
func setupFailoverEvent(ctx context.Context, rdb goredis.UniversalClient, ev int64, control bool) error {
	now := time.Now()
	f := map[string]any{"new_users_per_minute": foRate, "total_active_users": 100000, "session_seconds": foSession,
		"claim_seconds": foClaim, "prequeue_at": now.Add(-2 * time.Hour).UnixMilli(), "onsale_at": now.Add(-time.Hour).UnixMilli(),
		"closes_at": now.Add(24 * time.Hour).UnixMilli(), "paused": 1, "queueing": "random", "pow_difficulty": 0, "sold_out": 0,
		"account_required": 0, "version": 1, "epoch": "failover-" + strconv.FormatInt(ev, 36)}
	if control {
		f["no_restore"] = 1
	}
	if err := rdb.HSet(ctx, evtKey(ev, "dials"), f).Err(); err != nil {
		return err
	}
	return rdb.SAdd(ctx, "onsale:events", ev).Err()
}

// foLoss is what the failover lost of one event.
type foLoss struct{ joins, claims int }

// foRun is the fans of the failover test.
type foRun struct {
	gws      []string
	client   *http.Client
	deadline time.Time
	began    time.Time
	wg       sync.WaitGroup

	mu  sync.Mutex
	all map[int64][]*foFan
}

// foFan is one fan: what it was told, when.
type foFan struct {
	ev    int64
	wave  int
	vid   string
	token string

	mu          sync.Mutex
	identity    string
	first       int64 // the place its first answered join gave it
	joinedAt    time.Time
	seen        []int64 // every place it was told afterwards
	admittedAt  time.Time
	claimedAt   time.Time // by the server's clock
	admittedPos int64
	lostJoin    bool
	joinStatus  []int
	calls       []foCall
}

type foCall struct {
	at         time.Time
	what       string // join, poll
	status     int
	retryAfter bool
}

func (r *foRun) fans(ev int64) []*foFan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all[ev])
}

func (r *foRun) start(ev int64, wave int) {
	f := &foFan{ev: ev, wave: wave}
	r.mu.Lock()
	if r.all == nil {
		r.all, r.began = map[int64][]*foFan{}, time.Now()
	}
	r.all[ev] = append(r.all[ev], f)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.live(f)
	}()
}

func (r *foRun) wait() { r.wg.Wait() }

// live joins until a place is given, then polls until let in: as a page
// does, but polling faster than poll_after_ms says (a test has no time).
func (r *foRun) live(f *foFan) {
	time.Sleep(time.Duration(rand.Int64N(int64(200 * time.Millisecond))))
	for time.Now().Before(r.deadline) {
		code, body, hdr := r.call(f, "POST", fmt.Sprintf("/v1/events/%d/queue", f.ev))
		f.mu.Lock()
		f.joinStatus = append(f.joinStatus, code)
		f.calls = append(f.calls, foCall{time.Now(), "join", code, hdr.Get("Retry-After") != ""})
		if code == http.StatusOK {
			f.first, f.joinedAt, f.token = body.Position, time.Now(), body.QueueToken
			f.mu.Unlock()
			break
		}
		f.mu.Unlock()
		time.Sleep(foPoll)
	}
	for time.Now().Before(r.deadline) {
		time.Sleep(foPoll/2 + time.Duration(rand.Int64N(int64(foPoll))))
		code, body, _ := r.call(f, "GET", fmt.Sprintf("/v1/events/%d/queue/status", f.ev))
		f.mu.Lock()
		f.calls = append(f.calls, foCall{time.Now(), "poll", code, false})
		if code == http.StatusOK {
			if body.QueueToken != "" {
				f.token = body.QueueToken
			}
			if body.Position != 0 {
				f.seen = append(f.seen, body.Position)
			}
			if body.State == "admitted" {
				f.admittedAt, f.admittedPos = time.Now(), body.Position
				if body.AdmitExpiresAt != nil {
					f.claimedAt = body.AdmitExpiresAt.Add(-foSession * time.Second)
				}
				f.mu.Unlock()
				return
			}
		}
		f.mu.Unlock()
	}
}

type foReply struct {
	State          string     `json:"state"`
	QueueToken     string     `json:"queue_token"`
	Position       int64      `json:"position"`
	AdmitExpiresAt *time.Time `json:"admit_expires_at"`
}

// call sends one request to a gateway picked at random, with the fan's
// cookies (visitor id, queue token); a join learns the visitor id.
func (r *foRun) call(f *foFan, method, path string) (int, foReply, http.Header) {
	f.mu.Lock()
	vid, token := f.vid, f.token
	f.mu.Unlock()
	req, _ := http.NewRequest(method, r.gws[rand.IntN(len(r.gws))]+path, nil)
	var cookies []string
	if vid != "" {
		cookies = append(cookies, "onsale_vid="+vid)
	}
	if token != "" {
		cookies = append(cookies, fmt.Sprintf("onsale_q_%d=%s", f.ev, token))
	}
	if len(cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, foReply{}, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body foReply
	json.Unmarshal(b, &body)
	f.mu.Lock()
	for _, c := range resp.Cookies() {
		if c.Name == "onsale_vid" {
			f.vid = c.Value
		}
	}
	if f.identity == "" && body.QueueToken != "" {
		f.identity = tokenSubject(body.QueueToken)
	}
	f.mu.Unlock()
	return resp.StatusCode, body, resp.Header
}

// tokenSubject reads a queue token's subject (the identity) without
// checking it: the test only labels fans with it.
func tokenSubject(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Sub string `json:"sub"`
	}
	json.Unmarshal(b, &c)
	return c.Sub
}

// report logs the answers by status around the kill and checks the
// error vocabulary: joins 200 or 503 with Retry-After, polls always 200.
func (r *foRun) report(t *testing.T, kill time.Time) {
	t.Helper()
	type key struct {
		what   string
		status int
	}
	count := map[key]int{}
	var first503, last503 time.Time
	for _, ev := range slices.Sorted(func(yield func(int64) bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for ev := range r.all {
			if !yield(ev) {
				return
			}
		}
	}) {
		for _, f := range r.fans(ev) {
			for _, c := range f.calls {
				count[key{c.what, c.status}]++
				switch {
				case c.what == "join" && c.status == http.StatusServiceUnavailable:
					if !c.retryAfter {
						t.Errorf("a join answered 503 without Retry-After")
					}
					if first503.IsZero() || c.at.Before(first503) {
						first503 = c.at
					}
					if c.at.After(last503) {
						last503 = c.at
					}
				case c.what == "join" && c.status != http.StatusOK:
					t.Errorf("a join answered %d at +%v from the kill; want 200 or 503", c.status, c.at.Sub(kill).Round(time.Millisecond))
				case c.what == "poll" && c.status != http.StatusOK:
					t.Errorf("a poll answered %d at +%v from the kill; want 200 (answered from the gateway's memory)",
						c.status, c.at.Sub(kill).Round(time.Millisecond))
				}
			}
		}
	}
	var parts []string
	for _, k := range slices.SortedFunc(func(yield func(key) bool) {
		for k := range count {
			if !yield(k) {
				return
			}
		}
	}, func(a, b key) int {
		if c := strings.Compare(a.what, b.what); c != 0 {
			return c
		}
		return a.status - b.status
	}) {
		parts = append(parts, fmt.Sprintf("%s %d: %d", k.what, k.status, count[k]))
	}
	t.Logf("answers: %s", strings.Join(parts, ", "))
	if !first503.IsZero() {
		t.Logf("joins answered 503 from +%.2f s to +%.2f s after the kill", first503.Sub(kill).Seconds(), last503.Sub(kill).Seconds())
	}
}
