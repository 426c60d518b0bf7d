package faults

import (
	"strings"
	"testing"
	"time"
)

// Parse places faults without a time gap apart from the first, keeps the
// times given, orders the steps, and refuses unknown or repeated faults
// and bad times.
func TestParse(t *testing.T) {
	s := time.Second
	tests := []struct {
		list string
		want string // the steps, or the error's start
	}{
		{"", ""},
		{"all", "[pg-primary@15s redis-master@40s gateways-restart@1m5s core@1m30s gateway@1m55s provider@2m20s freeze-core@2m45s]"},
		{"core,provider", "[core@15s provider@40s]"},
		{"provider@5s, pg-primary", "[provider@5s pg-primary@30s]"},
		{"gateway@50s,core@10s", "[core@10s gateway@50s]"},
		{"disk", "error: fault \"disk\": not one of"},
		{"core,core", "error: fault \"core\" named twice"},
		{"core@soon", "error: fault \"core\": time \"soon\""},
		{"core@-5s", "error: fault \"core\": time \"-5s\""},
	}
	for _, tc := range tests {
		steps, err := Parse(tc.list, 15*s, 25*s)
		got := ""
		if err != nil {
			got = "error: " + err.Error()
		} else if steps != nil {
			got = "[" + fmtSteps(steps) + "]"
		}
		if !strings.HasPrefix(got, tc.want) || tc.want == "" && got != "" {
			t.Errorf("Parse(%q) = %s; want %s", tc.list, got, tc.want)
		}
	}
}

func fmtSteps(steps []Step) string {
	var b []string
	for _, s := range steps {
		b = append(b, s.String())
	}
	return strings.Join(b, " ")
}
