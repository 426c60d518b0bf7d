package check

import (
	"testing"
	"time"
)

// Places offered at the dial pass; twice the dial fails (the control).
// Claims above the dial alone do not fail: they bunch when polls run late.
func TestOfferedRate(t *testing.T) {
	series := func(perSecond int64, claims int64) []Sample {
		t0 := time.Unix(1_700_000_000, 0)
		var out []Sample
		for i := range int64(180) {
			at := t0.Add(time.Duration(i) * time.Second)
			out = append(out, Sample{At: at, Dial: 6000, Serving: i * perSecond, AdmittedPerMinute: claims})
		}
		return out
	}
	if r := offeredRate(series(100, 9000), 9000); !r.Pass {
		t.Fatalf("offers at the dial (claims bunched above it): %+v", r)
	}
	if r := offeredRate(series(200, 0), 0); r.Pass {
		t.Fatalf("offers at twice the dial passed: %+v", r)
	}
	if r := offeredRate(series(101, 0), 0); !r.Pass { // 60 over a minute: within the one second of burst
		t.Fatalf("offers 1%% over the dial: %+v", r)
	}
}

// Queue order: an admission is checked against the first sample Skew
// after it (several gateways: another gateway's reading may be older than
// its time); a fan admitted ahead of that sample's serving counter fails.
func TestQueueOrderSkew(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	samples := []Sample{{At: t0, Serving: 10}, {At: t0.Add(300 * time.Millisecond), Serving: 10}, {At: t0.Add(1200 * time.Millisecond), Serving: 30}}
	adm := []Admission{{Position: 20, First: 20, AdmittedAt: t0.Add(100 * time.Millisecond)}}
	if r := queueOrder(Input{Samples: samples, Admissions: adm}); r.Pass {
		t.Errorf("queueOrder, no skew = %+v; want a failure (the sample after says serving 10)", r)
	}
	if r := queueOrder(Input{Samples: samples, Admissions: adm, Skew: time.Second}); !r.Pass {
		t.Errorf("queueOrder, skew 1 s = %+v; want a pass (serving 30 a second later)", r)
	}
	late := []Admission{{Position: 40, First: 40, AdmittedAt: t0.Add(100 * time.Millisecond)}}
	if r := queueOrder(Input{Samples: samples, Admissions: late, Skew: time.Second}); r.Pass {
		t.Errorf("queueOrder(place 40 admitted while serving was 30 a second later) = %+v; want a failure", r)
	}
}
