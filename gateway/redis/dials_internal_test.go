package redis

import (
	"fmt"
	"testing"
	"time"

	"github.com/onsale/onsale/gateway"
)

// The hash the store writes reads back as the same dials, every dial of
// gateway.DialList included.
func TestDialFieldsRoundTrip(t *testing.T) {
	d := gateway.Dials{NewUsersPerMinute: 1, TotalActiveUsers: 2, SessionSeconds: 3, ClaimSeconds: 4,
		PrequeueAt: time.UnixMilli(1_000_000), OnsaleAt: time.UnixMilli(2_000_000), ClosesAt: time.UnixMilli(3_000_000),
		Paused: true, Queueing: "fifo", SoldOut: true, Version: 6}
	m := map[string]string{}
	for k, v := range dialFields(d) {
		m[k] = fmt.Sprint(v)
	}
	if len(m) != len(gateway.DialList)+1 {
		t.Errorf("dialFields wrote %d fields; want the %d dials and the version", len(m), len(gateway.DialList))
	}
	if got := parseDials(m); got != d {
		t.Errorf("parseDials(dialFields(d)) = %+v; want %+v", got, d)
	}
	if got := parseDials(map[string]string{"paused": "0", "prequeue_at": "0"}); got.Paused || !got.PrequeueAt.IsZero() {
		t.Errorf("zero values read as %+v", got)
	}
}

// A stored hash that still carries a removed dial (gateway.RemovedDials:
// pow_difficulty, written by a gateway of before issue 13) reads as the
// same dials as without it: the field is ignored.
func TestRemovedDialIgnored(t *testing.T) {
	m := map[string]string{"new_users_per_minute": "60", "paused": "1", "queueing": "fifo", "version": "3"}
	want := parseDials(m)
	for name := range gateway.RemovedDials {
		m[name] = "20"
	}
	if got := parseDials(m); got != want {
		t.Errorf("parseDials with a removed dial = %+v; want %+v", got, want)
	}
}
