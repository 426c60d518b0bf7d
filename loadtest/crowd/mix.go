package crowd

import (
	"math/rand/v2"
	"time"
)

// The crowd's stated proportions. The fans draw from these, and the forecast
// (forecast.go) uses them too, so docs/demo.md's numbers are these numbers.
const (
	// When fans arrive: the pre-queue before onsale, the wall right after
	// it; the rest trickle in over the tail.
	sharePrequeue = 0.30
	shareWall     = 0.50

	// How an admitted fan asks for seats; the rest ask for best available.
	shareOverLimit = 0.05 // ask best available for more than the limit first
	sharePicked    = 0.35 // pick seats from the map (which may be a second stale)

	// What a fan holding seats does; the rest pay by UPI.
	shareClose   = 0.10 // close the app mid-hold: the hold lapses, the session runs out
	shareRelease = 0.05 // change their mind: release and leave
	shareCard    = 0.15 // pay by card with a double-clicked confirm
	shareSlowUPI = 0.15 // of the UPI payers: wait until 20 s before the hold ends
)

// overLimit is the count a fan over the limit asks for first; limitRetry is
// what it asks for after the 422.
const (
	overLimit  = 9
	limitRetry = 4
)

// ticketCounts is drawn uniformly: about 3.5 tickets an order.
var ticketCounts = []int{1, 2, 2, 3, 4, 4, 4, 4, 5, 6}

func meanTickets() float64 {
	n := 0
	for _, c := range ticketCounts {
		n += c
	}
	return float64(n) / float64(len(ticketCounts))
}

// Arrival says when the crowd comes, counted from the start of the sale
// (when the pre-queue opens).
type Arrival struct {
	OnsaleIn time.Duration // the pre-queue's length: onsale is this long after the start
	Wall     time.Duration // the wall's fans arrive within this long after onsale
	Tail     time.Duration // late arrivals keep coming this long after onsale
}

// Draw is one fan's arrival: sharePrequeue of the crowd during the
// pre-queue (up to a second before onsale), shareWall in the wall, the rest
// over the tail.
func (a Arrival) Draw() time.Duration {
	switch p := rand.Float64(); {
	case p < sharePrequeue:
		return time.Duration(rand.Float64() * float64(a.OnsaleIn-time.Second))
	case p < sharePrequeue+shareWall:
		return a.OnsaleIn + time.Duration(rand.Float64()*float64(a.Wall))
	default:
		return a.OnsaleIn + time.Duration(rand.Float64()*float64(a.Tail))
	}
}
