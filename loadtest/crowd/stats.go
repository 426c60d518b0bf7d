package crowd

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/report"
)

// Stats is what the crowd saw, counted as it happens; safe for concurrent
// use by every fan, bot and operator.
type Stats struct {
	Joined, Admitted, Held, Paid, Confirmed atomic.Int64
	Taken, Limit                            atomic.Int64 // holds refused: a seat race lost (409), over the limit (422)
	Abandoned, FailedPay, Refunded, Rejoin  atomic.Int64
	BotRefused, Errors                      atomic.Int64
	// Sign-ins: codes asked for (202), fans signed in (verified), answers
	// refused (a wrong or expired code, no code by SMS, an error), answers
	// limited (429); bot requests refused identity_required (bots never
	// sign in).
	CodesRequested, SignedIn, SignInFailed, SignInLimited, BotsNoIdentity atomic.Int64
	Left                                                                  atomic.Int64 // admitted fans who said they were done
	SessionNanos                                                          atomic.Int64 // admitted to done, summed over the fans in Left
	// For the forecast: of the fans in Left, those who had held seats
	// and their sessions summed; admitted to a hold, summed over the Held;
	// a hold to its payment's outcome (confirmed, failed, refunded: the
	// fan told), summed over Settled.
	LeftHeld, SessionHeldNanos, ShopNanos, Settled, SettleNanos atomic.Int64

	// Start is when the count began; polls are counted by second since.
	Start   time.Time
	pollsAt []atomic.Int64 // status polls answered, by second since Start

	mu           sync.Mutex
	latency      map[string]*latencies
	errorsByKind map[string]int
	answers      map[answerKey]int

	lagMu sync.Mutex // a lock of its own: every fan's step counts, beside every request
	// How late the fans acted (the crowd's own delay, not the service's):
	// every fan's steps, and the admitted fans' (shopping, paying) alone.
	lag, shopLag latencies
}

// latencies are durations counted in bounded memory: an HdrHistogram from
// a microsecond to an hour at three significant digits (a percentile is
// at most 0.1% off; some 140 kB a route, however many requests), and the
// first exactUpTo exactly, so that a small run's percentiles are exact.
type latencies struct {
	h     *hdrhistogram.Histogram
	exact []time.Duration
	max   time.Duration
}

// exactUpTo is how many durations a route keeps exactly.
const exactUpTo = 4096

func (l *latencies) add(d time.Duration) {
	if l.h == nil {
		l.h = hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)
	}
	l.h.RecordValue(min(max(int64(d/time.Microsecond), 1), l.h.HighestTrackableValue()))
	if len(l.exact) < exactUpTo {
		l.exact = append(l.exact, d)
	}
	l.max = max(l.max, d)
}

// summary is the count, the 50th, 90th and 99th percentiles and the
// longest: the durations sorted, the one at n×q (exact while there are
// at most exactUpTo, else the histogram's).
func (l *latencies) summary() (n int, p50, p90, p99, longest time.Duration) {
	if l.h == nil {
		return 0, 0, 0, 0, 0
	}
	n = int(l.h.TotalCount())
	if n <= exactUpTo {
		d := slices.Sorted(slices.Values(l.exact))
		return n, d[n/2], d[n*9/10], d[n*99/100], d[n-1]
	}
	at := func(q float64) time.Duration {
		return min(time.Duration(l.h.ValueAtQuantile(q))*time.Microsecond, l.max)
	}
	return n, at(50), at(90), at(99), l.max
}

// answerKey is one route's answers of one class in one second (since Start).
type answerKey struct {
	route, class string
	sec          int
}

// NewStats counts from start; status polls are counted per second for span
// (later ones are not counted).
func NewStats(start time.Time, span time.Duration) *Stats {
	return &Stats{Start: start, pollsAt: make([]atomic.Int64, int(span.Seconds())),
		latency: map[string]*latencies{}, errorsByKind: map[string]int{}, answers: map[answerKey]int{}}
}

// Observe records one request's latency on route.
func (s *Stats) Observe(route string, d time.Duration) {
	s.mu.Lock()
	s.route(route).add(d)
	s.mu.Unlock()
}

// route is route's latencies; s.mu is held.
func (s *Stats) route(route string) *latencies {
	l := s.latency[route]
	if l == nil {
		l = &latencies{}
		s.latency[route] = l
	}
	return l
}

// late records how late a fan acted: how long after its time (its
// arrival, its next poll, the end of a pause) a worker was free to run
// it; shopping says the fan had been admitted.
func (s *Stats) late(d time.Duration, shopping bool) {
	s.lagMu.Lock()
	s.lag.add(d)
	if shopping {
		s.shopLag.add(d)
	}
	s.lagMu.Unlock()
}

// Lag is how late the fans acted, as a Latency (route "crowd lag"): the
// crowd's own delay, when its workers were all busy, apart from the
// requests' latency (which starts when a request is sent). A lag that
// grows means the crowd, not the service, is the bottleneck.
func (s *Stats) Lag() Latency {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	n, p50, p90, p99, longest := s.lag.summary()
	return Latency{Route: "crowd lag", Count: n, P50: p50, P90: p90, P99: p99, Max: longest}
}

// ShopLag is Lag of the admitted fans' steps alone (shopping, paying):
// a payer late by much of its hold makes a lapse the crowd's stated mix
// does not, and the sale's tail longer.
func (s *Stats) ShopLag() Latency {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	n, p50, p90, p99, longest := s.shopLag.summary()
	return Latency{Route: "admitted fans' lag", Count: n, P50: p50, P90: p90, P99: p99, Max: longest}
}

// observe records one request on route sent at t0: its latency d and the
// class of its answer (an HTTP status, or check.ClassConn or
// check.ClassTimeout when none came), in the second it came.
func (s *Stats) observe(route, class string, t0 time.Time, d time.Duration) {
	sec := int(t0.Add(d).Sub(s.Start) / time.Second)
	s.mu.Lock()
	s.route(route).add(d)
	s.answers[answerKey{route, class, sec}]++
	s.mu.Unlock()
}

// Answers are the answers counted so far, per route, class and second, in
// time order.
func (s *Stats) Answers() []check.Answer {
	s.mu.Lock()
	out := make([]check.Answer, 0, len(s.answers))
	for k, n := range s.answers {
		out = append(out, check.Answer{Route: k.route, Class: k.class, At: s.Start.Add(time.Duration(k.sec) * time.Second), N: n})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b check.Answer) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Route, b.Route), cmp.Compare(a.Class, b.Class))
	})
	return out
}

// Fail counts one error of kind.
func (s *Stats) Fail(kind string) {
	s.Errors.Add(1)
	s.mu.Lock()
	s.errorsByKind[kind]++
	s.mu.Unlock()
}

// ErrorsByKind is a copy of the errors counted so far, by kind.
func (s *Stats) ErrorsByKind() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.errorsByKind)
}

// pollAnswered counts a status poll answered at t.
func (s *Stats) pollAnswered(t time.Time) {
	if i := int(t.Sub(s.Start) / time.Second); i >= 0 && i < len(s.pollsAt) {
		s.pollsAt[i].Add(1)
	}
}

// PollRate is the status polls the crowd had answered, per second: the
// seconds from the first poll to the last (as points at seconds since
// Start), their mean and the busiest second.
func (s *Stats) PollRate() (mean, peak float64, secs []report.Point) {
	var total int64
	for i := range s.pollsAt {
		v := s.pollsAt[i].Load()
		if v == 0 && total == 0 {
			continue
		}
		total += v
		peak = max(peak, float64(v))
		secs = append(secs, report.Point{T: float64(i), V: float64(v)})
	}
	for len(secs) > 0 && secs[len(secs)-1].V == 0 {
		secs = secs[:len(secs)-1]
	}
	if len(secs) > 0 {
		mean = float64(total) / float64(len(secs))
	}
	return mean, peak, secs
}

// Latency is one route's latency percentiles.
type Latency struct {
	Route              string
	Count              int
	P50, P90, P99, Max time.Duration
}

// Latencies summarises every route's latencies, in route order.
func (s *Stats) Latencies() []Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Latency
	for _, route := range slices.Sorted(maps.Keys(s.latency)) {
		n, p50, p90, p99, longest := s.latency[route].summary()
		out = append(out, Latency{Route: route, Count: n, P50: p50, P90: p90, P99: p99, Max: longest})
	}
	return out
}

// MeanLeft is the mean session of the fans who said they were done (0 when
// none did).
func (s *Stats) MeanLeft() time.Duration {
	if n := s.Left.Load(); n > 0 {
		return time.Duration(s.SessionNanos.Load() / n)
	}
	return 0
}

// MeanSession is W for Little's law with the sessions the crowd actually
// kept: the fans who said they were done, their measured time; the rest, the
// whole session (they hold the room until it runs out). With nobody
// admitted, the session itself.
func (s *Stats) MeanSession(session time.Duration) time.Duration {
	n := s.Admitted.Load()
	if n == 0 {
		return session
	}
	return time.Duration((s.SessionNanos.Load() + (n-s.Left.Load())*int64(session)) / n)
}
