package crowd

import (
	"testing"
	"time"
)

func TestArrivalDraw(t *testing.T) {
	a := Arrival{OnsaleIn: 10 * time.Second, Wall: 5 * time.Second, Tail: 30 * time.Second}
	const n = 20000
	var pre, wall int
	for range n {
		d := a.Draw()
		switch {
		case d < 0 || d >= a.OnsaleIn+a.Tail:
			t.Fatalf("Draw() = %v; want within [0, %v)", d, a.OnsaleIn+a.Tail)
		case d < a.OnsaleIn-time.Second:
			pre++
		case d < a.OnsaleIn:
			t.Fatalf("Draw() = %v: a pre-queue fan in the last second before onsale", d)
		case d < a.OnsaleIn+a.Wall:
			wall++
		}
	}
	// The pre-queue's share exactly; the wall's window also gets the
	// tail's first sixth (5 of 30 s): 0.5 + 0.2/6. Four standard errors.
	if p := float64(pre) / n; p < 0.28 || p > 0.32 {
		t.Errorf("pre-queue share %.3f; want about %.2f", p, sharePrequeue)
	}
	if p, want := float64(wall)/n, shareWall+(1-sharePrequeue-shareWall)/6; p < want-0.015 || p > want+0.015 {
		t.Errorf("share within the wall %.3f; want about %.3f", p, want)
	}
}

func TestMeanTickets(t *testing.T) {
	if m := meanTickets(); m != 3.5 {
		t.Errorf("meanTickets() = %v; want 3.5 (docs/demo.md's number)", m)
	}
}
