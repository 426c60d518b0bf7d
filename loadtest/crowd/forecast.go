package crowd

import (
	"fmt"
	"math"
	"time"
)

// Forecast is the sale's course predicted from the dials and the crowd's
// stated mix. Little's law, L = λW: fans are let in at λ (the rate dial);
// each keeps a session for W on average; so L = λW sessions are live at
// once. If L stays under total_active_users the sale is rate-bound and
// seats go at λ × (tickets an order); otherwise at most
// total_active_users / W fans a second get in.
type Forecast struct {
	Lambda   float64       // fans let in a second (the dial)
	W        time.Duration // mean session: measured if known, else the session dial
	L        float64       // λW
	Cap      int           // total_active_users
	Bound    string        // "rate" or "sessions"
	Admit    float64       // fans a second actually let in: min(λ, Cap/W)
	PerOrder float64
	// AllTaken: every seat held or sold. SoldOut: every seat sold. Each
	// round of H holds leaves shareClose of them to lapse, back on sale a
	// hold and a sweep later, then held again; round k has H·q^k lapses on
	// average (q = shareClose, H = seats / tickets an order), and the sale
	// more likely than not ends at the first round with none: the first k
	// with H·q^k < ln 2 (Poisson: P(none) = e^(-H·q^k) > 1/2).
	AllTaken, SoldOut time.Duration
	Rounds            int
}

// Predict forecasts a sale of seats seats under the dials (perMinute,
// maxActive), with sessions of w on average, holds of hold and a sweep every
// sweep.
func Predict(seats, perMinute, maxActive int, w, hold, sweep time.Duration) Forecast {
	f := Forecast{Lambda: float64(perMinute) / 60, W: w, Cap: maxActive, PerOrder: meanTickets()}
	f.L = f.Lambda * w.Seconds()
	f.Admit, f.Bound = f.Lambda, "rate"
	if f.L > float64(maxActive) {
		f.Admit, f.Bound = float64(maxActive)/w.Seconds(), "sessions"
	}
	if f.Admit <= 0 {
		return f
	}
	f.AllTaken = time.Duration(float64(seats) / (f.Admit * f.PerOrder) * float64(time.Second))
	holds := float64(seats) / f.PerOrder
	for f.Rounds = 0; holds*math.Pow(shareClose, float64(f.Rounds)) >= math.Ln2; f.Rounds++ {
	}
	f.SoldOut = f.AllTaken + time.Duration(f.Rounds)*(hold+sweep)
	return f
}

func (f Forecast) String() string {
	return fmt.Sprintf("λ = %.0f/s let in, W = %.1f s a session, L = λW = %.0f sessions against total_active_users %d: %s-bound, "+
		"%.0f fans/s x %.1f tickets -> every seat taken after %.0f s; sold out after about %.0f s (%d rounds of lapsed holds resold)",
		f.Lambda, f.W.Seconds(), f.L, f.Cap, f.Bound, f.Admit, f.PerOrder, f.AllTaken.Seconds(), f.SoldOut.Seconds(), f.Rounds)
}
