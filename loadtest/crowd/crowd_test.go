package crowd_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/crowd"
)

// within fails unless got is want of n, give or take five standard errors
// of a proportion drawn n times.
func within(tb testing.TB, what string, got, n int, want float64) {
	tb.Helper()
	sd := math.Sqrt(want * (1 - want) / float64(n))
	if p := float64(got) / float64(n); math.Abs(p-want) > 5*sd {
		tb.Errorf("%s: %d of %d = %.3f; want %.3f ± %.3f", what, got, n, p, want, 5*sd)
	}
}

// TestCrowdProportions runs a crowd through a fake gateway and checks the
// stated proportions (mix.go) in the requests it made, and that its counts
// agree with what the gateway saw.
func TestCrowdProportions(t *testing.T) {
	g := newFakeGateway(t)
	const fans = 1000
	st := crowd.NewStats(time.Now(), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ops := crowd.NewOperators(g.addr, "admin", 1, st)
	if err := ops.SetDials(ctx, crowd.Dials{Onsale: time.Now(), PerMinute: 6000, MaxActive: 2000, Session: time.Minute, Claim: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ev := ops.Event(ctx)
	if ev.Capacity != 100 || ev.Hold() != 21*time.Second || len(ev.BandCodes()) != 2 || ev.BandCodes()[1] != "B" {
		t.Fatalf("Event() = %+v", ev)
	}
	c := crowd.New(g.addr, 1, ev.BandCodes(), 256, st)
	start := time.Now()
	admissions := c.Fans(ctx, fans, crowd.Arrival{OnsaleIn: time.Second, Wall: 100 * time.Millisecond, Tail: 500 * time.Millisecond}, start)
	if ctx.Err() != nil {
		t.Fatal("the crowd took longer than 2 minutes")
	}
	got := g.Counts()
	t.Logf("the gateway saw %v", got)

	// The line: every fan joins once, is admitted at its first poll, and
	// its trace says so.
	if got["join"] != fans || got["status"] != fans || len(admissions) != fans {
		t.Errorf("joins %d, polls %d, traces %d; want %d each", got["join"], got["status"], len(admissions), fans)
	}
	for _, a := range admissions {
		if a.AdmittedAt.IsZero() || a.Position != 1 || a.First == 0 {
			t.Fatalf("trace %+v; want admitted at position 1 after a first place", a)
		}
	}
	if n := st.Admitted.Load(); n != fans || st.Joined.Load() != fans {
		t.Errorf("Stats: joined %d, admitted %d; want %d", st.Joined.Load(), n, fans)
	}

	// A fourth of the fans (the unlucky ones) lose every race: three
	// misses, then half give up, the rest watch the map until it says sold
	// out. Every such fan is done.
	unlucky := fans / 4
	lucky := fans - unlucky
	watchers := got["stats (unlucky)"]
	if got["hold lost (unlucky)"] != 3*unlucky {
		t.Errorf("unlucky fans asked for %d holds; want exactly three each (%d)", got["hold lost (unlucky)"], 3*unlucky)
	}
	within(t, "unlucky fans who watch the map after three misses", watchers, unlucky, 0.5)
	if got["seatmap (unlucky)"] != unlucky+watchers {
		t.Errorf("unlucky fans read the map %d times; want once before the hold, and once more each of %d who watched", got["seatmap (unlucky)"], watchers)
	}

	// The first ask: 5% over the limit (then 4 seats), 35% picked from
	// the map (after asking for the layout), the rest best available.
	picks := got["layout"] - 1 + got["layout (unlucky)"] // the crowd's own copy of the layout, parsed once
	within(t, "over the limit first", got["hold best 9"], lucky, 0.05)
	within(t, "picked from the map", picks, fans, 0.35)
	if got["hold picked"] != got["layout"]-1 || got["seatmap"] != lucky {
		t.Errorf("picked holds %d, layouts %d, seat maps %d; want one layout per picked hold (and the crowd's own), one map per lucky fan (%d)",
			got["hold picked"], got["layout"], got["seatmap"], lucky)
	}
	if st.Limit.Load() != int64(got["hold best 9"]) || got["hold best other"] != 0 {
		t.Errorf("Stats.Limit %d, gateway 422s %d, odd counts %d", st.Limit.Load(), got["hold best 9"], got["hold best other"])
	}
	// Every lucky fan gets a hold (a lost race retries best available).
	held := int(st.Held.Load())
	if held != lucky {
		t.Errorf("held %d; want %d", held, lucky)
	}
	// A hold asked for is a 201, a lost race (409) or over the limit (422).
	if asked := got["hold best 9"] + got["hold best 1-6"] + got["hold picked"] + got["hold lost (unlucky)"]; asked != held+int(st.Taken.Load()+st.Limit.Load()) {
		t.Errorf("%d holds asked for; want held %d + lost races %d + over the limit %d", asked, held, st.Taken.Load(), st.Limit.Load())
	}

	// With a hold: 10% close the app (nothing more), 5% release, 15% pay
	// by card with a double-clicked confirm (one key, two requests), the
	// rest by UPI (every tenth payment fails: the seats are released).
	card := got["confirm"] / 2
	within(t, "card", card, held, 0.15)
	within(t, "UPI", got["pay"], held, 0.70)
	if int(st.Paid.Load()) != card+got["pay"] {
		t.Errorf("Stats.Paid %d; want %d card + %d UPI", st.Paid.Load(), card, got["pay"])
	}
	for k, n := range g.confirmKeys {
		if n != 2 {
			t.Errorf("Idempotency-Key %q confirmed %d times; want 2 (a double click)", k, n)
		}
	}
	released := got["release"] - int(st.FailedPay.Load())
	within(t, "released", released, held, 0.05)
	within(t, "closed the app", held-card-got["pay"]-released, held, 0.10)
	if int(st.Abandoned.Load()) != held-card-got["pay"] {
		t.Errorf("Stats.Abandoned %d; want closed + released %d", st.Abandoned.Load(), held-card-got["pay"])
	}
	if int(st.Confirmed.Load()+st.FailedPay.Load()) != card+got["pay"] {
		t.Errorf("confirmed %d + failed %d; want every payment %d", st.Confirmed.Load(), st.FailedPay.Load(), card+got["pay"])
	}

	// Everyone but those who closed the app says they are done (the
	// unlucky too: they gave up, or the map said sold out).
	if leaves := got["leave"]; leaves != fans-(held-card-got["pay"]-released) || st.Left.Load() != int64(leaves) {
		t.Errorf("leaves %d (Stats.Left %d); want every fan but those who closed the app", leaves, st.Left.Load())
	}
	for k := range got {
		if strings.HasPrefix(k, "unknown") || k == "hold without admission" || k == "status without a cookie" {
			t.Errorf("the gateway saw %q", k)
		}
	}
	if n := st.Errors.Load(); n != 0 {
		t.Errorf("%d errors: %v", n, st.ErrorsByKind())
	}
}
