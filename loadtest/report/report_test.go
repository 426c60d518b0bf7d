package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The page counts the sign-ins when there were any, and says the fans were
// guests when there were none.
func TestSignIns(t *testing.T) {
	tests := []struct {
		name    string
		signIns []Count
		want    []string
	}{
		{"signed in", []Count{{Name: "codes requested", Value: 4012}, {Name: "bots refused", Value: 77, Note: "identity_required"}},
			[]string{"<h2>Sign-ins</h2>", "<td>codes requested</td><td>4012</td>", "<td>bots refused</td><td>77</td>", "identity_required"}},
		{"guests", nil, []string{"<h2>Sign-ins</h2>", "the fans joined as guests"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "index.html")
			if err := Write(path, Report{Title: "sale", SignIns: tc.signIns}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("the page lacks %q", w)
				}
			}
		})
	}
}

// Each fault is a marker on every chart and a row of the faults table; a
// sale without faults has no faults section.
func TestFaults(t *testing.T) {
	chart := Chart{Title: "Queue length", Lines: []Line{{Name: "queued", Points: []Point{{0, 10}, {60, 20}, {120, 5}}}}}
	r := Report{Title: "sale", Charts: []Chart{chart, chart},
		Markers: []Marker{{15, "pg-primary"}, {130, "gateways-restart"}, {900, "too late to show"}},
		Faults: []Fault{{Name: "pg-primary", Target: "pg1 (the primary)", At: 15, Back: "9.8 s", Rejoined: "16.0 s",
			Errors: []string{"hold 503: 9 s (120)"}, Stall: "none", Effective: "3000/min of 6000 (degraded: holds slow)", Detail: "kill -9 of pg1"}},
		Answers: []Answers{{Route: "hold", Classes: []ClassCount{{"201", 900, 60, false}, {"503", 120, 9, true}}}}}
	path := filepath.Join(t.TempDir(), "index.html")
	if err := Write(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	page := string(b)
	for _, w := range []string{"<h2>Faults injected during the sale</h2>", "<td>pg-primary</td>", "15 s</td>", "9.8 s; rejoined after 16.0 s",
		"<li>hold 503: 9 s (120)</li>", "3000/min of 6000", "kill -9 of pg1", `class="fail">503: 120 (9 s)`} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	// Two charts, two markers each in range (the one at +900 s is not drawn).
	if n := strings.Count(page, `class="marker"`); n != 4 {
		t.Errorf("%d markers drawn; want 2 on each of 2 charts", n)
	}
	if strings.Contains(page, "too late to show</text>") || strings.Count(page, ">gateways-restart</text>") != 2 {
		t.Error("markers: want gateways-restart (just after the last reading) on both charts, and not the one far beyond")
	}

	if err := Write(path, Report{Title: "sale", Charts: []Chart{chart}}); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if strings.Contains(string(b), "Faults injected") || strings.Contains(string(b), `class="marker"`) {
		t.Error("a sale without faults shows a faults section or markers")
	}
}
