package topology

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startPG starts a cluster for a test on a free port block, stopped at the
// test's end. Without the engines it skips, unless ONSALE_REQUIRE_SERVICES=1
// (make test), where a missing engine is a failure.
func startPG(t *testing.T, o PGOptions) *PG {
	t.Helper()
	if o.Base == 0 {
		base, err := FreeBlock(BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		o.Base = base
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPG(ctx, o)
	if errors.Is(err, ErrNoPGEngine) && os.Getenv("ONSALE_REQUIRE_SERVICES") != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

// assertGone checks that a stopped cluster left nothing: no process, no
// listener in its port block, no data outside Dir.
func assertGone(t *testing.T, p *PG, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if pgAlive(pid) {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	if !BlockFree(p.o.Base, 30) {
		t.Errorf("something still listens in %d..%d after Stop", p.o.Base, p.o.Base+29)
	}
	if p.tmpRoot {
		if _, err := os.Stat(p.root); !os.IsNotExist(err) {
			t.Errorf("%s still there after Stop (%v)", p.root, err)
		}
	}
}

func (p *PG) pids() []int {
	pids := []int{p.etcd.pid()}
	for _, m := range p.Members {
		pids = append(pids, m.patroni.pid())
		if pm := postmasterPID(m.DataDir); pm > 0 {
			pids = append(pids, pm)
			pids = append(pids, pgDescendants(pm)...)
		}
	}
	return pids
}

// A cluster starts with a leader and a synchronous standby, a second handle
// from OpenPG (another process's view, as make cluster-down has) stops it,
// and nothing is left behind.
func TestPGStartOpenStop(t *testing.T) {
	p := startPG(t, PGOptions{})
	ctx := context.Background()
	leader, err := p.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sync, err := p.SyncStandby(ctx)
	if err != nil || sync == leader {
		t.Fatalf("SyncStandby = %v, %v; leader %s", sync, err, leader.Name)
	}
	if err := p.CreateDatabase(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, p.DSN("smoke"))
	if err != nil {
		t.Fatal(err)
	}
	var rec bool
	conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec)
	conn.Close(ctx)
	if rec {
		t.Errorf("DSN landed on a replica")
	}
	pids := p.pids()
	q, err := OpenPG(p.o)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := q.Primary(ctx); err != nil || got.Name != leader.Name {
		t.Errorf("OpenPG: Primary = %v, %v; want %s", got, err, leader.Name)
	}
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, p, pids)
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop after the other handle's Stop: %v", err)
	}
}

// Kill of the primary: the synchronous standby is promoted with every
// committed row, and Restart brings the old primary back as a streaming
// replica.
func TestPGKillRestart(t *testing.T) {
	p := startPG(t, PGOptions{})
	ctx := context.Background()
	if err := p.CreateDatabase(ctx, "kr"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, p.DSN("kr"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (n int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 100)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	old, err := p.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sync, _ := p.SyncStandby(ctx)
	pm := postmasterPID(old.DataDir)
	procs := append([]int{old.patroni.pid(), pm}, pgDescendants(pm)...)
	if err := p.Kill(old); err != nil {
		t.Fatal(err)
	}
	for _, pid := range procs {
		if pgAlive(pid) {
			t.Errorf("process %d of %s alive after Kill", pid, old.Name)
		}
	}
	neu, err := p.WaitPrimary(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if neu != sync {
		t.Errorf("promoted %s; want the synchronous standby %s", neu.Name, sync.Name)
	}
	conn, err = pgx.Connect(ctx, p.DSN("kr"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("rows on %s = %d, %v; want 100", neu.Name, n, err)
	}
	if err := p.Restart(ctx, old); err != nil {
		t.Fatal(err)
	}
	reps, err := p.replication(ctx, neu)
	if err != nil {
		t.Fatal(err)
	}
	if r := reps[old.Name]; r.state != "streaming" {
		t.Errorf("%s after Restart: %+v; want streaming from %s", old.Name, r, neu.Name)
	}
}
