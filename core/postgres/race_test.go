package postgres_test

// The seeds' experiments as a race suite: real PostgreSQL, real concurrent
// connections, and for every property a control that runs the naive
// version under the same load to prove the harness can see the failure.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
)

// together runs fn(0..n-1) in n goroutines released at the same moment.
func together(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// deadlocks reads the server's count of deadlocks detected in this
// database. A backend counts a deadlock in its own pending statistics and
// publishes them at most once a second, when idle; so first every
// connection of the pool is made to publish (pg_stat_force_next_flush: the
// backend flushes before it answers ReadyForQuery, which pgx waits for),
// then the count is read from a fresh snapshot. The deadlocks of this test
// can only have been detected by the pool's backends.
func deadlocks(tb testing.TB, db *postgres.DB) int64 {
	tb.Helper()
	conns := db.Pool().AcquireAllIdle(ctx)
	for _, c := range conns {
		_, err := c.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		c.Release()
		if err != nil {
			tb.Fatal(err)
		}
	}
	var n int64
	_, err := db.Pool().Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
	if err == nil {
		err = db.Pool().QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// naiveHold is the seed's first version: read the seat, then write it. The
// gap between the two is a network round trip in real life; a short sleep
// stands in for it.
func naiveHold(db *postgres.DB, event int64, seat, holdID string) (bool, error) {
	var status string
	if err := db.Pool().QueryRow(ctx, `SELECT status FROM seats WHERE event_id = $1 AND seat_id = $2`, event, seat).Scan(&status); err != nil {
		return false, err
	}
	if status != "AVAILABLE" {
		return false, nil
	}
	time.Sleep(time.Millisecond)
	_, err := db.Pool().Exec(ctx, `UPDATE seats SET status = 'HELD', hold_id = $3, hold_until = now() + interval '8 minutes'
WHERE event_id = $1 AND seat_id = $2`, event, seat, holdID)
	return err == nil, err
}

// Experiment 1: many fans race for one seat, 40 times.
func TestRaceOneSeat(t *testing.T) {
	const trials, fans = 40, 8

	t.Run("control: check-then-write sells a seat twice", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "cinema", 6)
		doubles := 0
		for trial := range trials {
			seat := layout.SeatID("AUD", "ABCDEFGHIJKL"[trial%12:trial%12+1], 1+trial/12)
			var winners atomic.Int32
			together(fans, func(i int) {
				ok, err := naiveHold(db, ev, seat, fmt.Sprintf("00000000-0000-4000-8000-%012d", trial*100+i))
				if err != nil {
					t.Error(err)
				}
				if ok {
					winners.Add(1)
				}
			})
			if winners.Load() > 1 {
				doubles++
			}
		}
		t.Logf("naive: %d of %d races told more than one fan yes", doubles, trials)
		if doubles == 0 {
			t.Fatal("the naive hold never double-sold: the harness cannot see the bug")
		}
	})

	t.Run("product: one winner per seat", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "cinema", 6)
		for trial := range trials {
			seat := layout.SeatID("AUD", "ABCDEFGHIJKL"[trial%12:trial%12+1], 1+trial/12)
			var mu sync.Mutex
			var won []*core.Hold
			together(fans, func(i int) {
				h, err := hold(db, ev, fmt.Sprintf("fan-%d-%d", trial, i), core.HoldRequest{Seats: []string{seat}})
				if err != nil && core.ErrorCode(err) != core.ESeatsTaken {
					t.Errorf("hold: %v", err)
				}
				if err == nil {
					mu.Lock()
					won = append(won, h)
					mu.Unlock()
				}
			})
			if len(won) != 1 {
				t.Fatalf("seat %s: %d winners; want exactly 1", seat, len(won))
			}
			var owner string
			if err := db.Pool().QueryRow(ctx, `SELECT hold_id::text FROM seats WHERE event_id = $1 AND seat_id = $2`, ev, seat).Scan(&owner); err != nil || owner != won[0].ID {
				t.Fatalf("seat %s owned by %q, %v; want the winner %s", seat, owner, err, won[0].ID)
			}
		}
		checkInvariants(t, db)
	})
}

// naiveGroupHold checks every seat of a group, then writes each one: the
// group version of check-then-write.
func naiveGroupHold(db *postgres.DB, event int64, group []string) (bool, error) {
	var free int
	if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM seats WHERE event_id = $1 AND seat_id = ANY ($2) AND status = 'AVAILABLE'`,
		event, group).Scan(&free); err != nil {
		return false, err
	}
	if free != len(group) {
		return false, nil
	}
	time.Sleep(time.Millisecond) // the round trip between check and write, widened on purpose
	for _, s := range group {
		if _, err := db.Pool().Exec(ctx, `UPDATE seats SET status = 'HELD', hold_id = gen_random_uuid(), hold_until = now() + interval '8 minutes'
WHERE event_id = $1 AND seat_id = $2`, event, s); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Experiment 2, control: overlapping groups claimed by check-then-write end
// up with a seat in two winning groups.
func TestRaceOverlappingGroupsControl(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "stadium", 6)
	seats := seed.MustLayout("stadium").Seats()
	doubled := 0
	for race := range 100 {
		block := seats[race*6 : race*6+6]
		groups := [][]string{{block[0].ID, block[1].ID, block[2].ID}, {block[2].ID, block[3].ID}, {block[1].ID, block[2].ID, block[3].ID, block[4].ID}}
		won := make([]bool, len(groups))
		together(len(groups), func(f int) {
			ok, err := naiveGroupHold(db, ev, groups[f])
			if err != nil {
				t.Error(err)
			}
			won[f] = ok
		})
		n := 0
		for _, w := range won {
			if w {
				n++
			}
		}
		if n > 1 { // every pair of these groups overlaps on seat 2
			doubled++
		}
	}
	t.Logf("check-then-write groups: %d of 100 races gave an overlapping seat to two groups", doubled)
	if doubled == 0 {
		t.Fatal("the naive group hold never double-held a seat: the harness cannot see the bug")
	}
}

// Experiment 2: 1,400 races between overlapping multi-seat groups.
func TestRaceOverlappingGroups(t *testing.T) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "stadium", 6)
	before := deadlocks(t, db)
	seats := seed.MustLayout("stadium").Seats()
	const races, parallel = 1400, 8
	var taken, held atomic.Int64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for race := range races {
		// Each race gets a block of 6 adjacent seats and 2 to 4 fans asking
		// for overlapping groups of 2 to 4 of them, in shuffled order.
		block := seats[race*6 : race*6+6]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fans := 2 + rand.IntN(3)
			groups := make([][]string, fans)
			for f := range groups {
				n := 2 + rand.IntN(3)
				off := rand.IntN(6 - n + 1)
				for _, s := range block[off : off+n] {
					groups[f] = append(groups[f], s.ID)
				}
				rand.Shuffle(len(groups[f]), func(i, j int) { groups[f][i], groups[f][j] = groups[f][j], groups[f][i] })
			}
			won := make([]*core.Hold, fans)
			together(fans, func(f int) {
				h, err := hold(db, ev, fmt.Sprintf("r%d-f%d", race, f), core.HoldRequest{Seats: groups[f]})
				switch core.ErrorCode(err) {
				case core.ESeatsTaken:
					taken.Add(1)
				case core.EInternal:
					if err == nil {
						won[f] = h
						held.Add(1)
						return
					}
					fallthrough
				default:
					t.Errorf("race %d fan %d: %v (only seats_taken may surface)", race, f, err)
				}
			})
			// Winners' groups are disjoint and fully held by them; a loser holds nothing.
			owner := map[string]string{}
			for f, h := range won {
				if h == nil {
					continue
				}
				for _, s := range groups[f] {
					if o, dup := owner[s]; dup {
						t.Errorf("race %d: seat %s won by %s and %s", race, s, o, h.ID)
					}
					owner[s] = h.ID
				}
			}
			for _, s := range block {
				var got *string
				if err := db.Pool().QueryRow(ctx, `SELECT hold_id::text FROM seats WHERE event_id = $1 AND seat_id = $2`, ev, s.ID).Scan(&got); err != nil {
					t.Error(err)
					return
				}
				want, ok := owner[s.ID]
				if (got == nil) == ok || (got != nil && *got != want) {
					t.Errorf("race %d: seat %s held by %v; want %q (partial group?)", race, s.ID, got, want)
				}
			}
		}()
	}
	wg.Wait()
	checkInvariants(t, db)
	dl := deadlocks(t, db) - before
	t.Logf("%d races: %d groups held, %d refused as taken, %d deadlocks detected by the server", races, held.Load(), taken.Load(), dl)
	if held.Load() < races {
		t.Errorf("only %d groups held in %d races: every race has a winner", held.Load(), races)
	}
	if dl != 0 {
		t.Errorf("server detected %d deadlocks; the one-statement hold should cause none", dl)
	}
}

// Experiment 3: claiming seats one statement at a time in opposite orders
// deadlocks; the one-statement hold, same load, does not.
func TestRaceOppositeOrder(t *testing.T) {
	const runs = 20

	t.Run("control: one seat per statement deadlocks", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "cinema", 6)
		before := deadlocks(t, db)
		failed := 0
		for run := range runs {
			a, b := layout.SeatID("AUD", "E", 1+run), layout.SeatID("AUD", "F", 1+run)
			orders := [][2]string{{a, b}, {b, a}}
			var firstDone sync.WaitGroup
			firstDone.Add(2)
			var n40P01 atomic.Int32
			together(2, func(i int) {
				err := pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
					claim := func(seat string) error {
						_, err := tx.Exec(ctx, `UPDATE seats SET status = 'HELD', hold_id = gen_random_uuid(), hold_until = now() + interval '8 minutes'
WHERE event_id = $1 AND seat_id = $2 AND status = 'AVAILABLE'`, ev, seat)
						return err
					}
					err := claim(orders[i][0])
					firstDone.Done()
					firstDone.Wait() // both hold their first seat before either asks for its second
					if err != nil {
						return err
					}
					return claim(orders[i][1])
				})
				if sqlState(err) == "40P01" {
					n40P01.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			})
			if n40P01.Load() > 0 {
				failed++
			}
		}
		dl := deadlocks(t, db) - before
		t.Logf("one seat per statement, opposite orders: %d of %d runs failed with 40P01 (server counted %d)", failed, runs, dl)
		if failed == 0 || dl == 0 {
			t.Fatal("no deadlock: the harness cannot see the bug")
		}
	})

	t.Run("product: one statement per group", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", 6)
		seats := seed.MustLayout("stadium").Seats()
		before := deadlocks(t, db)
		for run := range runs * 5 {
			a, b := seats[2*run].ID, seats[2*run+1].ID
			orders := [][]string{{a, b}, {b, a}}
			var wins atomic.Int32
			together(2, func(i int) {
				_, err := hold(db, ev, fmt.Sprintf("o%d-%d", run, i), core.HoldRequest{Seats: orders[i]})
				switch core.ErrorCode(err) {
				case core.ESeatsTaken:
				case core.EInternal:
					if err == nil {
						wins.Add(1)
						return
					}
					fallthrough
				default:
					t.Errorf("run %d: %v", run, err)
				}
			})
			if wins.Load() != 1 {
				t.Errorf("run %d: %d winners; want 1", run, wins.Load())
			}
		}
		if dl := deadlocks(t, db) - before; dl != 0 {
			t.Errorf("server detected %d deadlocks under the one-statement hold; want 0", dl)
		}
		checkInvariants(t, db)
	})
}

// setExpiry moves a hold's expiry (and its seats') to now()+d on the
// server's clock: the tests' way to stand at the instant of expiry.
func setExpiry(tb testing.TB, db *postgres.DB, holdID string, d time.Duration) {
	tb.Helper()
	_, err := db.Pool().Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() + make_interval(secs => $2) WHERE id = $1 RETURNING id, expires_at)
UPDATE seats s SET hold_until = h.expires_at FROM h WHERE s.hold_id = h.id`, holdID, d.Seconds())
	if err != nil {
		tb.Fatal(err)
	}
}

// naiveSweep is the racy sweeper the seeds warn about: select what looks
// expired, then release it by id without checking again. A gap (a round
// trip in real life) separates the two.
func naiveSweep(db *postgres.DB) error {
	var ids []string
	if err := db.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(id::text), '{}') FROM holds WHERE status = 'ACTIVE' AND expires_at < now()`).Scan(&ids); err != nil {
		return err
	}
	var seats []string
	if err := db.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(seat_id), '{}') FROM seats WHERE status = 'HELD' AND hold_until < now()`).Scan(&seats); err != nil {
		return err
	}
	time.Sleep(2 * time.Millisecond)
	if _, err := db.Pool().Exec(ctx, `UPDATE holds SET status = 'EXPIRED', version = version + 1 WHERE id = ANY ($1::uuid[])`, ids); err != nil {
		return err
	}
	_, err := db.Pool().Exec(ctx, `UPDATE seats SET status = 'AVAILABLE', hold_id = NULL, hold_until = NULL WHERE seat_id = ANY ($1)`, seats)
	return err
}

// sweepLoop runs sweep in a loop in two goroutines until the returned
// function is called.
func sweepLoop(t *testing.T, db *postgres.DB, sweep func(*postgres.DB) error) (stop func()) {
	var sweeping atomic.Bool
	sweeping.Store(true)
	var sweepers sync.WaitGroup
	for range 2 {
		sweepers.Add(1)
		go func() {
			defer sweepers.Done()
			for sweeping.Load() {
				if err := sweep(db); err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
			}
		}()
	}
	return func() { sweeping.Store(false); sweepers.Wait() }
}

// raceExtendSweeper holds 400 two-seat groups (ga: 400 holds of two GA
// tickets), makes hold i expire at now+300ms+i ms, fires its extend 25 ms
// before to 3 ms after that instant while two sweepers run sweep in a
// loop, and counts the holds whose extend succeeded but which were ended
// or lost their seats anyway.
func raceExtendSweeper(t *testing.T, sweep func(*postgres.DB) error, ga bool) (broken, extended int) {
	db := postgrestest.NewDB(t, postgres.Options{})
	// The control runs up to three tries in one subtest: each gives its
	// connections back when it ends, not at the subtest's cleanup, or three
	// pools of 40 would pass the server's connection limit.
	defer db.Close()
	venue := "stadium"
	if ga {
		venue = "amphitheatre" // 2,000 GA tickets
	}
	ev := newEvent(t, db, venue, 6)
	seats := seed.MustLayout("stadium").Seats()
	const n = 400
	holds := make([]*core.Hold, n)
	for i := range n {
		r := core.HoldRequest{Seats: []string{seats[2*i].ID, seats[2*i+1].ID}}
		if ga {
			r = core.HoldRequest{Quantity: 2}
		}
		h, err := hold(db, ev, fmt.Sprintf("x%d", i), r)
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = h
	}
	// Open the pool's connections now: a connection opened inside the
	// window (a cold pool, a loaded machine) would make the extends late
	// for their instant of expiry, and the race would not be run at all.
	warmPool(t, db)
	rows, err := db.Pool().Query(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() + interval '300 ms' + (substr(account, 2)::int) * interval '1 ms'
            RETURNING id, account, expires_at),
     s AS (UPDATE seats s SET hold_until = h.expires_at FROM h WHERE s.hold_id = h.id)
SELECT substr(account, 2)::int, expires_at FROM h`)
	if err != nil {
		t.Fatal(err)
	}
	expiry := make([]time.Time, n)
	for rows.Next() {
		var i int
		var at time.Time
		if err := rows.Scan(&i, &at); err != nil {
			t.Fatal(err)
		}
		expiry[i] = at
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	ok := make([]bool, n)
	stopSweeping := sweepLoop(t, db, sweep)
	together(n, func(i int) {
		// Fire at the instant of expiry, on purpose: this is the window under test.
		time.Sleep(time.Until(expiry[i].Add(time.Duration(rand.IntN(28000)-25000) * time.Microsecond)))
		_, err := db.ExtendHold(ctx, core.HoldRef{ID: holds[i].ID, Account: fmt.Sprintf("x%d", i)})
		switch core.ErrorCode(err) {
		case core.EHoldExpired, core.EHoldNotActive:
		case core.EInternal:
			if err == nil {
				ok[i] = true
				return
			}
			fallthrough
		default:
			t.Errorf("extend: %v", err)
		}
	})
	stopSweeping()
	for i, h := range holds {
		if !ok[i] {
			continue
		}
		extended++
		var status string
		var held int
		if err := db.Pool().QueryRow(ctx, `SELECT h.status, (SELECT count(*) FROM seats s WHERE s.hold_id = h.id AND s.status = 'HELD' AND s.hold_until = h.expires_at)
FROM holds h WHERE h.id = $1`, h.ID).Scan(&status, &held); err != nil {
			t.Fatal(err)
		}
		if status != core.HoldActive || (!ga && held != 2) {
			broken++
		}
	}
	if t.Failed() {
		return
	}
	r, err := db.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !ga {
		// The sweep leaves seated holds alone, lapsed or not: all 400 are
		// still ACTIVE in their rows, and it ended none.
		var active int
		if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM holds WHERE event_id = $1 AND status = 'ACTIVE'`, ev).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active != n || r.Holds != 0 {
			t.Errorf("after the sweeps %d of %d seated holds ACTIVE, the last sweep ended %d; want all ACTIVE, none ended (a seated hold needs no sweep)", active, n, r.Holds)
		}
	}
	if ga && broken == 0 {
		// Every hold not extended was swept: its two tickets are back, and
		// only the extended holds' are out.
		var remaining int
		if err := db.Pool().QueryRow(ctx, `SELECT remaining FROM ga_inventory WHERE event_id = $1`, ev).Scan(&remaining); err != nil {
			t.Fatal(err)
		}
		if remaining != 2000-2*extended {
			t.Errorf("%d GA tickets remain after the sweep; want %d (2,000 less the %d extended holds' two each)", remaining, 2000-2*extended, extended)
		}
	}
	return broken, extended
}

// Experiment 4a: extend versus sweeper at the instant of expiry. The sweep
// ends only GA holds (an expired seated hold needs none: migration 00012),
// so the race under test is the GA one; the seated product case checks that
// the sweep leaves seated holds alone.
func TestRaceExtendVersusSweeper(t *testing.T) {
	t.Run("control: select-then-release sweeper ends an extended GA hold", func(t *testing.T) {
		// The window is a few milliseconds wide, and on a loaded machine
		// most extends miss it: up to six tries to be hit.
		broken := 0
		for try := 1; try <= 6 && broken == 0 && !t.Failed(); try++ {
			var extended int
			broken, extended = raceExtendSweeper(t, naiveSweep, true)
			t.Logf("try %d, naive sweeper: %d of %d extended GA holds ended", try, broken, extended)
		}
		if broken == 0 {
			t.Fatal("the naive sweeper never ended an extended hold: the harness cannot see the bug")
		}
	})
	for _, ga := range []bool{true, false} {
		name := map[bool]string{true: "GA", false: "seated"}[ga]
		t.Run("product: conditional sweep, "+name, func(t *testing.T) {
			broken, extended := raceExtendSweeper(t, func(db *postgres.DB) error { _, err := db.Sweep(ctx); return err }, ga)
			t.Logf("extend versus sweeper at expiry, %s: %d of 400 extended in time, %d of them ended", name, extended, broken)
			if broken != 0 {
				t.Fatalf("the sweeper ended %d %s holds that were extended (valid at commit)", broken, name)
			}
			if extended == 0 || extended == 400 {
				t.Errorf("all 400 races went one way: the test did not stand at the instant of expiry")
			}
		})
	}
}

// raceHoldSweeper expires n one-seat holds, then has n new fans hold those
// seats while sweepers run sweep in a loop; it counts the new holds that
// were told yes but do not own their seat.
func raceHoldSweeper(t *testing.T, sweep func(*postgres.DB) error) (broken, won int) {
	db := postgrestest.NewDB(t, postgres.Options{})
	ev := newEvent(t, db, "stadium", 6)
	seats := seed.MustLayout("stadium").Seats()
	const n = 200
	for i := range n {
		if _, err := hold(db, ev, fmt.Sprintf("old%d", i), core.HoldRequest{Seats: []string{seats[i].ID}}); err != nil {
			t.Fatal(err)
		}
	}
	// All expired at once, none swept yet.
	if _, err := db.Pool().Exec(ctx, `
WITH h AS (UPDATE holds SET expires_at = now() - interval '1 ms' RETURNING id, expires_at)
UPDATE seats s SET hold_until = h.expires_at FROM h WHERE s.hold_id = h.id`); err != nil {
		t.Fatal(err)
	}
	stopSweeping := sweepLoop(t, db, sweep)
	newHolds := make([]*core.Hold, n)
	together(n, func(i int) {
		// Spread the fans over the sweepers' passes on purpose, so holds
		// land before, during and after each sweep of their seat.
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		h, err := hold(db, ev, fmt.Sprintf("new%d", i), core.HoldRequest{Seats: []string{seats[i].ID}})
		// A connection the loaded test machine did not open in time
		// (unavailable: nothing was written) is tapped again, as a fan
		// would: the experiment is about the sweeper, not the server.
		for try := 0; try < 5 && core.ErrorCode(err) == core.EUnavailable; try++ {
			time.Sleep(50 * time.Millisecond)
			h, err = hold(db, ev, fmt.Sprintf("new%d", i), core.HoldRequest{Seats: []string{seats[i].ID}})
		}
		if err != nil {
			t.Errorf("new fan %d: %v (an expired hold must not block)", i, err)
			return
		}
		newHolds[i] = h
	})
	// Let the sweepers make a few more passes over the new holds on purpose:
	// a sweep that wrongly frees a new hold's seat must get its chance.
	time.Sleep(10 * time.Millisecond)
	stopSweeping()
	for i, h := range newHolds {
		if h == nil {
			continue
		}
		won++
		var owner *string
		var status string
		if err := db.Pool().QueryRow(ctx, `SELECT hold_id::text, status FROM seats WHERE event_id = $1 AND seat_id = $2`, ev, seats[i].ID).Scan(&owner, &status); err != nil {
			t.Fatal(err)
		}
		if owner == nil || *owner != h.ID || status != "HELD" {
			broken++
		}
	}
	return broken, won
}

// Experiment 4b: a new fan's hold versus the sweeper, the moment after the
// previous hold on the seat expired.
func TestRaceHoldVersusSweeper(t *testing.T) {
	t.Run("control: select-then-release sweeper frees a new hold", func(t *testing.T) {
		broken, won := raceHoldSweeper(t, naiveSweep)
		t.Logf("naive sweeper: %d of %d new holds lost their seat", broken, won)
		if broken == 0 {
			t.Fatal("the naive sweeper never freed a new hold: the harness cannot see the bug")
		}
	})
	t.Run("product: conditional sweep", func(t *testing.T) {
		sweep := func(db *postgres.DB) error { _, err := db.Sweep(ctx); return err }
		broken, won := raceHoldSweeper(t, sweep)
		t.Logf("hold versus sweeper: %d new holds, %d lost their seat", won, broken)
		if broken != 0 || won != 200 {
			t.Fatalf("%d of %d new holds lost their seat to the sweeper; want 0 of 200", broken, won)
		}
	})
}

// Experiment 5: a stale release or extend of expired hold H1, racing the
// same account re-holding the same seat as H2, never touches H2.
func TestRaceStaleOperation(t *testing.T) {
	t.Run("control: release by account and seat frees H2", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "cinema", 6)
		h1, err := hold(db, ev, "acct", core.HoldRequest{Seats: []string{"AUD-A-1"}})
		if err != nil {
			t.Fatal(err)
		}
		setExpiry(t, db, h1.ID, 0)
		h2, err := hold(db, ev, "acct", core.HoldRequest{Seats: []string{"AUD-A-1"}})
		if err != nil {
			t.Fatal(err)
		}
		// The naive release identifies the hold by who and what, not by which.
		if _, err := db.Pool().Exec(ctx, `UPDATE seats SET status = 'AVAILABLE', hold_id = NULL, hold_until = NULL
WHERE event_id = $1 AND seat_id = ANY ($2) AND hold_id IN (SELECT id FROM holds WHERE account = $3)`, ev, h1.Seats, "acct"); err != nil {
			t.Fatal(err)
		}
		var status string
		if err := db.Pool().QueryRow(ctx, `SELECT status FROM seats WHERE event_id = $1 AND seat_id = 'AUD-A-1'`, ev).Scan(&status); err != nil {
			t.Fatal(err)
		}
		t.Logf("stale release of H1 by account and seat: H2's seat is now %s", status)
		if status == "HELD" {
			t.Fatalf("H2 (%s) kept its seat: the harness cannot see the bug", h2.ID)
		}
	})

	t.Run("product: fenced by hold id and version", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", 6)
		seats := seed.MustLayout("stadium").Seats()
		const n = 100
		for i := range n {
			acct := fmt.Sprintf("acct%d", i)
			seat := []string{seats[i].ID}
			h1, err := hold(db, ev, acct, core.HoldRequest{Seats: seat})
			if err != nil {
				t.Fatal(err)
			}
			setExpiry(t, db, h1.ID, 0)
			stale := core.HoldRef{ID: h1.ID, Account: acct, EventID: ev, Version: h1.Version}
			var h2 *core.Hold
			together(3, func(k int) {
				var err error
				switch k {
				case 0:
					h2, err = hold(db, ev, acct, core.HoldRequest{Seats: seat})
					if err != nil {
						t.Errorf("re-hold: %v", err)
					}
				case 1:
					_, err = db.ReleaseHold(ctx, stale)
					if c := core.ErrorCode(err); err != nil && c != core.EHoldNotActive && c != core.EVersionMismatch {
						t.Errorf("stale release: %v", err)
					}
				case 2:
					_, err = db.ExtendHold(ctx, stale)
					if c := core.ErrorCode(err); err == nil || (c != core.EHoldExpired && c != core.EHoldNotActive && c != core.EVersionMismatch) {
						t.Errorf("stale extend of an expired hold = %v; want hold_expired", err)
					}
				}
			})
			if h2 == nil {
				continue
			}
			// And again after the fact, with H1's old version.
			_, _ = db.ReleaseHold(ctx, stale)
			_, _ = db.ExtendHold(ctx, stale)
			got, err := db.Hold(ctx, h2.ID)
			if err != nil {
				t.Fatal(err)
			}
			var owner string
			if err := db.Pool().QueryRow(ctx, `SELECT hold_id::text FROM seats WHERE event_id = $1 AND seat_id = $2 AND status = 'HELD'`, ev, seat[0]).Scan(&owner); err != nil {
				t.Fatalf("seat %s is not held after stale operations on H1: %v", seat[0], err)
			}
			if got.Status != core.HoldActive || got.Version != h2.Version || !got.ExpiresAt.Equal(h2.ExpiresAt) || owner != h2.ID {
				t.Fatalf("H2 changed by stale operations on H1: %+v, seat owner %s", got, owner)
			}
		}
		checkInvariants(t, db)
	})
}

// Experiment 6: one account, 50 concurrent holds, limit 6.
func TestRaceAccountLimit(t *testing.T) {
	const tries, limit = 50, 6

	t.Run("control: count-then-hold passes the limit", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", 1000)
		seats := seed.MustLayout("stadium").Seats()
		var held atomic.Int32
		together(tries, func(i int) {
			var n int
			if err := db.Pool().QueryRow(ctx, `SELECT count(*) FROM seats WHERE event_id = $1 AND hold_id IS NOT NULL AND booking_id IS NULL AND status = 'HELD'`, ev).Scan(&n); err != nil {
				t.Error(err)
				return
			}
			if n+1 > limit {
				return
			}
			time.Sleep(time.Millisecond) // the gap between count and hold, widened on purpose
			if _, err := hold(db, ev, "greedy", core.HoldRequest{Seats: []string{seats[i].ID}}); err == nil {
				held.Add(1)
			}
		})
		t.Logf("count-then-hold: one account holds %d tickets with a limit of %d", held.Load(), limit)
		if held.Load() <= limit {
			t.Fatal("the naive limit held: the harness cannot see the bug")
		}
	})

	t.Run("product: counter row with a CHECK", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newEvent(t, db, "stadium", limit)
		seats := seed.MustLayout("stadium").Seats()
		var held atomic.Int32
		together(tries, func(i int) {
			n := 1 + i%2
			var ids []string
			for k := range n {
				ids = append(ids, seats[2*i+k].ID)
			}
			h, err := hold(db, ev, "greedy", core.HoldRequest{Seats: ids})
			switch {
			case err == nil:
				held.Add(int32(h.Quantity))
			case core.ErrorCode(err) != core.ELimitExceeded:
				t.Errorf("hold: %v", err)
			}
		})
		var counted int
		if err := db.Pool().QueryRow(ctx, `SELECT tickets FROM account_tickets WHERE event_id = $1 AND account = 'greedy'`, ev).Scan(&counted); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d concurrent holds by one account: %d tickets held, limit %d", tries, held.Load(), limit)
		if held.Load() > limit || int(held.Load()) != counted || held.Load() < limit-1 {
			t.Fatalf("held %d, counted %d; want %d or %d (never more than the limit)", held.Load(), counted, limit-1, limit)
		}
		checkInvariants(t, db)
	})
}

// Experiment 7: GA, 1,000 concurrent holds of 1 to 4 tickets on 500.
func TestRaceGA(t *testing.T) {
	const capacity, tries = 500, 1000
	l := &layout.Layout{
		Venue:            layout.Venue{Name: "Test Hall", City: "Pune"},
		Bands:            []layout.Band{{Code: "GA", Name: "GA", PricePaise: 100}},
		GeneralAdmission: &layout.GeneralAdmission{Capacity: capacity, Band: "GA"},
	}
	newGA := func(t *testing.T, db *postgres.DB) int64 {
		id, err := db.CreateEvent(ctx, seed.EventSpec{Name: "ga", Kind: core.KindConcert, Layout: l,
			StartsAt: time.Now().Add(time.Hour), OnsaleAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	t.Run("control: read-then-write counter oversells", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newGA(t, db)
		var sold atomic.Int32
		together(tries, func(i int) {
			n := 1 + i%4
			var remaining int
			if err := db.Pool().QueryRow(ctx, `SELECT remaining FROM ga_inventory WHERE event_id = $1`, ev).Scan(&remaining); err != nil {
				t.Error(err)
				return
			}
			if remaining < n {
				return
			}
			if _, err := db.Pool().Exec(ctx, `UPDATE ga_inventory SET remaining = $2 WHERE event_id = $1`, ev, remaining-n); err == nil {
				sold.Add(int32(n))
			}
		})
		t.Logf("read-then-write: %d tickets sold of %d", sold.Load(), capacity)
		if sold.Load() <= capacity {
			t.Fatal("the naive counter did not oversell: the harness cannot see the bug")
		}
	})

	t.Run("product: conditional decrement", func(t *testing.T) {
		db := postgrestest.NewDB(t, postgres.Options{})
		ev := newGA(t, db)
		var sold, refused atomic.Int32
		together(tries, func(i int) {
			n := 1 + rand.IntN(4)
			h, err := hold(db, ev, fmt.Sprintf("ga%d", i), core.HoldRequest{Quantity: n})
			switch {
			case err == nil:
				sold.Add(int32(h.Quantity))
			case core.ErrorCode(err) == core.ESoldOut:
				refused.Add(1)
			default:
				t.Errorf("GA hold: %v", err)
			}
		})
		var remaining int
		if err := db.Pool().QueryRow(ctx, `SELECT remaining FROM ga_inventory WHERE event_id = $1`, ev).Scan(&remaining); err != nil {
			t.Fatal(err)
		}
		t.Logf("GA: %d holds, %d tickets sold, %d refused, %d remaining", tries, sold.Load(), refused.Load(), remaining)
		if sold.Load() != capacity || remaining != 0 {
			t.Fatalf("sold %d with %d remaining; want exactly %d sold", sold.Load(), remaining, capacity)
		}
		checkInvariants(t, db)
	})
}

// naiveQuotaSettle is a settle without the exactly-once condition: it reads
// what the account is owed, then gives that back and clears the marks,
// with a gap (a round trip in real life) between the two. What it
// subtracts is decided by its read, not by the rows its write changed.
func naiveQuotaSettle(db *postgres.DB, ev int64, account string) error {
	const owedSQL = `(owed OR (status = 'ACTIVE' AND expires_at < now()))`
	var n int
	if err := db.Pool().QueryRow(ctx, `SELECT coalesce(sum(quantity), 0) FROM holds WHERE event_id = $1 AND account = $2 AND `+owedSQL,
		ev, account).Scan(&n); err != nil || n == 0 {
		return err
	}
	time.Sleep(time.Millisecond)
	_, err := db.Pool().Exec(ctx, `
WITH h AS (UPDATE holds SET status = 'EXPIRED', owed = false, ended_at = coalesce(ended_at, now()), version = version + 1
            WHERE event_id = $1 AND account = $2 AND `+owedSQL+` RETURNING id)
UPDATE account_tickets SET tickets = tickets - $3, holds = array(SELECT x FROM unnest(holds) x WHERE x <> ALL (array(SELECT id FROM h)))
 WHERE event_id = $1 AND account = $2`, ev, account, n)
	if sqlState(err) == "40P01" {
		// The naive statement takes the hold rows in no set order and may
		// deadlock with a sweep's batch (seen in 1 run in 4): PostgreSQL
		// aborted it, so it changed nothing, as a settle that found
		// nothing to do.
		return nil
	}
	return err
}

// warmPool opens every connection of db's pool now, so none is opened
// (tens of milliseconds on a loaded machine) inside a race's window.
func warmPool(tb testing.TB, db *postgres.DB) {
	tb.Helper()
	warm := make([]*pgxpool.Conn, 0, db.Pool().Config().MaxConns)
	for range cap(warm) {
		c, err := db.Pool().Acquire(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		warm = append(warm, c)
	}
	for _, c := range warm {
		c.Release()
	}
}

// lockAccountHolds takes the row locks of an account's holds that may owe
// tickets (owed, or ACTIVE past their expiry), in id order as a settle
// takes them, and changes nothing; unlock lets them go.
func lockAccountHolds(tb testing.TB, db *postgres.DB, ev int64, account string) (unlock func()) {
	tb.Helper()
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM holds WHERE event_id = $1 AND account = $2 AND (owed OR (status = 'ACTIVE' AND expires_at < now()))
 ORDER BY id FOR UPDATE`, ev, account); err != nil {
		tx.Rollback(ctx)
		tb.Fatal(err)
	}
	return func() { tx.Rollback(ctx) }
}

// dumpAccount logs an account's counter and holds, for a trial gone wrong.
func dumpAccount(tb testing.TB, db *postgres.DB, ev int64, account string) {
	tb.Helper()
	n, ids := counter(tb, db, ev, account)
	tb.Logf("counter %d, listed %v", n, ids)
	rows, err := db.Pool().Query(ctx, `SELECT id::text, status, owed, quantity, expires_at < now(), ended_at IS NOT NULL FROM holds WHERE event_id = $1 AND account = $2 ORDER BY created_at`, ev, account)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		var owed, expired, ended bool
		var q int
		if err := rows.Scan(&id, &status, &owed, &q, &expired, &ended); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("  hold %s %s owed=%v quantity=%d expired=%v ended=%v", id, status, owed, q, expired, ended)
	}
}

// accountDrift compares an account's counter with what it must count:
// the tickets of its active and booked holds and of its owed ones. It
// returns counter minus truth (below zero: tickets given back twice;
// above: a return lost), the active or owed holds missing from the
// account's list (returns no settle can make: lost too) and the tickets
// the account holds now.
func accountDrift(tb testing.TB, db *postgres.DB, ev int64, account string) (drift, unlisted, live int) {
	tb.Helper()
	err := db.Pool().QueryRow(ctx, `
SELECT coalesce((SELECT tickets FROM account_tickets WHERE event_id = $1 AND account = $2), 0)
       - (SELECT coalesce(sum(quantity), 0) FROM holds WHERE event_id = $1 AND account = $2 AND (status IN ('ACTIVE', 'BOOKED') OR owed)),
       (SELECT count(*) FROM holds WHERE event_id = $1 AND account = $2 AND (status = 'ACTIVE' OR owed)
           AND NOT id = ANY (coalesce((SELECT holds FROM account_tickets WHERE event_id = $1 AND account = $2), '{}'))),
       (SELECT coalesce(sum(quantity), 0) FROM holds WHERE event_id = $1 AND account = $2
           AND (status = 'BOOKED' OR (status = 'ACTIVE' AND expires_at > now())))`, ev, account).Scan(&drift, &unlisted, &live)
	if err != nil {
		tb.Fatal(err)
	}
	return drift, unlisted, live
}

// raceLazyLimit runs trials of the lazy limit's races, each on an account
// of its own with a limit of 6: the account holds three seats, one of
// them with a payment under way, and all three expire (left for a settle:
// an expired seated hold is never swept); in the other half of the trials,
// on a GA event, the account holds three GA tickets in three holds the
// same way, swept at once (marked owed) and by the sweepers; then,
// at the same moment, the payment's success arrives (under the honour
// policy it books the expired hold if nothing ended it first), three
// settles run, and six new one-seat holds of the account are asked for,
// while two sweepers run in a loop and (but for the naive settle) a long
// sweep batch holds the expired holds' rows from before the start for 100 ms (lockAccountHolds).
// It returns the trials whose counter
// came out wrong (given back twice, or a return lost) and, over all
// trials, the tickets held beyond the limit and short of it.
//
// naive says settle is the control's: its statement takes hold rows in no
// set order, so a hold beside it may lose a deadlock and be refused as
// taken (the hold's one retry lost too); the product's settle must never
// cause that. verbose logs each trial short of the limit: the refusals
// and the account's holds.
func raceLazyLimit(t *testing.T, db *postgres.DB, trials int, naive, verbose bool, settle func(db *postgres.DB, ev int64, account string) error) (doubled, lost, over, short int) {
	const limit = 6
	seated, ga := newEvent(t, db, "stadium", limit), newEvent(t, db, "amphitheatre", limit)
	seats := seed.MustLayout("stadium").Seats()
	next := 0
	seat := func() string { next++; return seats[next].ID }
	warmPool(t, db)
	stopSweeping := sweepLoop(t, db, func(db *postgres.DB) error { _, err := db.Sweep(ctx); return err })
	defer stopSweeping()
	for trial := range trials {
		account := fmt.Sprintf("fan%d", trial)
		ev, isGA := seated, trial%2 == 0
		one := func() core.HoldRequest { return core.HoldRequest{Seats: []string{seat()}} }
		if isGA {
			ev = ga
			one = func() core.HoldRequest { return core.HoldRequest{Quantity: 1} }
		}
		h, err := hold(db, ev, account, one())
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: account, EventID: ev}, core.FlowAsync, core.Contact{})
		if err == nil {
			err = db.SetPaymentID(ctx, b.ID, fmt.Sprintf("pay_%d", b.ID))
		}
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := hold(db, ev, account, one()); err != nil {
				t.Fatal(err)
			}
		}
		expireAccount(t, db, ev, account)
		if isGA {
			if _, err := db.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		fresh := make([]core.HoldRequest, 6)
		for i := range fresh {
			fresh[i] = one()
		}
		var refusals [10]string
		// A sweep's batch of thousands of holds keeps their rows locked for
		// tens of milliseconds, longer on a loaded machine: the account's
		// expired holds are held from before the start for its first
		// 100 ms, long enough for every participant to ask inside it, even
		// under the race detector. (Not beside the naive settle, which
		// takes them in no set order: they would deadlock.)
		unlock := func() {}
		if !naive {
			unlock = lockAccountHolds(t, db, ev, account)
		}
		together(11, func(k int) {
			switch {
			case k == 10:
				time.Sleep(100 * time.Millisecond)
				unlock()
			case k == 0:
				if _, err := db.Settle(ctx, core.Settlement{EventID: fmt.Sprintf("evt_%d", trial), PaymentID: b.PaymentID, BookingID: b.ID, Succeeded: true}); err != nil {
					t.Errorf("settle payment: %v", err)
				}
			case k < 4:
				// A naive settle may drive the counter below zero, which
				// its CHECK refuses: that attempt changed nothing.
				if err := settle(db, ev, account); err != nil && core.ErrorCode(err) != core.EUnavailable && sqlState(err) != "23514" {
					t.Errorf("settle account: %v", err)
				}
			default:
				// Deliberate: spread the holds over 2 ms around the settles.
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				r := fresh[k-4]
				_, err := hold(db, ev, account, r)
				for try := 0; try < 5 && core.ErrorCode(err) == core.EUnavailable; try++ {
					time.Sleep(50 * time.Millisecond)
					_, err = hold(db, ev, account, r)
				}
				if err != nil && core.ErrorCode(err) != core.ELimitExceeded && !(naive && core.ErrorCode(err) == core.ESeatsTaken) {
					t.Errorf("hold: %v", err)
				}
				if err != nil {
					refusals[k] = err.Error()
				}
			}
		})
		drift, unlisted, live := accountDrift(t, db, ev, account)
		switch {
		case drift < 0:
			doubled++
		case drift > 0 || unlisted > 0:
			lost++
		}
		over += max(live-limit, 0)
		short += max(limit-live, 0)
		if live < limit && verbose {
			t.Logf("trial %d: %d live, refusals %q", trial, live, refusals[4:])
			dumpAccount(t, db, ev, account)
		}
	}
	return doubled, lost, over, short
}

// lazyLimitOptions opens experiment 8's database: the honour policy (a late
// payment books the expired hold if nothing ended it first), and a pool
// large enough for every participant of a trial and both sweepers at once
// (pgx's default on two cores is 4 connections: the fans queued for one,
// and most of them asked after the lock was let go, so the race was not run).
var lazyLimitOptions = postgres.Options{LatePolicy: core.PolicyHonour, MaxConns: 20}

// Experiment 8: the lazy limit. An account's expired holds are settled
// (their tickets given back) by the account's own refused holds, at the
// same moment as other settles, the sweepers and a booking of one of them.
func TestRaceLazyLimit(t *testing.T) {
	t.Run("control: a settle that subtracts what it read gives tickets back twice", func(t *testing.T) {
		db := postgrestest.NewDB(t, lazyLimitOptions)
		doubled, lost, over, _ := raceLazyLimit(t, db, 30, true, false, naiveQuotaSettle)
		t.Logf("naive settle, 30 trials: %d counters given back twice, %d with a return lost, %d tickets held past the limit", doubled, lost, over)
		if doubled+lost == 0 {
			t.Fatal("the naive settle never miscounted: the harness cannot see the bug")
		}
	})
	// The control shows the harness sees the shortfall (a hold refused
	// while an expired hold's ticket still counted) when a settle skips the
	// rows a sweep's batch holds. It is not the design CI caught (a wait in
	// a statement of its own, then the settle: short in about 1 of 500
	// trials here unloaded, several per 60 with the CPU busy), which is too
	// rare to be a control.
	t.Run("control: a settle that skips the hold rows others hold refuses holds short of the limit", func(t *testing.T) {
		const trials = 60
		db := postgrestest.NewDB(t, lazyLimitOptions)
		db.SettleWithoutLock()
		_, _, _, short := raceLazyLimit(t, db, trials, false, false, func(db *postgres.DB, ev int64, account string) error {
			_, _, err := db.SettleQuota(ctx, ev, account)
			return err
		})
		t.Logf("settle without its lock statement, %d trials: %d tickets short of the limit", trials, short)
		if short == 0 {
			t.Fatal("every trial reached the limit: the harness cannot see a hold refused while an expired hold's ticket still counted")
		}
	})
	t.Run("product: settleQuotaSQL, decided on the hold rows", func(t *testing.T) {
		const trials = 60
		db := postgrestest.NewDB(t, lazyLimitOptions)
		doubled, lost, over, short := raceLazyLimit(t, db, trials, false, true, func(db *postgres.DB, ev int64, account string) error {
			_, _, err := db.SettleQuota(ctx, ev, account)
			return err
		})
		t.Logf("settle, %d trials: %d counters given back twice, %d with a return lost, %d tickets past the limit, %d short of it",
			trials, doubled, lost, over, short)
		if doubled != 0 || lost != 0 || over != 0 {
			t.Fatalf("%d counters given back twice, %d with a return lost, %d tickets past the limit; want none", doubled, lost, over)
		}
		// Six fans asked for one ticket each with every earlier ticket
		// expired or booked: the limit is reached in every trial, so no
		// expired hold's tickets were counted against it.
		if short != 0 {
			t.Errorf("%d tickets short of the limit over %d trials: an expired hold counted against it", short, trials)
		}
		checkInvariants(t, db)
	})
}
