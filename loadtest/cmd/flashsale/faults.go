package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/onsale/onsale/loadtest/check"
	"github.com/onsale/onsale/loadtest/faults"
	"github.com/onsale/onsale/loadtest/report"
)

// t is a moment as seconds after onsale, for the printout.
func t(at, onsale time.Time) string { return fmt.Sprintf("t%+.0fs", at.Sub(onsale).Seconds()) }

// back says how long after its injection a fault's target was back.
func back(x faults.Effect) string {
	if x.Back.IsZero() {
		return "not back"
	}
	return fmt.Sprintf("%.1f s", x.Down().Seconds())
}

func rejoined(x faults.Effect) string {
	if x.Rejoined.IsZero() {
		return ""
	}
	return fmt.Sprintf("%.1f s", x.Rejoined.Sub(x.At).Seconds())
}

// errorLines are a fault's errors, one line per endpoint and class.
func errorLines(x faults.Effect) []string {
	var out []string
	for _, e := range x.Errors {
		out = append(out, fmt.Sprintf("%s %s: %d s (%d)", e.Route, e.Class, e.Seconds, e.N))
	}
	return out
}

// stallLine says how long admission stood still while fans waited, and
// whether it moved again by itself.
func stallLine(x faults.Effect, onsale time.Time) string {
	if x.Stall == 0 {
		return "never stood still while fans waited"
	}
	s := fmt.Sprintf("stood still %.0f s from %s while fans waited", x.Stall.Seconds(), t(x.StallFrom, onsale))
	switch {
	case x.Resumed.IsZero():
		s += "; not seen moving again before the window's end"
	case x.Touched:
		s += fmt.Sprintf("; moved again at %s (the dials changed meanwhile)", t(x.Resumed, onsale))
	default:
		s += fmt.Sprintf("; resumed by itself at %s (no dial touched)", t(x.Resumed, onsale))
	}
	return s
}

// effectiveLine is the effective admission rate in the window ("" when the
// gateway reports none).
func effectiveLine(x faults.Effect, onsale time.Time) string {
	if x.Effective < 0 {
		return ""
	}
	if x.Effective >= float64(x.Dial) {
		return fmt.Sprintf("at the dial (%d/min) throughout", x.Dial)
	}
	s := fmt.Sprintf("down to %.0f/min of the dial's %d", x.Effective, x.Dial)
	if x.Health != "" {
		s += " (" + x.Health + ")"
	}
	if x.Recovered.IsZero() {
		return s + "; not back at the dial before the sale ended"
	}
	return s + fmt.Sprintf("; back at the dial at %s", t(x.Recovered, onsale))
}

// printFaults prints each fault's effect.
func printFaults(fx []faults.Effect, onsale time.Time) {
	if len(fx) == 0 {
		return
	}
	fmt.Println("\nfaults (effects from each injection to the next fault, the sale's end or 90 s later):")
	for _, x := range fx {
		fmt.Println("  " + x.Summary(onsale))
		if x.At.IsZero() {
			continue
		}
		errs := strings.Join(errorLines(x), ", ")
		if errs == "" {
			errs = "none"
		}
		fmt.Printf("      back after %s; errors: %s\n      admission: %s\n", back(x), errs, stallLine(x, onsale))
		if e := effectiveLine(x, onsale); e != "" {
			fmt.Printf("      effective rate: %s\n", e)
		}
	}
}

// faultRows and faultMarkers are the faults for the report.
func faultRows(fx []faults.Effect, onsale time.Time) []report.Fault {
	var out []report.Fault
	for _, x := range fx {
		f := report.Fault{Name: x.Fault, Target: x.Target, At: x.At.Sub(onsale).Seconds(), Back: back(x), Rejoined: rejoined(x),
			Errors: errorLines(x), Stall: stallLine(x, onsale), Effective: effectiveLine(x, onsale), Detail: x.Detail, Failed: x.Err != ""}
		if x.Err != "" {
			f.Detail += " — error: " + x.Err
		}
		if x.At.IsZero() {
			f.At, f.Stall = 0, "not injected"
		}
		out = append(out, f)
	}
	return out
}

func faultMarkers(fx []faults.Effect, onsale time.Time) []report.Marker {
	var out []report.Marker
	for _, x := range fx {
		if !x.At.IsZero() {
			out = append(out, report.Marker{T: x.At.Sub(onsale).Seconds(), Label: x.Fault})
		}
	}
	return out
}

// errorChart is the errors per second of each endpoint that had any (5xx,
// no connection, no answer in time), by second after onsale from the
// second from (the other charts' first reading: the sign-ins ahead of the
// sale are left out); none when no endpoint had any.
func errorChart(answers []check.Answer, onsale time.Time, from float64) []report.Chart {
	per := map[string]map[int64]float64{}
	var first, last int64 = 1 << 62, -1 << 62
	for _, a := range answers {
		s := int64(a.At.Sub(onsale).Seconds())
		if float64(s) < math.Floor(from) {
			continue
		}
		first, last = min(first, s), max(last, s)
		if !check.IsError(a.Class) {
			continue
		}
		if per[a.Route] == nil {
			per[a.Route] = map[int64]float64{}
		}
		per[a.Route][s] += float64(a.N)
	}
	c := report.Chart{Title: "Errors per endpoint (5xx, no connection, no answer in time)", Unit: "per second"}
	for _, route := range slices.Sorted(maps.Keys(per)) {
		l := report.Line{Name: route}
		for s := first; s <= last; s++ {
			l.Points = append(l.Points, report.Point{T: float64(s), V: per[route][s]})
		}
		c.Lines = append(c.Lines, l)
	}
	if len(c.Lines) == 0 {
		return nil
	}
	return []report.Chart{c}
}

// answerTable is every endpoint's answers over the sale, by class.
func answerTable(answers []check.Answer) []report.Answers {
	per := map[string]map[string]*report.ClassCount{}
	for _, a := range answers {
		if per[a.Route] == nil {
			per[a.Route] = map[string]*report.ClassCount{}
		}
		cc := per[a.Route][a.Class]
		if cc == nil {
			cc = &report.ClassCount{Class: a.Class, Error: check.IsError(a.Class)}
			per[a.Route][a.Class] = cc
		}
		cc.N += a.N
		cc.Seconds++
	}
	var out []report.Answers
	for _, route := range slices.Sorted(maps.Keys(per)) {
		r := report.Answers{Route: route}
		for _, cc := range per[route] {
			r.Classes = append(r.Classes, *cc)
		}
		slices.SortFunc(r.Classes, func(a, b report.ClassCount) int { return cmp.Compare(a.Class, b.Class) })
		out = append(out, r)
	}
	return out
}

// writeResult writes the outcome as key value lines for scripts
// (deploy/local/faultsale.sh compares a sale with faults to one without).
func writeResult(path string, o outcome, failed int, fx []faults.Effect) error {
	var b strings.Builder
	fmt.Fprintf(&b, "took_s %.0f\nsold_out_s %.0f\nall_taken_s %.0f\nfailed %d\nfaults %d\n",
		o.took.Seconds(), o.soldOut.Seconds(), o.allTaken.Seconds(), failed, len(fx))
	for _, x := range fx {
		if x.At.IsZero() {
			fmt.Fprintf(&b, "fault %s not_injected\n", x.Fault)
			continue
		}
		errSecs := 0
		for _, e := range x.Errors {
			errSecs = max(errSecs, e.Seconds)
		}
		fmt.Fprintf(&b, "fault %s at_s %.0f back_s %.1f error_s %d stall_s %.0f\n", x.Fault, x.At.Sub(o.onsale).Seconds(), x.Down().Seconds(), errSecs, x.Stall.Seconds())
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
