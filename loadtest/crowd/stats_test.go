package crowd

import (
	"slices"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/report"
)

func TestLatencies(t *testing.T) {
	st := NewStats(time.Now(), time.Minute)
	for i := 100; i >= 1; i-- { // out of order: the summary sorts
		st.Observe("status", time.Duration(i)*time.Millisecond)
	}
	st.Observe("join", 7*time.Millisecond)
	got := st.Latencies()
	want := []Latency{
		{Route: "join", Count: 1, P50: 7 * time.Millisecond, P90: 7 * time.Millisecond, P99: 7 * time.Millisecond, Max: 7 * time.Millisecond},
		{Route: "status", Count: 100, P50: 51 * time.Millisecond, P90: 91 * time.Millisecond, P99: 100 * time.Millisecond, Max: 100 * time.Millisecond},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Latencies() = %+v; want %+v", got, want)
	}
}

func TestFail(t *testing.T) {
	st := NewStats(time.Now(), time.Minute)
	st.Fail("transport")
	st.Fail("transport")
	st.Fail("hold 503")
	if n := st.Errors.Load(); n != 3 {
		t.Errorf("Errors = %d; want 3", n)
	}
	got := st.ErrorsByKind()
	if len(got) != 2 || got["transport"] != 2 || got["hold 503"] != 1 {
		t.Errorf("ErrorsByKind() = %v", got)
	}
	got["transport"] = 99 // a copy
	if st.ErrorsByKind()["transport"] != 2 {
		t.Error("ErrorsByKind returned the Stats' own map")
	}
}

func TestPollRate(t *testing.T) {
	start := time.Now()
	st := NewStats(start, 10*time.Second)
	at := func(sec float64, n int) {
		for range n {
			st.pollAnswered(start.Add(time.Duration(sec * float64(time.Second))))
		}
	}
	at(2.5, 4) // nothing before second 2: not counted in the mean
	at(4.1, 2) // second 3 had none: counted
	at(-1, 5)  // before the start, and past the span: dropped
	at(10, 5)
	mean, peak, secs := st.PollRate()
	want := []report.Point{{T: 2, V: 4}, {T: 3, V: 0}, {T: 4, V: 2}}
	if mean != 2 || peak != 4 || !slices.Equal(secs, want) {
		t.Fatalf("PollRate() = %v, %v, %v; want 2, 4, %v", mean, peak, secs, want)
	}
}

func TestMeanSession(t *testing.T) {
	st := NewStats(time.Now(), time.Minute)
	if w := st.MeanSession(90 * time.Second); w != 90*time.Second {
		t.Errorf("nobody admitted: W = %v; want the session", w)
	}
	if m := st.MeanLeft(); m != 0 {
		t.Errorf("nobody left: MeanLeft = %v", m)
	}
	st.Admitted.Add(4)
	st.Left.Add(2)
	st.SessionNanos.Add(int64(30 * time.Second)) // two fans, 10 s and 20 s
	if m := st.MeanLeft(); m != 15*time.Second {
		t.Errorf("MeanLeft = %v; want 15s", m)
	}
	// (10 + 20 + 90 + 90) / 4
	if w := st.MeanSession(90 * time.Second); w != 52500*time.Millisecond {
		t.Errorf("W = %v; want 52.5s", w)
	}
}

// TestLatenciesBounded: past exactUpTo a route's latencies are the
// histogram's, a thousandth off at most, the longest exact.
func TestLatenciesBounded(t *testing.T) {
	st := NewStats(time.Now(), time.Minute)
	const n = 3 * exactUpTo
	for i := n; i >= 1; i-- {
		st.Observe("status", time.Duration(i)*time.Millisecond)
	}
	l := st.Latencies()[0]
	off := func(got time.Duration, want int) bool {
		w := time.Duration(want) * time.Millisecond
		return got < w-w/1000 || got > w+w/1000
	}
	if l.Count != n || off(l.P50, n/2) || off(l.P90, n*9/10) || off(l.P99, n*99/100) || l.Max != n*time.Millisecond {
		t.Errorf("Latencies() = %+v; want %d of them, p50 %d ms, p90 %d ms, p99 %d ms (0.1%%), max %d ms", l, n, n/2, n*9/10, n*99/100, n)
	}
	if len(st.latency["status"].exact) != exactUpTo {
		t.Errorf("%d latencies kept exactly; want %d", len(st.latency["status"].exact), exactUpTo)
	}
}
