package topology

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
	began := time.Now()
	r := startTestRedis(t, RedisOptions{})
	t.Logf("6 nodes, cluster ok, replicas linked in %.1f s", time.Since(began).Seconds())
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
	killed := time.Now()
	if err := r.Kill(m); err != nil {
		t.Fatal(err)
	}
	nm, err := r.WaitFailover(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -9 of %s: %s takes writes to its slots after %.2f s", m.Name, nm.Name, time.Since(killed).Seconds())
	if nm != rep {
		t.Errorf("WaitFailover = %s; want %s (the replica)", nm.Name, rep.Name)
	}
	// The services' client finds the new master by itself (redisconn
	// re-reads the slot map on connection errors and every second).
	var got string
	found := time.Now()
	if err := redisPoll(ctx, 10*time.Second, func() error {
		var err error
		got, err = c.Get(ctx, key).Result()
		return err
	}); err != nil || got != "before" {
		t.Errorf("GET after failover = %q, %v; want before", got, err)
	}
	t.Logf("the client found the new master %.2f s after the promotion", time.Since(found).Seconds())
	restarted := time.Now()
	if err := r.Restart(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s rejoined as a replica, link up, in %.2f s", m.Name, time.Since(restarted).Seconds())
	if rm, err := r.Replica(ctx, nm); err != nil || rm != m {
		t.Errorf("Replica(%s) = %v, %v; want %s", nm.Name, rm, err, m.Name)
	}
	stopped := time.Now()
	r.Stop()
	t.Logf("stopped in %.2f s", time.Since(stopped).Seconds())
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

// BenchmarkJoinWait measures what `WAIT 1 100` after every join would
// cost: the gateway's own join script (gateway/redis: prelude, pre-queue,
// join) on the master of its event's slot, with and without WAIT on the
// same connection (WAIT counts that connection's writes), from 16
// concurrent clients, on a cluster with replicas.
//
//	go test -run '^$' -bench JoinWait -benchtime 5s ./loadtest/topology/
func BenchmarkJoinWait(b *testing.B) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Skip("redis-server is not installed")
	}
	r := startTestRedis(b, RedisOptions{})
	ctx := context.Background()
	var src []byte
	for _, f := range []string{"prelude.lua", "prequeue.lua", "join.lua"} {
		p, err := redisDeployFile("gateway/redis/" + f)
		if err != nil {
			b.Fatal(err)
		}
		s, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		src = append(src, s...)
	}
	join := goredis.NewScript(string(src))
	for _, wait := range []bool{false, true} {
		name := "no-wait"
		if wait {
			name = "wait-1-100"
		}
		b.Run(name, func(b *testing.B) {
			ev := fmt.Sprintf("{evt:%d}:", time.Now().UnixNano())
			keys := []string{ev + "dials", ev + "pre", ev + "ids", ev + "frozen", ev + "seq"}
			m, err := r.MasterOf(ctx, keys[0])
			if err != nil {
				b.Fatal(err)
			}
			c := goredis.NewClient(&goredis.Options{Addr: m.Addr(), PoolSize: 32})
			defer c.Close()
			now := time.Now().UnixMilli()
			c.HSet(ctx, keys[0], "prequeue_at", now-7200000, "onsale_at", now-3600000, "closes_at", 0)
			if err := join.Load(ctx, c).Err(); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			var unacked atomic.Int64
			b.SetParallelism(16 / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("fan-%d", n.Add(1))
					if !wait {
						if err := join.EvalSha(ctx, c, keys, id, 1).Err(); err != nil {
							b.Error(err)
							return
						}
						continue
					}
					p := c.Pipeline() // one connection: WAIT counts this write
					p.EvalSha(ctx, join.Hash(), keys, id, 1)
					w := p.Do(ctx, "WAIT", 1, 100)
					if _, err := p.Exec(ctx); err != nil {
						b.Error(err)
						return
					}
					if v, _ := w.Int64(); v < 1 {
						unacked.Add(1)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
			if wait {
				b.ReportMetric(float64(unacked.Load()), "unacked")
			}
		})
	}
}
