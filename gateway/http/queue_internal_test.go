package http

import (
	"math"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
)

// The estimate of a fan's wait under each bound: the rate dial while the
// room has space; the sessions' turnover once the room is full (or fills
// before the fan's turn); unknown when nobody is let in. The control in
// each full-room case: the rate-only estimate the status reply used to
// give ("about a minute" for what takes ten) is far off.
func TestETA(t *testing.T) {
	dials := func(rate, capacity, session int) gateway.Dials {
		return gateway.Dials{NewUsersPerMinute: rate, TotalActiveUsers: capacity, SessionSeconds: session, ClaimSeconds: 120}
	}
	for _, tc := range []struct {
		name           string
		dials          gateway.Dials
		active, offers int64
		measured       float64       // View.OfferRate, per minute
		fullFor        time.Duration // how long the room has been full (View.FullSince)
		ahead          int64
		factor         float64 // the core-health factor (0: 1, the dial)
		want           int64
		bound          string
	}{
		{name: "room with space: the dial", dials: dials(600, 10000, 600), active: 10, ahead: 99, want: 10, bound: boundRate},
		{name: "at the front, room with space", dials: dials(600, 10000, 600), ahead: 0, want: 1, bound: boundRate},
		// 100 sessions of ten minutes: one ends every six seconds.
		{name: "room full: sessions' turnover", dials: dials(1000, 100, 600), active: 100, ahead: 9, want: 60, bound: boundActiveUsers},
		{name: "room full of offers and sessions", dials: dials(1000, 100, 600), active: 90, offers: 10, ahead: 9, want: 60, bound: boundActiveUsers},
		{name: "room full, fans leave early: measured", dials: dials(1000, 100, 600), active: 100, measured: 30, fullFor: 2 * time.Minute, ahead: 9, want: 20, bound: boundActiveUsers},
		{name: "room full, measured slower than sessions must end: the floor", dials: dials(1000, 100, 600), active: 100, measured: 2, fullFor: 2 * time.Minute, ahead: 9, want: 60, bound: boundActiveUsers},
		{name: "room full, turnover above the dial: the dial", dials: dials(60, 100, 60), active: 100, measured: 500, fullFor: 2 * time.Minute, ahead: 59, want: 60, bound: boundRate},
		// The room filled ten seconds ago at the dial's 1000 a minute: the
		// measure still holds that burst, not sessions ending.
		{name: "just filled: the burst is not turnover", dials: dials(1000, 100, 600), active: 100, measured: 1000, fullFor: 10 * time.Second, ahead: 9, want: 60, bound: boundActiveUsers},
		// 50 free places at 600 a minute (5 s), then 100 more at 10 a minute (600 s).
		{name: "room fills before the fan's turn", dials: dials(600, 100, 600), active: 50, ahead: 149, want: 605, bound: boundActiveUsers},
		{name: "room fills, turnover keeps up: the dial", dials: dials(60, 100, 60), active: 90, ahead: 29, want: 30, bound: boundRate},
		{name: "paused", dials: func() gateway.Dials { d := dials(600, 100, 600); d.Paused = true; return d }(), ahead: 5, want: -1, bound: boundPaused},
		{name: "rate zero", dials: dials(0, 100, 600), ahead: 5, want: -1, bound: boundRate},
		{name: "cap zero", dials: dials(600, 0, 600), ahead: 5, want: -1, bound: boundActiveUsers},
		// The core is unwell: the line moves at a quarter of the dial.
		{name: "core health: a quarter of the dial", dials: dials(600, 10000, 600), factor: 0.25, ahead: 99, want: 40, bound: boundCoreHealth},
		{name: "core health, room full: sessions' turnover", dials: dials(1000, 100, 600), factor: 0.5, active: 100, ahead: 9, want: 60, bound: boundActiveUsers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			f := tc.factor
			if f == 0 {
				f = 1
			}
			v := room.View{Dials: tc.dials, Tick: gateway.Tick{Active: tc.active, Offers: tc.offers, Factor: f,
				Rate: f * float64(tc.dials.NewUsersPerMinute)}, OfferRate: tc.measured, Fetched: now}
			if tc.fullFor > 0 {
				v.FullSince = now.Add(-tc.fullFor)
			}
			got, bound := eta(&v, tc.ahead)
			if got != tc.want || bound != tc.bound {
				t.Fatalf("eta(%d ahead) = %d s, %q; want %d s, %q", tc.ahead, got, bound, tc.want, tc.bound)
			}
			if bound == boundActiveUsers && got >= 0 {
				naive := int64(math.Ceil(float64(tc.ahead) / float64(tc.dials.NewUsersPerMinute) * 60))
				if naive*3 > got {
					t.Errorf("control: the rate-only estimate %d s is near %d s; the case does not tell them apart", naive, got)
				}
			}
		})
	}
}

// The reply a waiting fan reads: ahead (not the place's number) and an
// estimate with its bound; a pause says so.
func TestDescribe(t *testing.T) {
	now := time.Now()
	d := gateway.DefaultDials(now.Add(-time.Minute), now.Add(time.Hour))
	d.TotalActiveUsers, d.SessionSeconds = 100, 600
	v := room.View{Dials: d, Tick: gateway.Tick{Serving: 120, Active: 100, Factor: 1, Rate: float64(d.NewUsersPerMinute)}}
	r := describe(&v, &token.Queue{Position: 130}, now)
	if r.State != gateway.StateWaiting || r.Ahead != 9 || r.Position != 130 || r.EtaSeconds != 60 || r.BoundBy != boundActiveUsers {
		t.Fatalf("describe(full room, place 130, serving 120) = %+v; want 9 ahead, 60 s, active_users", r)
	}
	v.Dials.Paused = true
	if r := describe(&v, &token.Queue{Position: 130}, now); r.State != gateway.StatePaused || r.EtaSeconds != -1 || r.BoundBy != boundPaused {
		t.Fatalf("describe(paused) = %+v; want paused, -1, paused", r)
	}
}

// A fan is told to come back soon enough never to miss its turn, and no
// sooner: near the front every third of the claim window at most; far back,
// however long the line's top speed (the dial) allows, even if operators
// double the dial meanwhile; at the front, within about a second. The
// control: the near rule alone would have the far fans poll every 10 s,
// six times as often.
func TestPollInterval(t *testing.T) {
	now := time.Now()
	d := gateway.DefaultDials(now.Add(-time.Minute), now.Add(time.Hour))
	d.NewUsersPerMinute, d.TotalActiveUsers, d.ClaimSeconds, d.SessionSeconds = 6000, 2000, 30, 90
	v := room.View{Dials: d, Tick: gateway.Tick{Serving: 1000, Factor: 1, Rate: 6000}, Fetched: now}
	near := nearPoll(d)
	if near != 10_000 {
		t.Fatalf("nearPoll(claim 30 s) = %d ms; want 10,000", near)
	}
	var farSum, n int64
	for range 2000 {
		for _, ahead := range []int64{0, 10, 999, 1_500, 2_100, 5_000, 50_000, 599_000} {
			r := describe(&v, &token.Queue{Position: v.Tick.Serving + 1 + ahead}, now)
			if r.Ahead != ahead {
				t.Fatalf("ahead %d: reply %+v", ahead, r)
			}
			soonestMs := ahead * 60_000 / int64(d.NewUsersPerMinute)
			claimMs := int64(d.ClaimSeconds) * 1000
			// Back before the offer could lapse at twice the dial.
			if limit := max(soonestMs/2+claimMs, near*5/4); r.PollAfterMs > limit {
				t.Fatalf("ahead %d: poll after %d ms, past %d ms (an offer at twice the dial would lapse unseen)", ahead, r.PollAfterMs, limit)
			}
			if r.PollAfterMs > farPollMax || r.PollAfterMs < 750 {
				t.Fatalf("ahead %d: poll after %d ms; want 0.75 s to %d ms", ahead, r.PollAfterMs, farPollMax)
			}
			if ahead == 599_000 {
				farSum += r.PollAfterMs
				n++
			}
			// At the front, a tenth of the wait, at least every second:
			// the next in line sees its offer within about a second (the
			// control, the far rule at the front, said 6-10 s).
			if eta := r.EtaSeconds * 1000; soonestMs < 2*near && r.PollAfterMs > max(eta/10, 1000)*5/4 {
				t.Fatalf("ahead %d, %d s to wait: poll after %d ms; want about a tenth of the wait, at least every second", ahead, r.EtaSeconds, r.PollAfterMs)
			}
			// Past the front, the far rule: never as often as the front.
			if soonestMs >= 2*near && r.PollAfterMs < near {
				t.Fatalf("ahead %d (soonest offer in %d ms): poll after %d ms; want the far rule, at least %d ms", ahead, soonestMs, r.PollAfterMs, near)
			}
		}
	}
	if mean := farSum / n; mean < 6*near {
		t.Fatalf("a fan 599,000 places back polls every %d ms on average; want at least %d (the near rule alone)", mean, 6*near)
	}
	// Paused: the line may start at any moment.
	v.Dials.Paused = true
	if r := describe(&v, &token.Queue{Position: 600_000}, now); r.PollAfterMs > 5000*5/4 {
		t.Fatalf("paused, far back: poll after %d ms; want at most ~5 s", r.PollAfterMs)
	}
}

// The pre-queue comes back halfway to onsale while it is far off, and from
// onsale on spread over a time that grows with its size: never all in the
// second onsale strikes, a stadium's within a third of the claim window (the
// first offers' claim window is not over before), a cinema's within about
// a second (the control: one spread of a third of the claim window for
// every pre-queue left a lone fan waiting up to 30 s past onsale).
func TestPrequeuePoll(t *testing.T) {
	d := gateway.DefaultDials(time.Now(), time.Now().Add(time.Hour))
	d.ClaimSeconds = 120
	near := nearPoll(d)
	stadium, cinema := returnSpread(d, 600_000), returnSpread(d, 40)
	if stadium != near || cinema != 1000 {
		t.Fatalf("returnSpread(600,000 fans) = %d ms, returnSpread(40 fans) = %d ms; want %d and 1,000", stadium, cinema, near)
	}
	if mid := returnSpread(d, 100_000); mid != 10_000 {
		t.Fatalf("returnSpread(100,000 fans) = %d ms; want 10,000 (10,000 fans a second)", mid)
	}
	for range 1000 {
		if p := prequeuePoll(120_000, stadium); p < 30_000*3/4 || p > 30_000*5/4 {
			t.Fatalf("2 min before onsale: poll after %d ms; want about 30 s", p)
		}
		if p := prequeuePoll(5_000, stadium); p < 5_000 || p > 5_000+stadium+250 {
			t.Fatalf("5 s before onsale: poll after %d ms; want 5 s to %d ms (after onsale, spread)", p, 5_000+stadium+250)
		}
		if p := prequeuePoll(-2_000, stadium); p < 250 || p > stadium+250 {
			t.Fatalf("after onsale, no draw yet: poll after %d ms; want within %d ms", p, stadium+250)
		}
		if p := prequeuePoll(1_500, cinema); p < 1_500 || p > 1_500+cinema+250 {
			t.Fatalf("a cinema's pre-queue 1.5 s before onsale: poll after %d ms; want within %d ms of onsale", p, cinema+250)
		}
		if p := prequeuePoll(-2_000, cinema); p > cinema+250 {
			t.Fatalf("a cinema's pre-queue after onsale, no draw yet: poll after %d ms; want within %d ms", p, cinema+250)
		}
	}
	var early int
	for range 1000 {
		if prequeuePoll(1_000, stadium) < 2_000 {
			early++
		}
	}
	if early > 200 {
		t.Fatalf("%d of 1,000 of a stadium's pre-queue come back within a second of onsale; want them spread over %d ms", early, stadium)
	}
}
