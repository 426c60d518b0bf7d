package topology

import (
	"context"
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
