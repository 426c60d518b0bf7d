package postgres_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

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
