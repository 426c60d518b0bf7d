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
