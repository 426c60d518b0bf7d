package crowd

import (
	"testing"
	"time"
)

func TestPredict(t *testing.T) {
	// The seeds' numbers: 1,000 a minute, 10-minute sessions, 10,000 live
	// at most: L = 16.7 a second x 600 s = 10,000, exactly at the cap.
	f := Predict(40000, 1000, 10000, 10*time.Minute, 8*time.Minute, 30*time.Second)
	if f.Bound != "rate" || f.L < 9999 || f.L > 10001 {
		t.Fatalf("seeds' dials: %v", f)
	}
	if got := f.AllTaken.Seconds(); got < 685 || got > 687 { // 40,000 / (16.67/s x 3.5 tickets)
		t.Fatalf("all taken after %v; want about 686 s", f.AllTaken)
	}
	// Twice the sessions' length: the cap binds and halves the rate.
	g := Predict(40000, 1000, 10000, 20*time.Minute, 8*time.Minute, 30*time.Second)
	if g.Bound != "sessions" || g.Admit < 8.3 || g.Admit > 8.4 || g.AllTaken < 2*f.AllTaken-time.Second {
		t.Fatalf("capped: %v", g)
	}
	// 40,000 seats in 11,429 holds, a tenth of each round's lapse: 11,429 x 0.1^5 = 0.11 < ln 2 < 1.1.
	if s := g.SoldOut - g.AllTaken; g.Rounds != 5 || s != 5*(8*time.Minute+30*time.Second) {
		t.Fatalf("sold-out tail %v in %d rounds", s, g.Rounds)
	}
}
