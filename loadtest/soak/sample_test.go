package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// page is a Prometheus text page as the Go collector writes it, with
// neighbours whose names share a prefix.
const page = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines %d
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 4.194304e+07
go_memstats_heap_inuse_bytes_total{x="y"} 1
go_goroutines_max 9
`

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader(fmt.Sprintf(page, 42)))
	if err != nil {
		t.Fatal(err)
	}
	if got[Goroutines] != 42 || got[Heap] != 40*mib {
		t.Fatalf("Parse = %v; want %s 42, %s %d", got, Goroutines, Heap, 40*mib)
	}
	if _, err := Parse(strings.NewReader("go_goroutines many\n")); err == nil {
		t.Fatal("Parse(go_goroutines many) = nil error; want one")
	}
}

// TestSamplerCatchesLeak runs the sampler against two services over HTTP,
// one whose goroutines climb by ten a scrape (a leak: the control) and one
// that stays put, and judges what it sampled: the leak fails, the steady
// one passes. The rounds' times are the sampler's own (no sleeping: the
// sampler is asked for each round at once, and the times it records are
// then spread by the judge's halves as they fall).
func TestSamplerCatchesLeak(t *testing.T) {
	var leaked atomic.Int64
	leaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, page, 100+leaked.Add(10))
	}))
	defer leaky.Close()
	steady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, page, 100) }))
	defer steady.Close()
	broken := httptest.NewServer(http.NotFoundHandler())
	defer broken.Close()

	targets, err := ParseTargets(fmt.Sprintf("leaky=%s/metrics, steady=%s/metrics,broken=%s/metrics", leaky.URL, steady.URL, broken.URL))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSampler(targets, time.Now())
	for range 40 {
		s.Sample(context.Background())
	}
	rounds := s.Rounds()
	// Judge on the rounds' order rather than their (sub-millisecond) times.
	for i := range rounds {
		rounds[i].At = time.Duration(i) * time.Second
	}
	res := Judge(s.Columns(), rounds, 0)
	want := map[string]bool{"leaky heap": true, "leaky goroutines": false, "steady heap": true, "steady goroutines": true,
		"broken heap": false, "broken goroutines": false} // nothing sampled: not judged, a failure
	for i, c := range res.Columns {
		if got := res.Verdicts[i].Pass; got != want[c.Name()] {
			t.Errorf("%s: pass %v (%+v); want %v", c.Name(), got, res.Verdicts[i], want[c.Name()])
		}
	}
	if n, last := s.Errors(); n != 40 || !strings.Contains(last, "404") {
		t.Errorf("Errors() = %d, %q; want 40 failed scrapes of broken, a 404", n, last)
	}
	var out strings.Builder
	res.Print(&out, 5)
	if !strings.Contains(out.String(), "leaky goroutines") || !strings.Contains(out.String(), "FAIL") {
		t.Errorf("Print wrote:\n%s\nwant the leaky series and a FAIL", out.String())
	}
	if _, err := ParseTargets("core"); err == nil {
		t.Error(`ParseTargets("core") = nil error; want one`)
	}
}
