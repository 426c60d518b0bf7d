package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The metrics sampled, as every Go service's Prometheus Go collector names
// them.
const (
	Heap       = "go_memstats_heap_inuse_bytes"
	Goroutines = "go_goroutines"
)

// metrics are the sampled metrics, each with its rule.
var metrics = []struct {
	name string
	rule Rule
}{{Heap, HeapRule}, {Goroutines, GoroutinesRule}}

// Target is a service to sample: its name and its metrics page's URL.
type Target struct{ Name, URL string }

// ParseTargets reads name=url,name=url (the command's -metrics flag).
func ParseTargets(list string) ([]Target, error) {
	var out []Target
	for _, item := range strings.Split(list, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, url, ok := strings.Cut(item, "=")
		if !ok || name == "" || !strings.HasPrefix(url, "http") {
			return nil, fmt.Errorf("metrics target %q: want name=http://host:port/metrics", item)
		}
		out = append(out, Target{Name: name, URL: url})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no metrics targets in %q", list)
	}
	return out, nil
}

// Column is one series: a metric of a target, judged by Rule.
type Column struct {
	Target, Metric string
	Rule           Rule
}

// Round is one sampling of every column, At after the sampler began; a
// value is NaN where its scrape failed.
type Round struct {
	At     time.Duration
	Values []float64
}

// Sampler scrapes its targets' metrics in rounds and keeps every round.
// Safe for concurrent use (Run in one goroutine, Rounds from another).
type Sampler struct {
	targets []Target
	cols    []Column
	client  *http.Client
	start   time.Time

	mu     sync.Mutex
	rounds []Round
	errs   int    // scrapes that failed
	last   string // the last scrape error
}

// NewSampler samples targets' heap and goroutines, counting time from start.
func NewSampler(targets []Target, start time.Time) *Sampler {
	s := &Sampler{targets: targets, start: start, client: &http.Client{Timeout: 5 * time.Second}}
	for _, t := range targets {
		for _, m := range metrics {
			s.cols = append(s.cols, Column{Target: t.Name, Metric: m.name, Rule: m.rule})
		}
	}
	return s
}

// Columns are the series, in the order of each Round's Values.
func (s *Sampler) Columns() []Column { return s.cols }

// Run samples once, then every interval, until ctx ends.
func (s *Sampler) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample takes one round: every target scraped (a failed scrape leaves NaN
// in its columns and is counted).
func (s *Sampler) Sample(ctx context.Context) {
	r := Round{At: time.Since(s.start), Values: make([]float64, 0, len(s.cols))}
	var errs []string
	for _, t := range s.targets {
		got, err := s.scrape(ctx, t.URL)
		if err != nil && ctx.Err() != nil {
			return // the soak ended under it: not a round
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", t.Name, err))
		}
		for _, m := range metrics {
			v, ok := got[m.name]
			if !ok {
				v = math.NaN()
				if err == nil {
					errs = append(errs, fmt.Sprintf("%s: no %s on its metrics page", t.Name, m.name))
				}
			}
			r.Values = append(r.Values, v)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rounds = append(s.rounds, r)
	s.errs += len(errs)
	if len(errs) > 0 {
		s.last = errs[len(errs)-1]
	}
}

// Rounds are the rounds so far, oldest first.
func (s *Sampler) Rounds() []Round {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Round(nil), s.rounds...)
}

// Errors is how many scrapes failed, and the last failure.
func (s *Sampler) Errors() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs, s.last
}

func (s *Sampler) scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(resp.Body)
}

// Parse reads the sampled metrics from a Prometheus text exposition
// (unlabelled samples only: the Go collector's are).
func Parse(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, m := range metrics {
			if f[0] != m.name {
				continue
			}
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.name, err)
			}
			out[m.name] = v
		}
	}
	return out, sc.Err()
}

// Series is column c's points, the rounds where its scrape failed left
// out.
func Series(rounds []Round, c int) []Point {
	var out []Point
	for _, r := range rounds {
		if v := r.Values[c]; !math.IsNaN(v) {
			out = append(out, Point{At: r.At, Value: v})
		}
	}
	return out
}
