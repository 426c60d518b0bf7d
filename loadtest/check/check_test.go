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
