package topology

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/servicetest"
)

// startTestRedis starts a cluster on a free block, stopped at cleanup.
func startTestRedis(tb testing.TB, o RedisOptions) *RedisCluster {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		servicetest.Missing(tb, "redis-server is not installed")
	}
	if o.Base == 0 {
		base, err := FreeBlock(BlockSize)
		if err != nil {
			tb.Fatal(err)
		}
		o.Base = base
	}
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := StartRedis(ctx, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Stop() })
	return r
}

// TestRedisFailover: a killed master's replica takes its slots, the data
// written before the kill is there, and the restarted node rejoins as a
// replica.
func TestRedisFailover(t *testing.T) {
	r := startTestRedis(t, RedisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ms, err := r.Masters(ctx)
	if err != nil || len(ms) != 3 {
		t.Fatalf("Masters = %v, %v; want 3", ms, err)
	}
	c, err := redisconn.Open(ctx, r.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "{evt:42}:probe"
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := r.MasterOf(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Replica(ctx, m)
	if err != nil || rep == nil {
		t.Fatalf("Replica(%s) = %v, %v", m.Name, rep, err)
	}
	// The replica must have the write before the kill for this test (no
	// lag is injected here; the lost-write tests inject it).
	if _, err := redisDo(ctx, m, "WAIT", 1, 2000); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(m); err != nil {
		t.Fatal(err)
	}
	nm, err := r.WaitFailover(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if nm != rep {
		t.Errorf("WaitFailover = %s; want %s (the replica)", nm.Name, rep.Name)
	}
	// The services' client finds the new master by itself (redisconn
	// re-reads the slot map on connection errors and every second).
	var got string
	if err := redisPoll(ctx, 10*time.Second, func() error {
		var err error
		got, err = c.Get(ctx, key).Result()
		return err
	}); err != nil || got != "before" {
		t.Errorf("GET after failover = %q, %v; want before", got, err)
	}
	if err := r.Restart(ctx, m); err != nil {
		t.Fatal(err)
	}
	if rm, err := r.Replica(ctx, nm); err != nil || rm != m {
		t.Errorf("Replica(%s) = %v, %v; want %s", nm.Name, rm, err, m.Name)
	}
}

// With the master's replication stream held back by a ReplProxy, writes
// it acknowledges after the stall are gone once its replica takes over:
// the lost writes the failover tests need, made on purpose (without the
// proxy, on loopback, a kill -9 loses nothing).
func TestRedisStalledReplicaLosesWrites(t *testing.T) {
	base, err := FreeBlock(BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := StartReplProxy(fmt.Sprintf("127.0.0.1:%d", base+37), fmt.Sprintf("127.0.0.1:%d", base+31))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	r := startTestRedis(t, RedisOptions{Base: base, Announce: func(i int) int {
		if i == 0 {
			return base + 37
		}
		return 0
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if proxy.Replicating() == 0 {
		t.Fatal("n1's replica does not replicate through the proxy")
	}
	c, err := redisconn.Open(ctx, r.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key := "{" + redisTagForSlot(0) + "}:counter" // slot 0: n1's
	if m, _ := r.MasterOf(ctx, key); m != r.Nodes[0] {
		t.Fatalf("MasterOf(%s) = %v; want n1", key, m)
	}
	for range 100 {
		if err := c.Incr(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := redisDo(ctx, r.Nodes[0], "WAIT", 1, 2000); n != int64(1) {
		t.Fatalf("WAIT before the stall = %v; want the replica's ack", n)
	}
	proxy.Stall()
	for range 50 {
		if err := c.Incr(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Kill(r.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WaitFailover(ctx, r.Nodes[0]); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := redisPoll(ctx, 10*time.Second, func() error {
		var err error
		got, err = c.Get(ctx, key).Int64()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got != 100 {
		t.Fatalf("counter after the failover = %d; want 100 (the 50 acknowledged during the stall lost)", got)
	}
}
