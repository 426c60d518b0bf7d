package faults

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/onsale/onsale/loadtest/check"
)

// Observed is what the crowd recorded during the sale: every answer per
// route, class and second; the operators' samples of the admin stats;
// when each fan was admitted (a claim); and when the sale ended (sold out,
// or the deadline).
type Observed struct {
	Answers []check.Answer
	Samples []check.Sample
	Claims  []time.Time
	End     time.Time
}

// Effect is what one fault did to the sale, as the crowd saw it, from its
// injection until Until (the next fault's, the sale's end, or Window
// after it, whichever comes first).
type Effect struct {
	Event
	Until  time.Time
	Errors []Errors // per route and class, busiest first
	// Stall is the longest run of seconds in which admission stood still
	// (no place offered and no fan admitted) while fans waited and the
	// room had space (active sessions under total_active_users), from
	// StallFrom; Resumed is when admission moved again after it (zero:
	// not before the window ended). Touched says whether the dials
	// changed in the window: admission that resumed with them untouched
	// resumed by itself.
	Stall     time.Duration
	StallFrom time.Time
	Resumed   time.Time
	Touched   bool
	// Effective is the lowest effective admission rate (per minute) the
	// gateway reported in the window, Health why, Dial the dial then, and
	// Recovered when the effective rate was back at the dial (zero: not
	// before the sale's end; it may be after the window's, as a rate
	// rises gently); Effective is -1 when the gateway reported none.
	Effective float64
	Health    string
	Dial      int64
	Recovered time.Time
}

// Errors is one route's answers of one error class in a fault's window:
// in how many seconds, and how many.
type Errors struct {
	Route, Class string
	Seconds, N   int
}

// Window bounds how long after its injection a fault's effects are looked
// for (when no other fault or the sale's end comes first).
const Window = 90 * time.Second

// Effects measures each event's effect on the sale.
func Effects(events []Event, o Observed) []Effect {
	var out []Effect
	adv := advances(o)
	for i, e := range events {
		if e.At.IsZero() {
			out = append(out, Effect{Event: e, Effective: -1})
			continue
		}
		until := e.At.Add(Window)
		if i+1 < len(events) && !events[i+1].At.IsZero() && events[i+1].At.Before(until) {
			until = events[i+1].At
		}
		if !o.End.IsZero() && o.End.Before(until) {
			until = o.End
		}
		x := Effect{Event: e, Until: until}
		x.Errors = errorsIn(o.Answers, e.At, until)
		x.StallFrom, x.Stall, x.Resumed = stall(adv, o.Samples, e.At, until, o.End)
		x.Touched, x.Effective, x.Health, x.Dial, x.Recovered = dials(o.Samples, e.At, until, o.End)
		out = append(out, x)
	}
	return out
}

// errorsIn counts the error answers of the seconds from from's to until's
// (the answers are counted by second: the second a fault was injected in
// is its own, the one the next came in is the next one's).
func errorsIn(answers []check.Answer, from, until time.Time) []Errors {
	type key struct{ route, class string }
	m := map[key]*Errors{}
	for _, a := range answers {
		if a.At.Before(from.Truncate(time.Second)) || !a.At.Before(until.Truncate(time.Second)) || !check.IsError(a.Class) {
			continue
		}
		k := key{a.Route, a.Class}
		if m[k] == nil {
			m[k] = &Errors{Route: a.Route, Class: a.Class}
		}
		m[k].Seconds++ // one Answer per route, class and second
		m[k].N += a.N
	}
	var out []Errors
	for _, e := range m {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Errors) int {
		return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(b.N, a.N), cmp.Compare(a.Route, b.Route), cmp.Compare(a.Class, b.Class))
	})
	return out
}

// advances are the moments admission moved: a sample whose serving
// counter passed the previous one's (a place offered), and every claim
// (a fan admitted), in time order.
func advances(o Observed) []time.Time {
	out := slices.Clone(o.Claims)
	for i := 1; i < len(o.Samples); i++ {
		if o.Samples[i].Serving > o.Samples[i-1].Serving {
			out = append(out, o.Samples[i].At)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// stall finds the longest run of whole seconds in [from, until) with no
// advance while fans waited with room to spare (by the latest sample at
// that second; seconds before the first sample do not count), and the
// first advance after it (before end, the sale's end; zero if none).
func stall(adv []time.Time, samples []check.Sample, from, until, end time.Time) (start time.Time, longest time.Duration, resumed time.Time) {
	var runStart time.Time
	run := time.Duration(0)
	endRun := func() {
		if run > longest {
			start, longest = runStart, run
		}
		run = 0
	}
	for s := from; s.Before(until); s = s.Add(time.Second) {
		next := s.Add(time.Second)
		i, _ := slices.BinarySearchFunc(adv, s, func(a, t time.Time) int { return a.Compare(t) })
		moved := i < len(adv) && adv[i].Before(next)
		j := taken(samples, next) - 1 // the latest sample by the second's end
		waiting := j >= 0 && samples[j].Queued > 0 && samples[j].Active < samples[j].Cap
		if moved || !waiting {
			endRun()
			continue
		}
		if run == 0 {
			runStart = s
		}
		run += time.Second
	}
	endRun()
	if longest == 0 {
		return time.Time{}, 0, time.Time{}
	}
	after := start.Add(longest)
	i, _ := slices.BinarySearchFunc(adv, after, func(a, t time.Time) int { return a.Compare(t) })
	if i < len(adv) && (end.IsZero() || adv[i].Before(end)) {
		resumed = adv[i]
	}
	return start, longest, resumed
}

// taken is the number of samples taken before t.
func taken(samples []check.Sample, t time.Time) int {
	i, _ := slices.BinarySearchFunc(samples, t, func(s check.Sample, t time.Time) int { return s.At.Compare(t) })
	return i
}

// dials reads the window's samples: whether the dials changed, the lowest
// effective rate with its reason and the dial then, and when the effective
// rate was back at the dial after it (by end, the sale's end; zero: none).
func dials(samples []check.Sample, from, until, end time.Time) (touched bool, low float64, health string, dial int64, recovered time.Time) {
	low = -1
	lowAt := -1
	var first *check.Sample
	for i := range samples {
		s := &samples[i]
		if s.At.Before(from) || !s.At.Before(until) {
			continue
		}
		if first == nil {
			first = s
		}
		touched = touched || s.Dial != first.Dial || s.Cap != first.Cap
		if s.Effective >= 0 && (low < 0 || s.Effective < low) {
			low, health, dial, lowAt = s.Effective, s.Health, s.Dial, i
		}
	}
	if lowAt < 0 || low >= float64(dial) {
		return touched, low, health, dial, time.Time{}
	}
	for _, s := range samples[lowAt:] {
		if !end.IsZero() && !s.At.Before(end) {
			break
		}
		if s.Effective >= float64(s.Dial) {
			return touched, low, health, dial, s.At
		}
	}
	return touched, low, health, dial, time.Time{}
}

// Summary is the effect in a line for the sale's printout.
func (x Effect) Summary(onsale time.Time) string {
	if x.At.IsZero() {
		return fmt.Sprintf("%s: not injected (%s)", x.Fault, x.Err)
	}
	s := fmt.Sprintf("%s at t%+.0fs (%s): %s", x.Fault, x.At.Sub(onsale).Seconds(), x.Target, x.Detail)
	if x.Err != "" {
		s += "; ERROR " + x.Err
	}
	return s
}
