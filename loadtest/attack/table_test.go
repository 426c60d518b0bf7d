package attack

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// table is the suite's result: one row per attack (attack, expected
// refusal, seen), logged at the end for the closing note.
type table struct {
	mu   sync.Mutex
	rows [][3]string
}

// add records an attack's row; seen is what the stack answered (or why the
// attack did not run).
func (tb *table) add(attack, expected, seen string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.rows = append(tb.rows, [3]string{attack, expected, seen})
}

// String is the table in Markdown, rows in the order the attacks ran.
func (tb *table) String() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b strings.Builder
	b.WriteString("| attack | expected refusal | seen |\n|---|---|---|\n")
	for _, r := range tb.rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(r[0]), cell(r[1]), cell(r[2]))
	}
	return b.String()
}

// cell escapes a Markdown table cell's pipes.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func TestTableString(t *testing.T) {
	var tb table
	tb.add("alg_none", "401 unauthorized", "401 unauthorized")
	tb.add("flood", "holds succeed", "100/100 | p99 3ms")
	want := "| attack | expected refusal | seen |\n|---|---|---|\n" +
		"| alg_none | 401 unauthorized | 401 unauthorized |\n| flood | holds succeed | 100/100 \\| p99 3ms |\n"
	if got := tb.String(); got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}
