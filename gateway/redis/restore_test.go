package redis_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/redis/redistest"
)

// lose undoes writes as a Redis failover that lost them would: each
// identity's ids entry goes (and its draw entry), and seq goes back to
// seq. The real thing, a failover with a lagging replica, is
// loadtest/proof's TestRedisFailoverKeepsPlaces; this is the rule's unit.
func lose(t *testing.T, s *redis.Store, ev int64, seq int64, ids ...string) {
	t.Helper()
	p := "{evt:" + strconv.FormatInt(ev, 10) + "}:"
	for _, id := range ids {
		if err := s.Client().HDel(ctx, p+"ids", id).Err(); err != nil {
			t.Fatal(err)
		}
		s.Client().ZRem(ctx, p+"pre", id)
		s.Client().ZRem(ctx, p+"active", id)
	}
	if seq >= 0 {
		s.Client().Set(ctx, p+"seq", seq, 0)
	}
}

func held(t *testing.T, s *redis.Store, ev int64, place int64) gateway.Held {
	t.Helper()
	d, err := s.Dials(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	return gateway.Held{Position: place, Epoch: d.Epoch}
}

// Lost joins: the token puts each fan back at its place, and seq moves up
// so no later joiner is given it again; a joiner who was given a lost
// place meanwhile shares it, and both are admitted when it is offered
// (rule 2), neither sent to the back. A token of another epoch restores
// nothing; the control's switch turns the rule off.
func TestRestoreLostJoin(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds = 60000, 100, 30
			d.Paused = true
		})
		for f := 1; f <= 5; f++ {
			if r, err := s.Join(ctx, ev, fmt.Sprint(f)); err != nil || r.Position != int64(f) {
				t.Fatalf("join %d = %+v, %v", f, r, err)
			}
		}
		lose(t, s, ev, 3, "4", "5") // the joins of places 4 and 5 are lost
		if st, _, _ := s.Claim(ctx, ev, "4", 4); st != gateway.ClaimUnknown {
			t.Fatalf("claim of a lost join = %s; want unknown", st)
		}
		// A new joiner is given place 4 again (seq is behind).
		if r, _ := s.Join(ctx, ev, "x"); r.Position != 4 {
			t.Fatalf("joiner after the loss at %d; want 4 (the lost place)", r.Position)
		}
		if out, n, err := s.Restore(ctx, ev, "4", held(t, s, ev, 4)); err != nil || out != gateway.RestoreRestored || n != 4 {
			t.Fatalf("Restore(4 at 4) = %s %d %v; want restored at 4", out, n, err)
		}
		if out, n, err := s.Restore(ctx, ev, "5", held(t, s, ev, 5)); err != nil || out != gateway.RestoreRestored || n != 5 {
			t.Fatalf("Restore(5 at 5) = %s %d %v; want restored at 5", out, n, err)
		}
		if r, _ := s.Join(ctx, ev, "y"); r.Position != 6 {
			t.Fatalf("joiner after the restores at %d; want 6 (after every restored place)", r.Position)
		}
		// Restoring again, or with an older token, changes nothing.
		if out, n, _ := s.Restore(ctx, ev, "5", held(t, s, ev, 2)); out != gateway.RestoreKept || n != 5 {
			t.Fatalf("Restore(5, older place 2) = %s %d; want kept at 5", out, n)
		}
		other := held(t, s, ev, 9)
		other.Epoch = "another-room"
		if out, _, _ := s.Restore(ctx, ev, "z", other); out != gateway.RestoreRejoin {
			t.Fatalf("Restore with another epoch = %s; want rejoin", out)
		}
		// Only gateways sign tokens: one the store never saw is a lost join.
		if out, n, _ := s.Restore(ctx, ev, "z", held(t, s, ev, 9)); out != gateway.RestoreRestored || n != 9 {
			t.Fatalf("Restore(z at 9) = %s %d; want restored at 9", out, n)
		}

		setDials(t, s, ev, func(d *gateway.Dials) { d.Paused = false })
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		if tk, _ := s.Tick(ctx, ev, 1, gateway.Lease{}); tk.Serving < 6 {
			t.Fatalf("serving %d; want 6 offered", tk.Serving)
		}
		for _, f := range []struct {
			id  string
			pos int64
		}{{"x", 4}, {"4", 4}, {"5", 5}, {"y", 6}} {
			if st, _, err := s.Claim(ctx, ev, f.id, f.pos); err != nil || st != gateway.ClaimAdmitted {
				t.Errorf("claim %s at %d = %s, %v; want admitted (two fans at place 4 both come in)", f.id, f.pos, st, err)
			}
		}

		// The control's switch: the rule is off for this event.
		s.Client().HSet(ctx, "{evt:"+strconv.FormatInt(ev, 10)+"}:dials", "no_restore", 1)
		if out, _, _ := s.Restore(ctx, ev, "q", held(t, s, ev, 3)); out != gateway.RestoreOff {
			t.Fatalf("Restore with the rule off = %s; want off", out)
		}
	})
}

// A lost move to the back: the store has the old, lapsed place, the token
// the new one; the larger place is the write that was lost, and the claim
// with the new place works once restored. A lost claim: the admitted token
// writes 'done' again and the session back into active (the cap counts it).
func TestRestoreLostRequeueAndClaim(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds, d.SessionSeconds = 60000, 100, 1, 600
		})
		for f := 1; f <= 3; f++ {
			s.Join(ctx, ev, fmt.Sprint(f))
		}
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		st2, exp2, _ := s.Claim(ctx, ev, "2", 2)
		if st2 != gateway.ClaimAdmitted {
			t.Fatalf("claim 2 = %s; want admitted", st2)
		}
		time.Sleep(1100 * time.Millisecond) // fan 1's offer lapses
		s.Tick(ctx, ev, 1, gateway.Lease{})
		st, back, _ := s.Claim(ctx, ev, "1", 1)
		if st != gateway.ClaimRequeued || back != 4 {
			t.Fatalf("late claim = %s %d; want requeued to 4", st, back)
		}
		// The failover loses the move to the back.
		p := "{evt:" + strconv.FormatInt(ev, 10) + "}:"
		s.Client().HSet(ctx, p+"ids", "1", 1)
		s.Client().Set(ctx, p+"seq", 3, 0)
		if st, n, _ := s.Claim(ctx, ev, "1", back); st != gateway.ClaimMoved || n != 1 {
			t.Fatalf("claim after the loss = %s %d; want moved to 1 (the store's older place)", st, n)
		}
		if out, n, _ := s.Restore(ctx, ev, "1", held(t, s, ev, back)); out != gateway.RestoreRestored || n != back {
			t.Fatalf("Restore(1 at %d) = %s %d; want restored", back, out, n)
		}
		if r, _ := s.Join(ctx, ev, "late"); r.Position != back+1 {
			t.Fatalf("next joiner at %d; want %d", r.Position, back+1)
		}

		// The failover loses fan 2's claim.
		s.Client().HSet(ctx, p+"ids", "2", 2)
		s.Client().ZRem(ctx, p+"active", "2")
		h := held(t, s, ev, 2)
		h.Admitted = exp2
		if out, _, _ := s.Restore(ctx, ev, "2", h); out != gateway.RestoreEnded {
			t.Fatalf("Restore of an admitted token = %s; want ended", out)
		}
		if v, _ := s.Client().HGet(ctx, p+"ids", "2").Result(); v != "done" {
			t.Errorf("ids[2] after restore = %q; want done", v)
		}
		if sc, err := s.Client().ZScore(ctx, p+"active", "2").Result(); err != nil || int64(sc) != exp2 {
			t.Errorf("active[2] after restore = %v, %v; want the session's end %d", sc, err, exp2)
		}
	})
}

// A pre-queue fan whose join was lost goes back into the draw while it is
// open; once the draw is made without it, it gets a random place among the
// drawn places not yet offered, shared with the fan drawn there, and both
// are admitted.
func TestRestoreLostPrequeueJoin(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds = 60000, 100, 30
		})
		for f := range 10 {
			s.Join(ctx, ev, fmt.Sprint(f))
		}
		lose(t, s, ev, -1, "3")
		if out, _, _ := s.Restore(ctx, ev, "3", held(t, s, ev, 0)); out != gateway.RestorePrequeue {
			t.Fatalf("Restore of a pre-queue fan, draw open = %s; want prequeue", out)
		}
		lose(t, s, ev, -1, "7")
		setDials(t, s, ev, func(d *gateway.Dials) { d.OnsaleAt = time.Now().Add(-time.Second) })
		if p, err := s.Position(ctx, ev, "0"); err != nil || p < 1 || p > 9 {
			t.Fatalf("Position(0) = %d, %v; want 1..9 (the draw is made without fan 7)", p, err)
		}
		out, place, err := s.Restore(ctx, ev, "7", held(t, s, ev, 0))
		if err != nil || out != gateway.RestoreRestored || place < 1 || place > 9 {
			t.Fatalf("Restore of a pre-queue fan after the draw = %s %d %v; want a drawn place 1..9", out, place, err)
		}
		var sharer string
		for f := range 10 {
			if p, _ := s.Position(ctx, ev, fmt.Sprint(f)); p == place && f != 7 {
				sharer = fmt.Sprint(f)
			}
		}
		if sharer == "" {
			t.Fatalf("no drawn fan at place %d", place)
		}
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		for _, id := range []string{sharer, "7"} {
			if st, _, _ := s.Claim(ctx, ev, id, place); st != gateway.ClaimAdmitted {
				t.Errorf("claim %s at %d = %s; want admitted", id, place, st)
			}
		}
	})
}

// A drawn pre-queue fan whose offer lapsed was moved to the back, and the
// failover lost the move (ids says 'pre' again, seq is behind): the token's
// place beyond the draw is restored, like any lost move to the back, and
// the claim at it works. (It was answered kept at the drawn place, whose
// offer had lapsed: the next claim requeued the fan at the current back,
// losing its requeue place.)
func TestRestoreLostRequeueOfADrawnFan(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds = 60000, 100, 1
		})
		for f := 1; f <= 3; f++ {
			s.Join(ctx, ev, fmt.Sprint(f))
		}
		setDials(t, s, ev, func(d *gateway.Dials) { d.OnsaleAt = time.Now().Add(-time.Second) })
		drawn, err := s.Position(ctx, ev, "1")
		if err != nil || drawn < 1 || drawn > 3 {
			t.Fatalf("Position(1) = %d, %v; want a drawn place", drawn, err)
		}
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(1100 * time.Millisecond) // fan 1's offer lapses
		s.Tick(ctx, ev, 1, gateway.Lease{})
		st, back, _ := s.Claim(ctx, ev, "1", drawn)
		if st != gateway.ClaimRequeued || back != 4 {
			t.Fatalf("late claim = %s %d; want requeued to 4", st, back)
		}
		// The failover loses the move to the back.
		p := "{evt:" + strconv.FormatInt(ev, 10) + "}:"
		s.Client().HSet(ctx, p+"ids", "1", "pre")
		s.Client().Set(ctx, p+"seq", 0, 0)
		if st, n, _ := s.Claim(ctx, ev, "1", back); st != gateway.ClaimMoved || n != drawn {
			t.Fatalf("claim after the loss = %s %d; want moved to the drawn place %d", st, n, drawn)
		}
		if out, n, _ := s.Restore(ctx, ev, "1", held(t, s, ev, back)); out != gateway.RestoreRestored || n != back {
			t.Fatalf("Restore(1 at %d) = %s %d; want restored at %d (the requeue place)", back, out, n, back)
		}
		if r, _ := s.Join(ctx, ev, "late"); r.Position != back+1 {
			t.Fatalf("next joiner at %d; want %d", r.Position, back+1)
		}
		// A drawn fan's own drawn token is still kept at its drawn place.
		if out, n, _ := s.Restore(ctx, ev, "2", held(t, s, ev, 0)); out != gateway.RestoreKept || n < 1 || n > 3 {
			t.Fatalf("Restore(2, pre-queue token) = %s %d; want kept at its drawn place", out, n)
		}
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		if st, _, _ := s.Claim(ctx, ev, "1", back); st != gateway.ClaimAdmitted {
			t.Fatalf("claim at the restored place %d = %s; want admitted", back, st)
		}
	})
}

// An admitted fan who ended its session with Leave stays out of the
// room's count: restoring its admitted token (a join carrying the cookie)
// puts nothing back in active. The control, a claim the failover lost,
// is restored (TestRestoreLostRequeueAndClaim).
func TestRestoreAfterLeave(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.SessionSeconds = 60000, 100, 600
		})
		s.Join(ctx, ev, "1")
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		st, exp, _ := s.Claim(ctx, ev, "1", 1)
		if st != gateway.ClaimAdmitted {
			t.Fatalf("claim = %s; want admitted", st)
		}
		if out, err := s.Leave(ctx, ev, "1"); err != nil || out != gateway.LeaveEnded {
			t.Fatalf("Leave = %s, %v; want ended", out, err)
		}
		h := held(t, s, ev, 1)
		h.Admitted = exp
		if out, _, _ := s.Restore(ctx, ev, "1", h); out != gateway.RestoreEnded {
			t.Fatalf("Restore of an admitted token after leave = %s; want ended", out)
		}
		p := "{evt:" + strconv.FormatInt(ev, 10) + "}:"
		if n, _ := s.Client().ZCard(ctx, p+"active").Result(); n != 0 {
			t.Fatalf("%d sessions in active after the fan left and its token was restored; want 0", n)
		}
	})
}

// Rule 2 holds for the whole claim window, however long it is set: a
// second fan at a shared place claiming more than five minutes after the
// first (claim_seconds up to an hour) is admitted, and its claim does not
// move the place's claim time (which would stretch the window for a third).
// The claims were trimmed at five minutes, so that fan went to the back.
func TestSharedPlaceLongClaimWindow(t *testing.T) {
	forBoth(t, func(t *testing.T, s *redis.Store) {
		ev := redistest.Event(t, s)
		setDials(t, s, ev, func(d *gateway.Dials) {
			d.PrequeueAt, d.OnsaleAt = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
			d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds = 60000, 100, 3600
		})
		s.Join(ctx, ev, "a")
		if out, n, _ := s.Restore(ctx, ev, "b", held(t, s, ev, 1)); out != gateway.RestoreRestored || n != 1 {
			t.Fatalf("Restore(b at 1) = %s %d; want restored at 1 (shared with a)", out, n)
		}
		s.Tick(ctx, ev, 1, gateway.Lease{})
		time.Sleep(100 * time.Millisecond)
		s.Tick(ctx, ev, 1, gateway.Lease{})
		if st, _, _ := s.Claim(ctx, ev, "a", 1); st != gateway.ClaimAdmitted {
			t.Fatalf("claim a at 1 = %s; want admitted", st)
		}
		// Six minutes pass (the first claim's time is moved back).
		p := "{evt:" + strconv.FormatInt(ev, 10) + "}:"
		first := float64(time.Now().Add(-6 * time.Minute).UnixMilli())
		s.Client().ZAddXX(ctx, p+"claims", goredis.Z{Score: first, Member: "1"})
		s.Tick(ctx, ev, 1, gateway.Lease{}) // trims old claims
		if st, _, _ := s.Claim(ctx, ev, "b", 1); st != gateway.ClaimAdmitted {
			t.Fatalf("claim b at shared place 1, six minutes after a's, claim window an hour = %s; want admitted", st)
		}
		if sc, err := s.Client().ZScore(ctx, p+"claims", "1").Result(); err != nil || sc != first {
			t.Fatalf("place 1's claim time after the second claim = %v, %v; want the first claim's, %v", sc, err, first)
		}
	})
}
