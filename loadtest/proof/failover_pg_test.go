package proof

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/loadtest/topology"
	"github.com/onsale/onsale/loadtest/topology/lagproxy"
)

// The PostgreSQL primary is killed (kill -9 of Patroni, the postmaster and
// every backend) while fans book seats through the real core with the
// card flow, on a three-member Patroni cluster with synchronous_mode.
// Every booking a fan was told is confirmed is in the new primary's
// database; the fans saw 503 (never 500) until Patroni promoted the
// synchronous standby, and the same core process served them afterwards;
// the old primary rejoins as a streaming replica and has every one of
// them too.
func TestPGFailoverKeepsConfirmedBookings(t *testing.T) {
	r := pgFailover(t, false)
	if len(r.lost) > 0 {
		for _, a := range r.lost {
			t.Errorf("booking %d (hold %s, seat %s) was confirmed to %s but is not in the new primary's database", a.booking, a.hold, a.seat, a.account)
		}
	}
	if len(r.lostOnRejoined) > 0 {
		t.Errorf("the rejoined old primary lacks %d confirmed bookings", len(r.lostOnRejoined))
	}
}

// The control: the same run with synchronous_mode off and the standbys
// made to lag (their replication stream from the primary held back by a
// proxy just before the kill, and dropped with the primary), and
// maximum_lag_on_failover large enough that Patroni still promotes one.
// The bookings confirmed while the stream was held back exist only on the
// killed primary: the harness must see at least one confirmed booking
// missing, or it could not see the loss the real run rules out.
func TestPGFailoverControlLosesConfirmedBookings(t *testing.T) {
	r := pgFailover(t, true)
	if len(r.lost) == 0 {
		t.Fatalf("control: no confirmed booking lost (of %d, %d confirmed while replication was held back); the harness cannot see a loss",
			r.acked, r.ackedFrozen)
	}
	t.Logf("control: %d of %d confirmed bookings lost, as expected (%d confirmed while the standbys lagged)", len(r.lost), r.acked, r.ackedFrozen)
}

type failoverResult struct {
	acked, ackedFrozen   int
	lost, lostOnRejoined []ack
}

func pgFailover(t *testing.T, control bool) failoverResult {
	base, err := topology.FreeBlock(topology.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	o := topology.PGOptions{Base: base}
	var proxies []*lagproxy.Proxy
	if control {
		// Each member advertises a proxy in front of itself (ports B+14..B+16)
		// as its replication address: the standbys stream through it.
		o.NoSync, o.MaxLagOnFailover = true, 1<<30
		for i := range 3 {
			p, err := lagproxy.New(fmt.Sprintf("127.0.0.1:%d", base+14+i), fmt.Sprintf("127.0.0.1:%d", base+11+i))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			proxies = append(proxies, p)
		}
		o.ReplicationAddr = func(i int) string { return proxies[i].Addr() }
	}
	start := time.Now()
	pg := startCluster(t, o)
	if err := pg.CreateDatabase(ctx, "onsale"); err != nil {
		t.Fatal(err)
	}
	dsn := pg.DSN("onsale")
	s := newHAStack(t, dsn, 1)
	core := s.cores[0].Core
	pid := core.Pid()
	t.Logf("cluster and core up in %v", time.Since(start).Round(time.Millisecond))

	const fans = 12
	seats := s.freeSeats(t, 3000, 0)
	c := newCrowd(s.proofStack)
	run, stop := context.WithCancel(ctx)
	defer stop()
	wait := c.run(run, "fo", []string{s.coreURL}, split(seats, fans))
	defer wait()
	if !waitUntil(30*time.Second, func() bool { return c.ackCount() >= 40 }) {
		t.Fatalf("only %d bookings confirmed before the fault: %s %v", c.ackCount(), statusLine(c.statuses()), c.odd)
	}

	old, err := pg.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var frozeAt time.Time
	if control {
		for _, p := range proxies {
			p.Freeze()
		}
		frozeAt = time.Now()
		if !waitUntil(10*time.Second, func() bool { return c.acksSince(frozeAt) >= 15 }) {
			t.Fatalf("only %d bookings confirmed while replication was held back", c.acksSince(frozeAt))
		}
	} else if sync, err := pg.SyncStandby(ctx); err != nil || sync == old {
		t.Fatalf("no synchronous standby before the kill: %v, %v", sync, err)
	}
	killedAt := time.Now()
	if err := pg.Kill(old); err != nil {
		t.Fatal(err)
	}
	if control {
		// What the dead primary sent but the proxies held back is gone
		// with it; the standbys may connect again (to the new primary).
		for _, p := range proxies {
			p.Drop()
			p.Thaw()
		}
	}
	promoted, err := pg.WaitPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	promotedAt := time.Now()
	// The same core process serves again, without a restart.
	if !waitUntil(40*time.Second, func() bool { return c.acksSince(promotedAt) >= 20 }) {
		t.Fatalf("the core did not recover: %d bookings confirmed after %s was promoted; %s %v",
			c.acksSince(promotedAt), promoted.Name, statusLine(c.statuses()), c.odd)
	}
	stop()
	wait()
	if core.Pid() != pid {
		t.Fatalf("the core was restarted (pid %d, now %d)", pid, core.Pid())
	}
	select {
	case <-core.Done():
		t.Fatal("the core exited")
	default:
	}

	firstErr, firstOK := c.window(killedAt)
	st := c.statuses()
	t.Logf("%s killed; %s promoted after %v; fans saw errors from +%v to the first success at +%v (%v); %d confirmed in all, %d after the promotion; orphaned holds %d",
		old.Name, promoted.Name, promotedAt.Sub(killedAt).Round(10*time.Millisecond), firstErr.Sub(killedAt).Round(10*time.Millisecond),
		firstOK.Sub(killedAt).Round(10*time.Millisecond), firstOK.Sub(firstErr).Round(10*time.Millisecond), c.ackCount(), c.acksSince(promotedAt), c.orphans)
	t.Logf("answers: %s", statusLine(st))
	for k, n := range st {
		if strings.HasSuffix(k, " 500") {
			t.Errorf("%d answers %q during the failover; want 503 unavailable, never 500", n, k)
		}
	}
	if st["hold 503"]+st["confirm 503"] == 0 {
		t.Errorf("no 503 during the failover: the fault was not seen (%s)", statusLine(st))
	}
	for _, o := range c.odd {
		t.Logf("odd answer: %s", o)
	}

	db, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := failoverResult{acked: c.ackCount(), lost: c.lost(t, db, s.event)}
	if control {
		r.ackedFrozen = c.acksSince(frozeAt) - c.acksSince(killedAt)
	}
	if twice := c.soldTwice(t, db, s.event); len(twice) > 0 && !control {
		t.Errorf("seats sold twice: %v", twice)
	}

	// The old primary rejoins as a replica (pg_rewind), streaming from the new one.
	rejoin := time.Now()
	if err := pg.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s rejoined as a streaming replica in %v", old.Name, time.Since(rejoin).Round(10*time.Millisecond))
	if !control {
		// Its own copy has every confirmed booking (a replica catches up
		// on what it replays: wait for the new primary's position).
		rdb, err := pgxpool.New(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/onsale?sslmode=disable", old.Port))
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		var lsn string
		db.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn)
		if !waitUntil(20*time.Second, func() bool {
			var ok bool
			return rdb.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&ok) == nil && ok
		}) {
			t.Fatalf("%s did not replay up to %s", old.Name, lsn)
		}
		r.lostOnRejoined = c.lost(t, rdb, s.event)
	}
	t.Logf("whole run %v", time.Since(start).Round(time.Millisecond))
	return r
}
