package crowd

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Sale is what the forecast knows of a sale: its seats, the dials, the
// event's holds and the core's sweep, and what the crowd measured (zero
// before the sale: the defaults below).
type Sale struct {
	Seats, PerMinute, MaxActive int
	Session, Hold               time.Duration
	// Sweep is how often a lapsed hold's seats reach the fans' map: they
	// are free from the hold's end (lazy expiry: the core's sweeper writes
	// no seat row), and the core's seat-map keeper shows them at its next
	// rebuild (MapRebuild).
	Sweep time.Duration
	// Shop is an admitted fan's time to a hold (the seat map, perhaps the
	// layout, the hold, a lost race and another); Settle a payer's from
	// its hold to its payment's outcome (a UPI payer's dawdling and
	// approval, a card's confirm); PayFail the share of payments that
	// failed (the fan lets the seats go at once).
	Shop, Settle time.Duration
	PayFail      float64
	// Returns are the seats that came back as the database recorded them
	// (nil: the crowd's stated mix, PayFail and Hold).
	Returns *Returns
	// Achieved is the fans a second the sale actually let in while seats
	// were left (0: unknown). Below the dial and the cap's bound it is
	// the system's own limit (the gateway and core serving the wall),
	// which no dial predicts; the forecast after the sale takes it.
	Achieved float64
}

// Returns are the holds whose seats came back, as shares of all holds:
// released (the fan changed their mind, or let the seats go after a
// failed payment), after ReleasedAfter on average, or lapsed. A lapsed
// hold is not only a fan who closed the app: a payer whose payment never
// settled, or settled after the hold's end, lets it lapse too, and a hold
// extended at the Pay step lapses that much later: Lapses has a share for
// each length (the hold's, the hold's and an extension).
type Returns struct {
	Released      float64
	ReleasedAfter time.Duration
	Lapses        []Lapse
	// Rehold is how re-holds ended (holds of seats held before, which
	// came back: a chain's later links), as shares of the re-holds; nil:
	// like every hold. The fans still shopping when seats come back late
	// in a sale are not the crowd at large (at 60,000 fans, one run: 10.5%
	// lapsed and 1.2% lapsed extended, against 11.0% and 0.9% of first
	// holds).
	Rehold *Returns
	// Branch is how many re-holds a hold whose seats came back (lapsed or
	// released) led to, on average (0: one). A fan taking two of four
	// seats that came back leaves two for another: one chain becomes two,
	// each as likely to go on, and the sale's end is the latest of them.
	Branch float64
}

// Lapse is the share of holds that lapsed after a time; Name says which
// (for the report).
type Lapse struct {
	Share float64
	After time.Duration
	Name  string
}

// Forecast is the sale's course predicted from the dials and the crowd's
// stated mix. Little's law, L = λW: fans are let in at λ (the rate dial);
// each keeps a session for W on average; so L = λW sessions are live at
// once. If L stays under total_active_users the sale is rate-bound and
// seats go at λ × (tickets an order); otherwise at most
// total_active_users / W fans a second get in.
//
// W is the session of a fan let in while seats are left, the one that
// decides how fast they go: the wait for its poll to claim the offer (an
// offer counts against total_active_users until claimed), its time to a
// hold, then its payment until the outcome; and a fan that closes the app
// keeps the room for the whole session. Not the mean session over the
// whole sale: the fans let in once every seat is taken leave within
// seconds and would make W, and the forecast, optimistic.
type Forecast struct {
	Lambda   float64       // fans let in a second (the dial)
	W        time.Duration // the session of a fan let in while seats are left
	L        float64       // λW
	Cap      int           // total_active_users
	Bound    string        // "rate", "sessions" or "system" (the rate achieved was lower)
	Admit    float64       // fans a second actually let in: min(λ, Cap/W, achieved)
	PerOrder float64
	// Lost is the share of holds that do not become bookings (closed,
	// released, payment failed): their seats come back.
	Lost float64
	// AllTaken: every seat held or sold. The first seats go a claim and a
	// hold's time after onsale, then at Admit × PerOrder a second less the
	// seats coming back: released at once, failed payments a settle
	// later, lapsed holds a hold and half a sweep later.
	//
	// SoldOut: every seat sold. Seats come back in chains: a seat whose
	// hold lapsed (its holder closed the app, or paid too late) comes back
	// a hold later, is taken again at once (by a fan asking for best
	// available, or a watcher at the map's next rebuild), and that holder's
	// hold may lapse too. Releases and failed payments come back within
	// seconds and only pass the seat on, so what makes the tail long is
	// the lapses: from a seat coming back, the chain goes on another hold
	// later (a round: the lapsed holds' length, extensions included, and
	// half a map rebuild) with p = the share lapsing / (1 − the share
	// coming back quickly). Of about H = seats / tickets an order
	// holds, some H·p^k chains reach k holds-later; the longest chain
	// reaches R rounds more likely than not while H·p^R ≥ ln 2 (Poisson:
	// P(some chain) = 1 − e^(−H·p^R) ≥ 1/2). Those m = H·p^R chains began
	// at holds made between the first hold and AllTaken, the latest of
	// them about m/(m+1) of the way; the sale ends R rounds (a hold and
	// half a map rebuild each) after that, when its last holder has paid.
	// When the seats went slowly (AllTaken long against a hold), a shorter
	// chain begun near AllTaken can end later: the forecast takes the
	// latest end over chains of 0 to R rounds (600,000 fans, 490 s to take
	// every seat: 551 s against 487 s the longest chain alone; sold out at
	// 607 s).
	//
	// (An earlier forecast counted every seat coming back as a full round
	// and one round past the median: 1.7x pessimistic at 60,000 fans.)
	AllTaken, SoldOut time.Duration
	// SoldOutRange is the 10th and 90th percentiles of the sale's end:
	// four sales in five end between them.
	SoldOutRange [2]time.Duration
	Rounds       int
}

// MapRebuild is how often the core's seat-map keeper rebuilds an event's
// map from the database (core/seatmap.Interval): when a lapsed hold's
// seats show free to fans watching the map.
const MapRebuild = time.Second

// Until measured, what the forecast assumes.
const (
	// claimWait is how long an offer waits for its fan's next poll: a fan
	// near the front polls every second.
	claimWait = time.Second
	// shopDefault is an admitted fan's time to a hold: a few requests.
	shopDefault = time.Second
	// approveDefault is a UPI payer's approval (the demo's simulated
	// payers: 1 to 4 s), and the fan's look at the booking once a second.
	approveDefault = 3 * time.Second
)

// Predict forecasts the sale s.
func Predict(s Sale) Forecast {
	shop, settle := s.Shop, s.Settle
	if shop <= 0 {
		shop = shopDefault
	}
	shareUPI := 1 - shareClose - shareRelease - shareCard
	payers := shareCard + shareUPI
	if settle <= 0 { // a card's confirm is at once; a UPI payer dawdles (some) and waits for approval
		settle = time.Duration(shareUPI / payers * float64(approveDefault+time.Duration(shareSlowUPI*float64(max(0, s.Hold-20*time.Second)))))
	}
	f := Forecast{Lambda: float64(s.PerMinute) / 60, Cap: s.MaxActive, PerOrder: meanTickets()}
	f.W = claimWait + time.Duration(shareClose*float64(s.Session)+(1-shareClose)*float64(shop)+payers*float64(settle))
	f.L = f.Lambda * f.W.Seconds()
	f.Admit, f.Bound = f.Lambda, "rate"
	if f.L > float64(s.MaxActive) {
		f.Admit, f.Bound = float64(s.MaxActive)/f.W.Seconds(), "sessions"
	}
	if s.Achieved > 0 && s.Achieved < f.Admit {
		f.Admit, f.Bound = s.Achieved, "system"
	}
	quick := []back{{shareRelease, 0}, {payers * s.PayFail, settle.Seconds()}}
	lapses := []Lapse{{shareClose, s.Hold, "at the hold's end"}}
	if r := s.Returns; r != nil {
		quick, lapses = []back{{r.Released, r.ReleasedAfter.Seconds()}}, r.Lapses
	}
	quickly, lapsed := 0.0, 0.0
	for _, q := range quick {
		quickly += q.share
	}
	backs := quick
	for _, l := range lapses {
		lapsed += l.Share
		backs = append(backs, back{l.Share, (l.After + s.Sweep/2).Seconds()}) // back on the map
	}
	f.Lost = lapsed + quickly
	if f.Admit <= 0 || s.Seats <= 0 {
		return f
	}
	start := claimWait + shop
	f.AllTaken = start + taking(float64(s.Seats)/(f.Admit*f.PerOrder), backs)
	holds := float64(s.Seats) / f.PerOrder
	first, again, branch := links{lapses, quickly}, links{lapses, quickly}, 1.0
	if r := s.Returns; r != nil && r.Rehold != nil {
		again = links{r.Rehold.Lapses, r.Rehold.Released}
	}
	if r := s.Returns; r != nil && r.Branch > 0 {
		branch = r.Branch
	}
	chain := lapsed / (1 - quickly)
	// Never, too, when a re-hold's seats come back, on average, to more
	// than one re-hold: the tree of chains need not die out.
	if f.AllTaken == time.Duration(math.MaxInt64) || chain >= 1 || branch*(1-again.kept()) >= 1 {
		f.SoldOut = time.Duration(math.MaxInt64) // never (every payment failing: seats come back as fast as they go)
		f.SoldOutRange = [2]time.Duration{f.SoldOut, f.SoldOut}
		return f
	}
	for f.Rounds = 0; holds*math.Pow(chain, float64(f.Rounds+1)) >= math.Ln2; f.Rounds++ {
	}
	// The sale ends when the last chain does, and which chain that is
	// depends on luck: the end is a random variable. Chains begin at
	// holds made between the first hold and AllTaken (about evenly
	// spread), and a chain that begins at s ends at s + D, D the sum of
	// its rounds. The seats a hold gave back are held again by b holds on
	// average (Branch), each going on as a chain of its own, so the chains
	// of one first hold form a tree: the probability F(τ) that every
	// chain of a re-hold has ended within τ is k + Σ l_i G(F(τ − a_i)) +
	// r G(F(τ)), with l_i its lapse shares (a_i their lengths), r its
	// share coming back at once, k kept, G the generating function of
	// the re-holds a hold's returned seats make; a first hold's, its own
	// odds around the same F (saleEnd). The first holds being
	// independent, P(the sale has ended by t) = Π F₀(t − its start); the
	// forecast is its median, with the 10th and 90th percentiles as its
	// range: how far apart those are says how close any forecast of this
	// sale can be.
	end := newSaleEnd(first, again, branch, s.Sweep, holds)
	at := func(q float64) time.Duration { return end.quantile(q, holds, start, f.AllTaken) + settle }
	f.SoldOut, f.SoldOutRange = at(0.5), [2]time.Duration{at(0.1), at(0.9)}
	return f
}

// links are the ways a chain's hold can end: lapsing after one of the
// lapse kinds, coming back at once (quickly), else kept.
type links struct {
	lapses  []Lapse
	quickly float64
}

// kept is the share of holds neither lapsing nor coming back at once.
func (l links) kept() float64 {
	k := 1 - l.quickly
	for _, x := range l.lapses {
		k -= x.Share
	}
	return k
}

// saleEnd is, on a grid of endStep, the probability that every chain of
// one first hold has ended within τ of it (first[τ/endStep]), from τ = 0
// until the chains left are negligible.
type saleEnd struct{ first []float64 }

// endStep is saleEnd's grid, and maxEnd how far it goes at most (a
// day past a first hold: a sale whose chains go on longer is a sale that
// never ends, which Predict says before).
const (
	endStep = 100 * time.Millisecond
	maxEnd  = 24 * time.Hour
)

// newSaleEnd computes saleEnd for first holds ending as first says and
// re-holds as later, the seats that came back held again by branch holds
// on average (one or two of them above one, none or one below), a lapse
// putting its seats back after its length and half a sweep.
func newSaleEnd(first, later links, branch float64, sweep time.Duration, holds float64) saleEnd {
	branch = min(max(branch, 0), 2)
	g := func(x float64) float64 { // E[x^re-holds]
		if branch >= 1 {
			return (2-branch)*x + (branch-1)*x*x
		}
		return 1 - branch + branch*x
	}
	back := func(l Lapse) int { return max(1, int((l.After+sweep/2+endStep/2)/endStep)) }
	var re, e saleEnd
	at := func(f []float64, i int) float64 {
		if i < 0 {
			return 0
		}
		return f[i]
	}
	for i := 0; ; i++ {
		c := later.kept()
		for _, l := range later.lapses {
			c += l.Share * g(at(re.first, i-back(l)))
		}
		x := c // F(τ) = c + r G(F(τ)): a fixed point (r G' < 1)
		for range 200 {
			next := c + later.quickly*g(x)
			if math.Abs(next-x) < 1e-15 {
				break
			}
			x = next
		}
		re.first = append(re.first, x)
		f := first.kept() + first.quickly*g(x)
		for _, l := range first.lapses {
			f += l.Share * g(at(re.first, i-back(l)))
		}
		e.first = append(e.first, f)
		if holds*(1-f) < 1e-6 || i > int(maxEnd/endStep) {
			return e
		}
	}
}

// quantile is the time by which the sale has ended with probability q,
// holds first holds made evenly between first and last: P(ended by t) =
// exp(holds × the mean over their starts s of log F₀(t − s)), the mean
// taken on the grid.
func (e saleEnd) quantile(q, holds float64, first, last time.Duration) time.Duration {
	cum := make([]float64, len(e.first)+1) // cum[i]: Σ log F₀ below i
	for i, f := range e.first {
		cum[i+1] = cum[i] + math.Log(f)
	}
	ended := func(t time.Duration) float64 {
		i0, i1 := int((t-last)/endStep), int((t-first)/endStep) // the starts' τ
		if t < last {
			return 0
		}
		sum := cum[min(i1+1, len(e.first))] - cum[min(i0, len(e.first))] // F₀ = 1 past the grid
		return math.Exp(holds * sum / float64(i1-i0+1))
	}
	lo, hi := last, last+time.Duration(len(e.first))*endStep
	for hi-lo > time.Millisecond { // ended grows with t
		if mid := lo + (hi-lo)/2; ended(mid) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// back is a share of holds whose seats come back after seconds.
type back struct{ share, after float64 }

// taking is how long, in seconds since the first hold, until every seat
// is taken when they go as fast as to take them all in ideal seconds,
// less the seats of each back share coming back its after later: the t
// with t − Σ share·max(0, t − after) = ideal.
func taking(ideal float64, backs []back) time.Duration {
	slices.SortFunc(backs, func(a, b back) int { return cmp.Compare(a.after, b.after) })
	rate, t, net := 1.0, 0.0, 0.0 // net seats taken at t, in ideal seconds' worth; rate its slope
	for _, b := range backs {
		if b.after > t && net+rate*(b.after-t) >= ideal {
			break
		}
		net += rate * max(0, b.after-t)
		t = max(t, b.after)
		rate -= b.share
	}
	if rate <= 0 {
		return time.Duration(math.MaxInt64) // seats come back as fast as they go: never all taken
	}
	return time.Duration((t + (ideal-net)/rate) * float64(time.Second))
}

func (f Forecast) String() string {
	return fmt.Sprintf("λ = %.0f/s let in, W = %.1f s the session of a fan let in while seats are left, L = λW = %.0f sessions against total_active_users %d: %s-bound, "+
		"%.0f fans/s x %.1f tickets -> every seat taken after %.0f s; %.0f%% of holds come back; sold out after about %.0f s, four sales in five between %.0f and %.0f s "+
		"(the longest chain of seats coming back a hold later likely to exist: %d rounds)",
		f.Lambda, f.W.Seconds(), f.L, f.Cap, f.Bound, f.Admit, f.PerOrder, f.AllTaken.Seconds(), 100*f.Lost, f.SoldOut.Seconds(),
		f.SoldOutRange[0].Seconds(), f.SoldOutRange[1].Seconds(), f.Rounds)
}
