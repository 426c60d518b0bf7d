package crowd

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

	// Start is when the count began; polls are counted by second since.
	Start   time.Time
	pollsAt []atomic.Int64 // status polls answered, by second since Start

	mu           sync.Mutex
	latency      map[string][]time.Duration
	errorsByKind map[string]int
	answers      map[answerKey]int
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
		latency: map[string][]time.Duration{}, errorsByKind: map[string]int{}, answers: map[answerKey]int{}}
}

// Observe records one request's latency on route.
func (s *Stats) Observe(route string, d time.Duration) {
	s.mu.Lock()
	s.latency[route] = append(s.latency[route], d)
	s.mu.Unlock()
}

// observe records one request on route sent at t0: its latency d and the
// class of its answer (an HTTP status, or check.ClassConn or
// check.ClassTimeout when none came), in the second it came.
func (s *Stats) observe(route, class string, t0 time.Time, d time.Duration) {
	sec := int(t0.Add(d).Sub(s.Start) / time.Second)
	s.mu.Lock()
	s.latency[route] = append(s.latency[route], d)
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
		d := slices.Sorted(slices.Values(s.latency[route]))
		out = append(out, Latency{Route: route, Count: len(d), P50: d[len(d)/2], P90: d[len(d)*9/10],
			P99: d[len(d)*99/100], Max: d[len(d)-1]})
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
