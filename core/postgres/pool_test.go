package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
)

// Reads can never starve a hold (issue 13, item 2): a flood of catalog
// reads, each stuck in the database until its deadline, holds every
// connection the reads may have, and a hold still goes through, because
// the reads have a pool of their own (Options.ReadMaxConns). The control
// is the same flood on one shared pool: the reads hold every connection
// and the hold waits for one until its deadline, answered unavailable.
//
// The flood is made deterministic rather than fast: a session holds an
// ACCESS EXCLUSIVE lock on venues (which every catalog read joins and no
// hold touches), so each read sits on its connection until the lock goes,
// as a read does behind a slow database at a request a millisecond.
func TestReadsCannotStarveHolds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		readConns int32
		wantHold  bool
	}{
		{"separate read pool", 2, true},
		{"control: one shared pool", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := postgrestest.NewURL(t)
			db, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 4, ReadMaxConns: tc.readConns})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ev := newEvent(t, db, "cinema", 6)

			locker, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer locker.Close(ctx)
			tx, err := locker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `LOCK TABLE venues IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}

			// The flood: many more readers than connections.
			const readers = 20
			var flood sync.WaitGroup
			readErrs := make(chan error, readers)
			for range readers {
				flood.Go(func() {
					_, err := db.Events(ctx, core.EventFilter{})
					readErrs <- err
				})
			}
			reads := db.ReadPool()
			for reads.Stat().AcquiredConns() < reads.Stat().MaxConns() {
				time.Sleep(10 * time.Millisecond) // until the reads hold every connection they may
			}

			// The hold's deadline only bounds the control's wait: there the
			// hold would wait as long as the reads do.
			hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			h, herr := db.CreateHold(hctx, core.HoldParams{EventID: ev, Account: "alice", Request: core.HoldRequest{Seats: []string{"AUD-J-5"}}})
			cancel()

			if err := tx.Rollback(ctx); err != nil { // the flood drains
				t.Fatal(err)
			}
			flood.Wait()
			close(readErrs)
			for err := range readErrs {
				if err != nil {
					t.Fatalf("a catalog read failed once the lock went: %v", err)
				}
			}

			if tc.wantHold {
				if herr != nil {
					t.Fatalf("CreateHold during the read flood = %v; want the hold (its pool is not the reads')", herr)
				}
				if h.Status != core.HoldActive {
					t.Fatalf("hold = %+v; want ACTIVE", h)
				}
				return
			}
			if core.ErrorCode(herr) != core.EUnavailable {
				t.Fatalf("control: CreateHold during the read flood on a shared pool = %+v, %v; want unavailable (starved)", h, herr)
			}
		})
	}
}

// Every connection of the core is READ COMMITTED, whatever the URL, role
// or server default: the statements are written for it (a snapshot per
// statement: the sweep reads its bound before its own snapshot; rows
// re-checked as their newest version, never a serialization failure).
func TestReadCommitted(t *testing.T) {
	url := postgrestest.NewURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	db, err := postgres.Open(ctx, url+sep+"default_transaction_isolation=serializable", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var level string
	if err := db.Pool().QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil || level != "read committed" {
		t.Fatalf("transaction_isolation = %q, %v; want read committed", level, err)
	}
}
