package topology

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkPGCommit measures what a commit costs on the cluster with
// synchronous_mode (the commit waits until the synchronous standby has
// flushed it) and without: one-row autocommit inserts from 8 concurrent
// clients, about what a hold is. One cluster per mode, started before its
// sub-benchmark (the framework runs a sub-benchmark several times).
//
//	go test -run '^$' -bench PGCommit -benchtime 10s ./loadtest/topology/
func BenchmarkPGCommit(b *testing.B) {
	for _, tc := range []struct {
		name   string
		noSync bool
	}{{"synchronous", false}, {"asynchronous", true}} {
		func() {
			base, err := FreeBlock(BlockSize)
			if err != nil {
				b.Fatal(err)
			}
			dir, err := os.MkdirTemp("", "pgbench")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			p, err := StartPG(context.Background(), PGOptions{Dir: dir, Base: base, NoSync: tc.noSync})
			if err != nil {
				b.Skip(err)
			}
			defer p.Stop()
			ctx := context.Background()
			if err := p.CreateDatabase(ctx, "bench"); err != nil {
				b.Fatal(err)
			}
			pool, err := pgxpool.New(ctx, p.DSN("bench")+"&pool_max_conns=8")
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			if _, err := pool.Exec(ctx, `CREATE TABLE t (id bigserial PRIMARY KEY, v text)`); err != nil {
				b.Fatal(err)
			}
			b.Run(tc.name, func(b *testing.B) {
				b.SetParallelism(4) // 8 clients on 2 CPUs
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := pool.Exec(ctx, `INSERT INTO t (v) VALUES ('x')`); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}()
	}
}
