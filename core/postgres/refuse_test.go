package postgres_test

// Refusing from the core's memory of taken seats (refuse.go,
// core/seatmap.Taken): the refusal is the database's own answer, the
// memory follows other cores through the keeper's snapshots, and under a
// race of fans on two cores it never sells a seat twice and never refuses
// a seat that was free (a lapsed hold's seat above all), beside two wrong
// memories the harness catches.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seatmap"
)

// refuseCore is one core on a shared database: its store, its memory of
// taken seats and the keeper that feeds it snapshots (no Redis).
type refuseCore struct {
	db     *postgres.DB
	taken  *seatmap.Taken
	keeper *seatmap.Keeper
}

// openCore opens a core on the database at url; wrap, when given, stands
// between the store and the memory (the controls' wrong memories).
func openCore(tb testing.TB, url string, wrap func(*seatmap.Taken) postgres.TakenSeats) *refuseCore {
	tb.Helper()
	c := &refuseCore{taken: &seatmap.Taken{}}
	var ts postgres.TakenSeats = c.taken
	if wrap != nil {
		ts = wrap(c.taken)
	}
	db, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 20, Taken: ts, ConnectTimeout: postgrestest.ConnectTimeout})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	c.db = db
	c.keeper = &seatmap.Keeper{DB: db, Taken: c.taken, Log: slog.New(slog.DiscardHandler)}
	return c
}

func (c *refuseCore) rebuild(tb testing.TB) {
	tb.Helper()
	if err := c.keeper.Rebuild(ctx); err != nil {
		tb.Fatal(err)
	}
}

// The memory's refusal is the database's, for named seats and for a
// best-available band with no seat left: same code, message and details,
// and it costs no statement (it is answered while the seats table is
// locked against every statement); a request naming a seat the event
// lacks still goes to the database, which names it unknown.
func TestRefuseLikeDatabase(t *testing.T) {
	url := postgrestest.NewURL(t)
	plain := openCore(t, url, func(*seatmap.Taken) postgres.TakenSeats { return nil })
	cached := openCore(t, url, nil)
	ev := newEvent(t, plain.db, "cinema", 6)
	cached.rebuild(t)

	if _, err := hold(cached.db, ev, "alice", core.HoldRequest{Seats: []string{"AUD-C-4", "AUD-C-5"}}); err != nil {
		t.Fatal(err)
	}
	ask := core.HoldRequest{Seats: []string{"AUD-C-6", "AUD-C-5", "AUD-C-4"}}
	_, dbErr := hold(plain.db, ev, "bob", ask)
	wantCode(t, dbErr, core.ESeatsTaken)
	tx, err := plain.db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE seats IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// A statement on seats would wait for the lock until this deadline.
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, cacheErr := cached.db.CreateHold(hctx, core.HoldParams{EventID: ev, Account: "bob", Request: ask})
	cancel()
	tx.Rollback(ctx)
	if !reflect.DeepEqual(cacheErr, dbErr) {
		t.Errorf("refused from memory: %#v\nthe database's answer: %#v", cacheErr, dbErr)
	}

	// A best-available hold for a band with no seat left: the same.
	bands, err := plain.db.SeatBands(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	var band string
	for b, ids := range bands {
		if band == "" || len(ids) < len(bands[band]) {
			band = b
		}
	}
	for i, id := range bands[band] {
		if _, err := hold(plain.db, ev, fmt.Sprintf("filler-%d", i), core.HoldRequest{Seats: []string{id}}); err != nil &&
			core.ErrorCode(err) != core.ESeatsTaken {
			t.Fatal(err)
		}
	}
	best := core.HoldRequest{BestAvailable: &core.BestAvailable{Band: band, Count: 1}}
	_, dbErr = hold(plain.db, ev, "carol", best)
	wantCode(t, dbErr, core.ESoldOut)
	cached.rebuild(t)
	if tx, err = plain.db.Pool().Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE seats, price_bands IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	hctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	_, cacheErr = cached.db.CreateHold(hctx, core.HoldParams{EventID: ev, Account: "carol", Request: best})
	cancel()
	tx.Rollback(ctx)
	if !reflect.DeepEqual(cacheErr, dbErr) {
		t.Errorf("sold out from memory: %#v\nthe database's answer: %#v", cacheErr, dbErr)
	}

	// An unknown seat beside a taken one: the database answers, naming both.
	_, err = hold(cached.db, ev, "bob", core.HoldRequest{Seats: []string{"AUD-C-4", "NOPE-1"}})
	wantCode(t, err, core.ESeatsTaken)
	if got := err.(*core.Error).Detail["unknown_seats"]; !reflect.DeepEqual(got, []string{"NOPE-1"}) {
		t.Errorf("unknown_seats = %v; want [NOPE-1] (the database's answer)", got)
	}
}

// The memory follows another core through the keeper's snapshots: that
// core's hold is refused after the next rebuild, its release is refused
// until the rebuild after it (stale, never longer), and a seat whose hold
// lapsed is never refused. This core's own release clears at once.
func TestRefuseFollowsOtherCores(t *testing.T) {
	url := postgrestest.NewURL(t)
	other := openCore(t, url, nil)
	this := openCore(t, url, nil)
	ev := newEvent(t, other.db, "cinema", 6)
	this.rebuild(t)
	decided := func() (int64, int64) { return this.taken.Decisions() }
	// askThis holds seat on this core and says who decided.
	askThis := func(seat, account string) (h *core.Hold, err error, byCache bool) {
		t.Helper()
		r0, _ := decided()
		h, err = hold(this.db, ev, account, core.HoldRequest{Seats: []string{seat}})
		r1, _ := decided()
		return h, err, r1 > r0
	}

	h, err := hold(other.db, ev, "o", core.HoldRequest{Seats: []string{"AUD-E-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err, byCache := askThis("AUD-E-1", "t1"); core.ErrorCode(err) != core.ESeatsTaken || byCache {
		t.Fatalf("before a rebuild: %v (from memory %v); want the database's refusal", err, byCache)
	}
	this.rebuild(t)
	if _, err, byCache := askThis("AUD-E-1", "t2"); core.ErrorCode(err) != core.ESeatsTaken || !byCache {
		t.Fatalf("after a rebuild: %v (from memory %v); want a refusal from memory", err, byCache)
	}
	if _, err := other.db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: "o"}); err != nil {
		t.Fatal(err)
	}
	if _, err, byCache := askThis("AUD-E-1", "t3"); core.ErrorCode(err) != core.ESeatsTaken || !byCache {
		t.Fatalf("another core's release, before a rebuild: %v (from memory %v); want a stale refusal", err, byCache)
	}
	this.rebuild(t)
	mine, err, _ := askThis("AUD-E-1", "t4")
	if err != nil {
		t.Fatalf("another core's release, after a rebuild: %v; want the hold", err)
	}

	// This core's own hold is refused at once, its release clears at once.
	if _, err, byCache := askThis("AUD-E-1", "t5"); core.ErrorCode(err) != core.ESeatsTaken || !byCache {
		t.Fatalf("own hold: %v (from memory %v); want a refusal from memory", err, byCache)
	}
	if _, err := this.db.ReleaseHold(ctx, core.HoldRef{ID: mine.ID, Account: "t4"}); err != nil {
		t.Fatal(err)
	}
	if _, err, _ := askThis("AUD-E-1", "t6"); err != nil {
		t.Fatalf("own release: %v; want the hold at once", err)
	}

	// A hold that lapsed: the other core's short hold, seen by a rebuild,
	// is not refused once its time is up.
	if _, err := other.db.Pool().Exec(ctx, `UPDATE events SET hold_seconds = 1 WHERE id = $1`, ev); err != nil {
		t.Fatal(err)
	}
	other2 := openCore(t, url, nil) // a core that reads the event afresh
	short, err := hold(other2.db, ev, "o2", core.HoldRequest{Seats: []string{"AUD-E-2"}})
	if err != nil {
		t.Fatal(err)
	}
	this.rebuild(t)
	if _, err, byCache := askThis("AUD-E-2", "t7"); core.ErrorCode(err) != core.ESeatsTaken || !byCache {
		t.Fatalf("a running short hold: %v (from memory %v); want a refusal from memory", err, byCache)
	}
	time.Sleep(time.Until(short.ExpiresAt) + 10*time.Millisecond) // the hold lapses; no rebuild since
	if _, err, _ := askThis("AUD-E-2", "t8"); err != nil {
		t.Fatalf("a lapsed hold's seat: %v; want the hold", err)
	}
}

// fanLog is what the fans of a race were told, with their own clock
// around each answer (the database runs on this host: one clock).
type fanLog struct {
	mu       sync.Mutex
	grants   []*grant
	refusals []refusal
}

type grant struct {
	seats            []string
	sent, yes        time.Time // asked; told yes
	expires          time.Time
	released         bool
	relSent, relDone time.Time
}

// refusal is a seats_taken naming seats, or a sold_out of a band for
// count seats (band set).
type refusal struct {
	named     []string
	band      string
	count     int
	sent, got time.Time
}

// raceRefuse runs fans on two cores of one database for a few seconds:
// each asks for one or two of the ten seats of a band on either core (by
// name, or with best, a third of the time best available in the band),
// and when it gets them walks away (the hold lapses after a second) or
// lets them go on either core. One core sweeps every second. hold is how a
// fan asks (the product: CreateHold); release how it lets go.
func raceRefuse(t *testing.T, best bool, wrap func(*seatmap.Taken) postgres.TakenSeats,
	holdFn func(c *refuseCore, ev int64, account string, r core.HoldRequest) (*core.Hold, error),
	releaseFn func(c *refuseCore, h *core.Hold) error) (*fanLog, [2]*refuseCore) {
	const (
		fans    = 16
		nSeats  = 10
		runFor  = 4 * time.Second
		maxAge  = 300 * time.Millisecond
		rebuild = 100 * time.Millisecond
	)
	url := postgrestest.NewURL(t)
	var cores [2]*refuseCore
	for i := range cores {
		cores[i] = openCore(t, url, wrap)
		cores[i].taken.MaxAge = maxAge
	}
	ev := newEvent(t, cores[0].db, "cinema", 6)
	if _, err := cores[0].db.Pool().Exec(ctx, `UPDATE events SET hold_seconds = 1 WHERE id = $1`, ev); err != nil {
		t.Fatal(err)
	}
	seats := make([]string, nSeats)
	for i := range seats {
		seats[i] = fmt.Sprintf("AUD-M-%d", i+1) // the RECLINER band, all of it
	}

	bg, stop := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for _, c := range cores {
		c.rebuild(t)
		workers.Go(func() { c.keeper.Run(bg, rebuild) })
	}
	workers.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-tick.C:
				if _, err := cores[0].db.Sweep(bg); err != nil && bg.Err() == nil {
					t.Errorf("sweep: %v", err)
				}
			}
		}
	})

	log := &fanLog{}
	end := time.Now().Add(runFor)
	var fanWG sync.WaitGroup
	for f := range fans {
		fanWG.Go(func() {
			for n := 0; time.Now().Before(end); n++ {
				i := rand.IntN(nSeats)
				ask := []string{seats[i]}
				if rand.IntN(3) == 0 && i+1 < nSeats {
					ask = append(ask, seats[i+1])
				}
				r := core.HoldRequest{Seats: ask}
				if best && rand.IntN(3) == 0 {
					r = core.HoldRequest{BestAvailable: &core.BestAvailable{Band: "RECLINER", Count: len(ask)}}
				}
				c := cores[rand.IntN(2)]
				sent := time.Now()
				h, err := holdFn(c, ev, fmt.Sprintf("fan-%d-%d", f, n), r)
				got := time.Now()
				switch {
				case err == nil:
					g := &grant{seats: h.Seats, sent: sent, yes: got, expires: h.ExpiresAt}
					log.mu.Lock()
					log.grants = append(log.grants, g)
					log.mu.Unlock()
					if rand.IntN(2) == 0 {
						time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
						g.relSent = time.Now()
						if err := releaseFn(cores[rand.IntN(2)], h); err != nil && core.ErrorCode(err) != core.EHoldNotActive {
							t.Errorf("release: %v", err)
						}
						g.relDone, g.released = time.Now(), true
					}
				case core.ErrorCode(err) == core.ESeatsTaken:
					named, _ := err.(*core.Error).Detail["seats"].([]string)
					log.mu.Lock()
					log.refusals = append(log.refusals, refusal{named: named, sent: sent, got: got})
					log.mu.Unlock()
				case core.ErrorCode(err) == core.ESoldOut && r.BestAvailable != nil:
					log.mu.Lock()
					log.refusals = append(log.refusals, refusal{band: "RECLINER", count: len(ask), sent: sent, got: got})
					log.mu.Unlock()
				default:
					t.Errorf("hold %v: %v", ask, err)
				}
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
		})
	}
	fanWG.Wait()
	stop()
	workers.Wait()
	return log, cores
}

// check reads a race's log. A double sale: two fans told yes for one seat
// at once, each from the answer until the hold's expiry or the moment its
// release was asked. A wrong refusal: a refused seat that no hold had
// from the moment its request was sent (less allow, for a release: another
// core's release is seen within a snapshot's age) until it was answered;
// a hold that lapsed is allowed nothing.
func (l *fanLog) check(allow time.Duration, band []string) (doubles, wrong, lapsedThenWon int) {
	bySeat := map[string][]*grant{}
	for _, g := range l.grants {
		for _, s := range g.seats {
			bySeat[s] = append(bySeat[s], g)
		}
	}
	end := func(g *grant) (narrow, wide time.Time, byRelease bool) {
		if g.released && g.relSent.Before(g.expires) {
			return g.relSent, g.relDone.Add(allow), true
		}
		return g.expires, g.expires, false
	}
	for _, gs := range bySeat {
		sort.Slice(gs, func(i, j int) bool { return gs[i].yes.Before(gs[j].yes) })
		for i := 1; i < len(gs); i++ {
			prevEnd, _, byRel := end(gs[i-1])
			if gs[i].yes.Before(prevEnd) {
				doubles++
			}
			if !byRel {
				lapsedThenWon++
			}
		}
	}
	heldDuring := func(s string, r refusal) bool {
		for _, g := range bySeat[s] {
			if _, wide, _ := end(g); g.sent.Before(r.got) && r.sent.Before(wide) {
				return true
			}
		}
		return false
	}
	for _, r := range l.refusals {
		for _, s := range r.named {
			if !heldDuring(s, r) {
				wrong++
			}
		}
		if r.band != "" {
			// Sold out: fewer than count of the band's seats were free.
			free := 0
			for _, s := range band {
				if !heldDuring(s, r) {
					free++
				}
			}
			if free >= r.count {
				wrong++
			}
		}
	}
	return doubles, wrong, lapsedThenWon
}

func productHold(c *refuseCore, ev int64, account string, r core.HoldRequest) (*core.Hold, error) {
	return hold(c.db, ev, account, r)
}

func productRelease(c *refuseCore, h *core.Hold) error {
	_, err := c.db.ReleaseHold(ctx, core.HoldRef{ID: h.ID, Account: h.Account})
	return err
}

// Experiment: fans race on two cores refusing from memory. No seat is
// told yes twice at once, no refusal names a seat that was free, seats
// whose holds lapsed are won again, and the memory did refuse.
func TestRaceRefuseFromMemory(t *testing.T) {
	const allow = 300*time.Millisecond + 200*time.Millisecond // MaxAge, and a rebuild's own time
	var recliners []string
	for i := range 10 {
		recliners = append(recliners, fmt.Sprintf("AUD-M-%d", i+1))
	}

	t.Run("control: a memory that grants sells seats twice", func(t *testing.T) {
		// The cache decides: a seat it does not know taken is told yes
		// without the database, and remembered held for the hold's second.
		grantHold := func(c *refuseCore, ev int64, account string, r core.HoldRequest) (*core.Hold, error) {
			seats := r.Seats
			if taken := c.taken.Refuse(ev, seats); taken != nil {
				return nil, core.Errorf(core.ESeatsTaken, "taken").With("seats", taken)
			}
			now := time.Now()
			c.taken.Held(ev, seats, now.Add(time.Second))
			return &core.Hold{ID: "fake", EventID: ev, Account: account, Seats: seats, ExpiresAt: now.Add(time.Second)}, nil
		}
		grantRelease := func(c *refuseCore, h *core.Hold) error { c.taken.Freed(h.EventID, h.Seats); return nil }
		log, _ := raceRefuse(t, false, nil, grantHold, grantRelease)
		doubles, _, _ := log.check(allow, nil)
		t.Logf("memory that grants: %d grants, %d told yes while another fan held the seat", len(log.grants), doubles)
		if doubles == 0 {
			t.Fatal("a memory that grants sold no seat twice: the harness cannot see a double sale")
		}
	})

	t.Run("control: a memory that refuses lapsed seats refuses free seats", func(t *testing.T) {
		log, _ := raceRefuse(t, true, func(tk *seatmap.Taken) postgres.TakenSeats {
			return &sticky{Taken: tk, band: recliners, ever: map[string]bool{}}
		},
			productHold, productRelease)
		doubles, wrong, _ := log.check(allow, recliners)
		t.Logf("sticky memory: %d grants, %d refusals, %d of a free seat", len(log.grants), len(log.refusals), wrong)
		if doubles != 0 {
			t.Errorf("%d double sales: the database decides every hold here", doubles)
		}
		if wrong == 0 {
			t.Fatal("a memory that refuses lapsed seats never refused a free seat: the harness cannot see it")
		}
	})

	t.Run("product: refusals only of taken seats, no double sale", func(t *testing.T) {
		log, cores := raceRefuse(t, true, nil, productHold, productRelease)
		doubles, wrong, lapsedThenWon := log.check(allow, recliners)
		var byCache, byDB int64
		for _, c := range cores {
			r, p := c.taken.Decisions()
			byCache, byDB = byCache+r, byDB+p
		}
		soldOut := 0
		for _, r := range log.refusals {
			if r.band != "" {
				soldOut++
			}
		}
		t.Logf("product: %d grants (%d after a lapse), %d refusals (%d sold out; %d from memory, %d holds passed to the database)",
			len(log.grants), lapsedThenWon, len(log.refusals), soldOut, byCache, byDB)
		if doubles != 0 {
			t.Errorf("%d double sales", doubles)
		}
		if wrong != 0 {
			t.Errorf("%d refusals of a seat that was free", wrong)
		}
		if byCache == 0 || lapsedThenWon == 0 {
			t.Errorf("the race did not exercise the memory: %d refusals from it, %d seats won after a lapse", byCache, lapsedThenWon)
		}
	})
}

// sticky is the wrong memory: a seat this core held is refused (and
// counted taken in its band) until this core releases it, its hold's lapse
// ignored.
type sticky struct {
	*seatmap.Taken
	band []string
	mu   sync.Mutex
	ever map[string]bool
}

func (s *sticky) SoldOut(ev int64, band string, count int) bool {
	if s.Taken.SoldOut(ev, band, count) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	free := 0
	for _, x := range s.band {
		if !s.ever[x] && s.Taken.Refuse(ev, []string{x}) == nil {
			free++
		}
	}
	return free < count
}

func (s *sticky) Held(ev int64, seats []string, until time.Time) {
	s.mu.Lock()
	for _, x := range seats {
		s.ever[x] = true
	}
	s.mu.Unlock()
	s.Taken.Held(ev, seats, until)
}

func (s *sticky) Freed(ev int64, seats []string) {
	s.mu.Lock()
	for _, x := range seats {
		delete(s.ever, x)
	}
	s.mu.Unlock()
	s.Taken.Freed(ev, seats)
}

func (s *sticky) Refuse(ev int64, seats []string) []string {
	if r := s.Taken.Refuse(ev, seats); r != nil {
		return r
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var r []string
	for _, x := range seats {
		if s.ever[x] {
			r = append(r, x)
		}
	}
	return r
}
