package http

import (
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/gateway/room"
)

// TestLineBound: the live view says what lets the line in, and its drain
// time follows from that, not from the rate dial alone.
func TestLineBound(t *testing.T) {
	now := time.Now()
	d := gateway.Dials{NewUsersPerMinute: 600, TotalActiveUsers: 1000, SessionSeconds: 300}
	for _, tc := range []struct {
		name      string
		paused    bool
		active    int64
		fullSince time.Time
		offerRate float64
		bound     string
		perMinute float64
	}{
		{"room has space: the rate", false, 400, time.Time{}, 0, BoundRate, 600},
		{"paused", true, 400, time.Time{}, 0, BoundPaused, 0},
		{"full, just now: sessions' share of a minute", false, 1000, now.Add(-10 * time.Second), 0, BoundActiveCap, 200},
		{"full for a minute: the measured turnover", false, 1000, now.Add(-2 * time.Minute), 150, BoundActiveCap, 150},
		{"full, turnover above the rate: the rate", false, 1000, now.Add(-2 * time.Minute), 900, BoundActiveCap, 600},
	} {
		dd := d
		dd.Paused = tc.paused
		v := room.View{Dials: dd, Tick: gateway.Tick{Active: tc.active, Rate: 600}, FullSince: tc.fullSince, OfferRate: tc.offerRate}
		b, pm := lineBound(v, now)
		if b != tc.bound || pm != tc.perMinute {
			t.Errorf("%s: lineBound = %s, %.1f/min; want %s, %.1f/min", tc.name, b, pm, tc.bound, tc.perMinute)
		}
	}
}
