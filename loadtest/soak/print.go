package soak

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is every column judged over a soak's rounds.
type Result struct {
	Columns  []Column
	Rounds   []Round
	Warmup   time.Duration
	Verdicts []Verdict // by column
}

// Judge judges every column of rounds by its rule, from warmup on.
func Judge(cols []Column, rounds []Round, warmup time.Duration) Result {
	res := Result{Columns: cols, Rounds: rounds, Warmup: warmup}
	for i, c := range cols {
		res.Verdicts = append(res.Verdicts, c.Rule.Judge(Series(rounds, i), warmup))
	}
	return res
}

// Failed are the columns that failed their rule (or could not be judged).
func (r Result) Failed() []Column {
	var out []Column
	for i, v := range r.Verdicts {
		if !v.Pass {
			out = append(out, r.Columns[i])
		}
	}
	return out
}

// Name is the column as the tables head it: "core heap" or "core goroutines".
func (c Column) Name() string {
	m := c.Metric
	switch c.Metric {
	case Heap:
		m = "heap"
	case Goroutines:
		m = "goroutines"
	}
	return c.Target + " " + m
}

// format is v in the column's unit: the heap in MiB, goroutines as a count.
func (c Column) format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case c.Metric == Heap:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprintf("%.1f", v)
}

// rate is a pace per second in the column's unit (the heap in KiB).
func (c Column) rate(v float64) string {
	if c.Metric == Heap {
		return fmt.Sprintf("%.0f KiB/s", v/(1<<10))
	}
	return fmt.Sprintf("%.2f/s", v)
}

// Print writes the curves: each column's start, middle and end and its
// verdict, then a table of about rows rounds spread over the soak (rounds
// in the warm-up marked *).
func (r Result) Print(w io.Writer, rows int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tstart\tmiddle\tend\tlevel (1st half)\tgrowth (2nd half)\tallowed\tcatches a leak of\tverdict\t")
	for i, c := range r.Columns {
		pts := Series(r.Rounds, i)
		v := r.Verdicts[i]
		start, middle, end := math.NaN(), math.NaN(), math.NaN()
		if n := len(pts); n > 0 {
			start, middle, end = pts[0].Value, pts[n/2].Value, pts[n-1].Value
		}
		verdict := "PASS"
		if !v.Pass {
			verdict = "FAIL"
		}
		catches := "-"
		if v.Half > 0 {
			catches = c.rate(v.Allowed / v.Half.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Name(), c.format(start), c.format(middle), c.format(end),
			c.format(v.Level), c.format(v.Growth), c.format(v.Allowed), catches, verdict)
	}
	tw.Flush()
	for i, v := range r.Verdicts {
		if v.Reason != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Columns[i].Name(), v.Reason)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"t"}
	for _, c := range r.Columns {
		head = append(head, c.Name())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, rd := range pick(r.Rounds, rows) {
		t := fmt.Sprintf("%.0fs", rd.At.Seconds())
		if rd.At < r.Warmup {
			t = "*" + t
		}
		cells := []string{t}
		for i, c := range r.Columns {
			cells = append(cells, c.format(rd.Values[i]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	if r.Warmup > 0 {
		fmt.Fprintf(w, "  * in the warm-up (the first %v): shown, not judged\n", r.Warmup)
	}
}

// pick is about n rounds spread evenly over rounds, the first and the last
// included.
func pick(rounds []Round, n int) []Round {
	if len(rounds) <= n || n < 2 {
		return rounds
	}
	out := make([]Round, 0, n)
	for i := range n {
		out = append(out, rounds[i*(len(rounds)-1)/(n-1)])
	}
	return out
}

// WriteCSV writes every round: t_seconds, then a column per series (its
// raw value: bytes, a count; empty where the scrape failed).
func WriteCSV(w io.Writer, cols []Column, rounds []Round) error {
	cw := csv.NewWriter(w)
	head := []string{"t_seconds"}
	for _, c := range cols {
		head = append(head, c.Target+" "+c.Metric)
	}
	cw.Write(head)
	for _, r := range rounds {
		row := []string{strconv.FormatFloat(r.At.Seconds(), 'f', 1, 64)}
		for _, v := range r.Values {
			s := ""
			if !math.IsNaN(v) {
				s = strconv.FormatFloat(v, 'f', -1, 64)
			}
			row = append(row, s)
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}
