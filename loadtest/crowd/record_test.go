package crowd_test

import (
	"context"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/crowd"
)

// TestCrowdRecords runs a crowd through a fake gateway whose join, hold,
// pay and confirm first answer 503 a few times (a failover): the fans tap
// again and get through; the crowd counts the answers per route and class
// as the gateway gave them, lists exactly the bookings the gateway said
// were confirmed, and keeps each fan's place history.
func TestCrowdRecords(t *testing.T) {
	g := newFakeGateway(t)
	const fans, down = 200, 5
	for _, r := range []string{"join", "hold", "pay", "confirm"} {
		g.unavailable[r] = down
	}
	st := crowd.NewStats(time.Now(), 2*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := crowd.New(g.addr, 1, []string{"A", "B"}, 64, st)
	admissions := c.Fans(ctx, fans, crowd.Arrival{OnsaleIn: time.Second, Wall: 100 * time.Millisecond, Tail: 500 * time.Millisecond}, time.Now())
	if ctx.Err() != nil {
		t.Fatal("the crowd took longer than 2 minutes")
	}
	got := g.Counts()

	// Answers: per route and class, as the gateway counted them.
	answers := map[string]int{}
	for _, a := range st.Answers() {
		answers[a.Route+" "+a.Class] += a.N
		if a.At.Before(st.Start) || a.At.Nanosecond() != st.Start.Nanosecond() {
			t.Fatalf("answer %+v not on a second since the start %v", a, st.Start)
		}
	}
	for _, r := range []string{"join", "hold", "pay", "confirm"} {
		if answers[r+" 503"] != down || got[r+" 503"] != down {
			t.Errorf("%s: the crowd counted %d answers 503, the gateway gave %d; want %d", r, answers[r+" 503"], got[r+" 503"], down)
		}
	}
	if answers["join 200"] != fans || answers["status 200"] != got["status"] {
		t.Errorf("answers %v; want %d joins answered 200 (every fan got in after tapping again), %d polls", answers, fans, got["status"])
	}

	// Confirmations: every booking the gateway said was confirmed, once,
	// with its seats and amount.
	told := c.Confirmations()
	if int64(len(told)) != st.Confirmed.Load() || len(told) != len(g.told) || len(told) == 0 {
		t.Fatalf("the crowd recorded %d confirmations (Stats.Confirmed %d); the gateway confirmed %d bookings", len(told), st.Confirmed.Load(), len(g.told))
	}
	for _, b := range told {
		if g.told[int(b.Booking)] == 0 || len(b.Seats) != 2 || b.AmountPaise != 1000*b.Booking || b.At.IsZero() {
			t.Errorf("confirmation %+v; not one the gateway gave", b)
		}
	}

	// Place histories: joined at its place, then (the fake admits every
	// fan at place 1) seen at 1 unless it was there already, then admitted.
	if len(admissions) != fans {
		t.Fatalf("%d traces; want %d", len(admissions), fans)
	}
	for _, a := range admissions {
		p := a.Places
		want := 3
		if a.First == 1 {
			want = 2
		}
		if len(p) != want || p[0].Kind != check.PlaceJoined || p[0].Position != a.First || p[0].Position == 0 ||
			p[len(p)-1].Kind != check.PlaceAdmitted || p[len(p)-1].Position != 1 || want == 3 && p[1].Kind != check.PlaceSeen {
			t.Fatalf("fan %d's place history %+v; want joined at %d, seen at 1, admitted", a.Fan, p, a.First)
		}
	}
}
