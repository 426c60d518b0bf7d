package gateway

import (
	"slices"
	"testing"
	"time"
)

// A PATCH body sets exactly the dials it names (nulls set nothing), knows
// which of them the frozen pre-queue fixes, and refuses unknown names and
// values of the wrong type.
func TestDialPatch(t *testing.T) {
	p, err := ParseDialPatch([]byte(`{"paused":true,"new_users_per_minute":6000,"closes_at":null,"Queueing":"fifo"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Changed(), []string{"new_users_per_minute", "paused", "queueing"}; !slices.Equal(got, want) {
		t.Errorf("Changed() = %v; want %v (in DialList order, null left out)", got, want)
	}
	if !p.TouchesFrozen() {
		t.Error("a patch of queueing does not touch the frozen dials")
	}
	d := DefaultDials(time.Now(), time.Now().Add(time.Hour))
	closes := d.ClosesAt
	p.Apply(&d)
	if !d.Paused || d.NewUsersPerMinute != 6000 || d.Queueing != "fifo" || !d.ClosesAt.Equal(closes) {
		t.Errorf("applied = %+v", d)
	}
	if q, _ := ParseDialPatch([]byte(`{"paused":false}`)); q.TouchesFrozen() {
		t.Error("a patch of paused touches the frozen dials")
	}
	for _, bad := range []string{`{"nope":1}`, `{"paused":"yes"}`, `{"onsale_at":5}`, `{`, `[]`, `{"version":3}`, `{"epoch":"x"}`} {
		if _, err := ParseDialPatch([]byte(bad)); err == nil {
			t.Errorf("ParseDialPatch(%s) = nil error", bad)
		}
	}
}

// DialList names every dial of Dials once: a dial added to the struct and
// not to the list would never be stored or patched.
func TestDialListComplete(t *testing.T) {
	var d Dials
	seen := map[any]string{}
	for _, dl := range DialList {
		ptr := dl.Field(&d)
		if other, dup := seen[ptr]; dup {
			t.Errorf("dials %s and %s are one field", dl.Name, other)
		}
		seen[ptr] = dl.Name
	}
	// Version and Epoch are the store's, not dials.
	if n := len(seen) + 2; n != 13 {
		t.Errorf("DialList and the store's two fields cover %d fields of Dials; want 13", n)
	}
}
