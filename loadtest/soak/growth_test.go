package soak

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// series is a synthetic soak of length d sampled every step: base(t) plus
// uniform noise of ±noise, drawn from seed.
func series(d, step time.Duration, seed uint64, noise float64, base func(t float64) float64) []Point {
	rng := rand.New(rand.NewPCG(seed, 0))
	var out []Point
	for at := time.Duration(0); at <= d; at += step {
		out = append(out, Point{At: at, Value: base(at.Seconds()) + noise*(2*rng.Float64()-1)})
	}
	return out
}

// sawtooth is a Go heap between collections: it climbs from lo to hi over
// period seconds, then drops back.
func sawtooth(lo, hi, period float64) func(t float64) float64 {
	return func(t float64) float64 { return lo + (hi-lo)*math.Mod(t, period)/period }
}

const mib = 1 << 20

// TestRuleGrowth is the rule against its controls: every series that
// grows at a steady pace fails it, every bounded one (flat and noisy, a
// heap's sawtooth, a warm-up climb that settles) passes, for a quick soak
// (2 minutes sampled every 2 s, 30 s of warm-up) and a full one (20
// minutes every 5 s, a minute of warm-up), over many draws of the noise.
func TestRuleGrowth(t *testing.T) {
	type soakLen struct {
		name          string
		d, step, warm time.Duration
	}
	lengths := []soakLen{{"2m", 2 * time.Minute, 2 * time.Second, 30 * time.Second}, {"20m", 20 * time.Minute, 5 * time.Second, time.Minute}}
	cases := []struct {
		name  string
		rule  Rule
		noise float64
		base  func(t float64) float64
		grows bool
	}{
		// bounded
		{"heap flat and noisy", HeapRule, 8 * mib, func(float64) float64 { return 40 * mib }, false},
		{"heap sawtooth of collections", HeapRule, 2 * mib, sawtooth(30*mib, 55*mib, 17), false},
		{"heap warms up then settles", HeapRule, 3 * mib, func(t float64) float64 { return 20*mib + 25*mib*(1-math.Exp(-t/10)) }, false},
		{"goroutines flat and noisy", GoroutinesRule, 15, func(float64) float64 { return 60 }, false},
		{"goroutines few and jumpy", GoroutinesRule, 8, func(float64) float64 { return 12 }, false},
		// unbounded: a leak at a steady pace (the controls: the rule must catch them)
		{"heap leaks 1 MiB a second", HeapRule, 8 * mib, func(t float64) float64 { return 40*mib + mib*t }, true},
		{"heap leaks 1 MiB a second under a sawtooth", HeapRule, 2 * mib,
			func(t float64) float64 { return sawtooth(30*mib, 55*mib, 17)(t) + mib*t }, true},
		{"goroutines leak three a second", GoroutinesRule, 15, func(t float64) float64 { return 60 + 3*t }, true},
	}
	for _, l := range lengths {
		for _, tc := range cases {
			t.Run(l.name+"/"+tc.name, func(t *testing.T) {
				for seed := range uint64(200) {
					pts := series(l.d, l.step, seed, tc.noise, tc.base)
					v := tc.rule.Judge(pts, l.warm)
					if v.Pass == tc.grows {
						t.Fatalf("seed %d: Judge = pass %v (level %.4g, growth %.4g, allowed %.4g; %s); want pass %v",
							seed, v.Pass, v.Level, v.Growth, v.Allowed, v.Reason, !tc.grows)
					}
				}
			})
		}
	}
}

// TestRuleSlowLeakFullSoak: a leak too slow for a quick soak to see over
// its noise is caught by the full one, because the growth the rule
// measures is the leak's pace times the half's length, which grows with
// the soak while the allowance does not.
func TestRuleSlowLeakFullSoak(t *testing.T) {
	leak := func(t float64) float64 { return 40*mib + 64<<10*t } // 64 KiB a second
	quick := HeapRule.Judge(series(2*time.Minute, 2*time.Second, 1, 4*mib, leak), 30*time.Second)
	full := HeapRule.Judge(series(20*time.Minute, 5*time.Second, 1, 4*mib, leak), time.Minute)
	if !quick.Pass {
		t.Errorf("quick soak: Judge failed a 64 KiB/s leak (growth %.4g, allowed %.4g): the test's premise is off", quick.Growth, quick.Allowed)
	}
	if full.Pass {
		t.Errorf("full soak: Judge passed a 64 KiB/s leak (growth %.4g, allowed %.4g); want a failure", full.Growth, full.Allowed)
	}
}

// TestRuleTooFewSamples: a soak too short to show a trend is a failure
// that says so, not a pass.
func TestRuleTooFewSamples(t *testing.T) {
	pts := series(20*time.Second, 2*time.Second, 1, 0, func(float64) float64 { return 10 })
	v := HeapRule.Judge(pts, 5*time.Second)
	if v.Pass || v.Reason == "" {
		t.Fatalf("Judge(8 samples) = pass %v, reason %q; want a failure with a reason", v.Pass, v.Reason)
	}
}

// TestRuleWarmupIgnored: a climb inside the warm-up does not count,
// however steep; the same samples judged without the warm-up fail (the
// climb reaches into the second half and drives its slope).
func TestRuleWarmupIgnored(t *testing.T) {
	climb := func(t float64) float64 { return 10 + 50*min(t, 120) } // +6000 goroutines in the first two minutes, then flat
	pts := series(3*time.Minute, 2*time.Second, 1, 0, climb)
	if v := GoroutinesRule.Judge(pts, 90*time.Second); !v.Pass {
		t.Errorf("warm-up 90s: Judge = fail (%s); want pass", v.Reason)
	}
	if v := GoroutinesRule.Judge(pts, 0); v.Pass {
		t.Errorf("no warm-up: Judge = pass (level %v, growth %v, allowed %v); want fail", v.Level, v.Growth, v.Allowed)
	}
}
