package soak

import (
	"fmt"
	"slices"
	"time"
)

// Point is one sample of one series: its value At this long after the
// soak began.
type Point struct {
	At    time.Duration
	Value float64
}

// Rule is what "grows without bound" means for one kind of series. After
// the warm-up, the soak's measured span is cut in two halves:
//
//   - the level is the median of the first half (a median, so a garbage
//     collection's peak or trough does not move it);
//   - the growth is the least-squares slope over the second half times the
//     second half's length: what the series added over the second half at
//     the pace it kept there;
//   - the series grows without bound when the growth exceeds
//     Tolerance × level + Floor.
//
// Why this shape: a service under steady load that is bounded settles, so
// its trend over the later half is flat whatever it climbed to while
// warming up (caches filling, pools opening); a leak keeps its pace to the
// end, so the later half still climbs by an amount that grows with the
// soak's length. The slope is fitted over every sample of the second half,
// so no single sample (a heap caught just before a collection) decides;
// the tolerance is relative to where the series settled, so a service
// with a large heap is allowed a proportionately large wobble; the floor
// keeps a tiny series (a dozen goroutines) from failing on one or two.
type Rule struct {
	Tolerance float64 // allowed growth over the second half, as a share of the first half's level
	Floor     float64 // allowed growth on top, in the series' unit
}

// The rules of the soak. The heap in use swings between collections (GOGC=100
// lets it double before one): measured on `make soak SOAK=2m`, the core's
// and the gateway's heaps (5 to 11 MiB) swing by about 2.5 MiB from sample
// to sample, which leaves a least-squares trend of about a megabyte either
// way over a 45-second half (less over a longer one: the fit's noise falls
// with the square root of the samples). 25 % of the level plus 4 MiB is
// three to four times that noise for a quick soak. The price: a leak slower
// than Allowed / the half's length passes (the summary prints it: about
// 12 KiB a second for a 10 MiB heap in a 20-minute soak, 150 KiB a second
// in a 2-minute one). Goroutines move with the connections and requests in
// flight at the moment of the sample (about 30 in the same run, ±3): 20 %
// and 25 goroutines on top.
var (
	HeapRule       = Rule{Tolerance: 0.25, Floor: 4 << 20}
	GoroutinesRule = Rule{Tolerance: 0.20, Floor: 25}
)

// Verdict is a series judged by a Rule.
type Verdict struct {
	Level   float64 // the first half's median
	Slope   float64 // the second half's least-squares slope, per second
	Growth  float64 // Slope × the second half's length
	Allowed float64 // Tolerance × Level + Floor
	Samples [2]int  // samples in each half
	// Half is the second half's length: Allowed / Half is the slowest
	// steady leak this soak catches (a slower one passes it; a longer soak
	// catches slower ones).
	Half   time.Duration
	Pass   bool
	Reason string // why it failed, or why it could not be judged
}

// minSamples is the fewest samples a half needs for a trend to mean
// anything: fewer and the series is not judged (a failure: a soak too
// short to say).
const minSamples = 5

// Judge applies r to the points at or after warmup (points are in time
// order). Too few samples to judge is a failure that says so: a soak that
// cannot tell is not a pass.
func (r Rule) Judge(points []Point, warmup time.Duration) Verdict {
	i := 0
	for i < len(points) && points[i].At < warmup {
		i++
	}
	pts := points[i:]
	var v Verdict
	if len(pts) < 2*minSamples {
		v.Reason = fmt.Sprintf("%d samples after the warm-up: at least %d are needed to judge a trend", len(pts), 2*minSamples)
		return v
	}
	start, end := pts[0].At, pts[len(pts)-1].At
	mid := start + (end-start)/2
	var first, second []Point
	for _, p := range pts {
		if p.At < mid {
			first = append(first, p)
		} else {
			second = append(second, p)
		}
	}
	v.Samples = [2]int{len(first), len(second)}
	if len(first) < minSamples || len(second) < minSamples {
		v.Reason = fmt.Sprintf("halves of %d and %d samples: at least %d each are needed", len(first), len(second), minSamples)
		return v
	}
	v.Level = median(first)
	v.Slope = slope(second)
	v.Half = end - mid
	v.Growth = v.Slope * v.Half.Seconds()
	v.Allowed = r.Tolerance*v.Level + r.Floor
	v.Pass = v.Growth <= v.Allowed
	if !v.Pass {
		v.Reason = fmt.Sprintf("grew %.4g over the second half (%.4g a second) where %.4g is allowed (%.0f%% of the first half's level %.4g, plus %.4g)",
			v.Growth, v.Slope, v.Allowed, 100*r.Tolerance, v.Level, r.Floor)
	}
	return v
}

// median is the median of the points' values.
func median(pts []Point) float64 {
	vs := make([]float64, len(pts))
	for i, p := range pts {
		vs[i] = p.Value
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// slope is the least-squares slope of value over time, per second (0 when
// every point has the same time).
func slope(pts []Point) float64 {
	var mt, mv float64
	for _, p := range pts {
		mt += p.At.Seconds()
		mv += p.Value
	}
	n := float64(len(pts))
	mt, mv = mt/n, mv/n
	var num, den float64
	for _, p := range pts {
		dt := p.At.Seconds() - mt
		num += dt * (p.Value - mv)
		den += dt * dt
	}
	if den == 0 {
		return 0
	}
	return num / den
}
