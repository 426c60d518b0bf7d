package postgres_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
)

// BenchmarkCreateHold measures the hold path below HTTP: random groups of
// four adjacent seats, one account per goroutine, a fresh 40,000-seat event
// every 1,600 holds so most succeed.
func BenchmarkCreateHold(b *testing.B) {
	db := postgrestest.NewDB(b, postgres.Options{MaxConns: 16})
	seats := seed.MustLayout("stadium").Seats()
	var ev atomic.Int64
	ev.Store(newEvent(b, db, "stadium", 1_000_000))
	var n, taken atomic.Int64
	var acct atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		me := acct.Add(1)
		for pb.Next() {
			p := rand.IntN(len(seats)/100)*100 + rand.IntN(97)
			_, err := db.CreateHold(ctx, core.HoldParams{EventID: ev.Load(), Account: string(rune('a' + me)),
				Request: core.HoldRequest{Seats: []string{seats[p].ID, seats[p+1].ID, seats[p+2].ID, seats[p+3].ID}}})
			if core.ErrorCode(err) == core.ESeatsTaken {
				taken.Add(1)
			} else if err != nil {
				b.Error(err)
			}
			n.Add(1)
		}
	})
	b.ReportMetric(float64(taken.Load())/float64(n.Load()), "taken/op")
}

// beforeSendSQL is the sign-in limit this store had before its counters,
// kept here only to measure against: a log of actions counted over a
// sliding hour under an advisory lock per (scope, key), in the acting
// transaction.
const beforeSendSQL = `CREATE TABLE before_log (scope text NOT NULL, key text NOT NULL, at timestamptz NOT NULL);
CREATE INDEX ON before_log (scope, key, at);
INSERT INTO before_log SELECT 'send_addr', '10.0.0.1', now() - (g * interval '100 ms') FROM generate_series(1, 24000) g`

func beforeStoreCode(db *postgres.DB, phone, addr string, hash []byte) error {
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, k := range [][2]string{{"send_addr", addr}, {"send_phone", phone}} {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '|' || $2, 0))`, k[0], k[1]); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*)::int FROM before_log WHERE scope = $1 AND key = $2 AND at > clock_timestamp() - interval '1 hour'`, k[0], k[1]).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO before_log VALUES ($1, $2, clock_timestamp())`, k[0], k[1]); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO signin_codes (phone, code_hash, expires_at) VALUES ($1, $2, now() + interval '5 minutes')
ON CONFLICT (phone) DO UPDATE SET code_hash = EXCLUDED.code_hash`, phone, hash); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// BenchmarkSendCodeOneAddress measures code requests from one address (a
// carrier's NAT), 16 at a time, a fresh phone each, limits out of reach:
// "before" is the log counted under an advisory lock with 24,000 requests
// from the address in the last hour; "after" is StoreCode.
func BenchmarkSendCodeOneAddress(b *testing.B) {
	const clients = 16
	for _, c := range []struct {
		name string
		send func(db *postgres.DB, phone string) error
	}{
		{"before", func(db *postgres.DB, phone string) error {
			return beforeStoreCode(db, phone, "10.0.0.1", []byte("h"))
		}},
		{"after", func(db *postgres.DB, phone string) error {
			return db.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: "10.0.0.1", Hash: []byte("h")}, core.SignInLimits{SendsPerAddr: 1 << 30})
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			db := postgrestest.NewDB(b, postgres.Options{MaxConns: clients})
			if _, err := db.Pool().Exec(ctx, beforeSendSQL); err != nil {
				b.Fatal(err)
			}
			var phone atomic.Int64
			b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.send(db, fmt.Sprintf("+9190%08d", phone.Add(1))); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "sends/s")
		})
	}
}
