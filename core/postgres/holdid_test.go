package postgres

import (
	"testing"
	"time"

	"github.com/onsale/onsale/core"
)

// TestNewHoldID checks the shape of hold ids: valid, version 7 with the
// RFC 9562 variant, the creation millisecond in front (so ids made later
// sort later), and never the same twice.
func TestNewHoldID(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for range 10000 {
		before := time.Now().UnixMilli()
		id := newHoldID()
		if !core.ValidUUID(id) || id[14] != '7' || !('8' <= id[19] && id[19] <= 'b') {
			t.Fatalf("newHoldID() = %q; want a version 7 UUID", id)
		}
		var ms int64
		for _, c := range id[0:8] + id[9:13] {
			ms = ms<<4 | int64(hexDigit(c))
		}
		if ms < before || ms > time.Now().UnixMilli() {
			t.Fatalf("newHoldID() = %q: time prefix %d outside [%d, now]", id, ms, before)
		}
		if id[:13] < prev[:min(13, len(prev))] {
			t.Fatalf("newHoldID() = %q sorts before the earlier %q", id, prev)
		}
		if seen[id] {
			t.Fatalf("newHoldID() = %q twice", id)
		}
		seen[id], prev = true, id
	}
}

func hexDigit(c rune) int {
	if c >= 'a' {
		return int(c-'a') + 10
	}
	return int(c - '0')
}
