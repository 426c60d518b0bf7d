package gateway

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzParseDialPatch feeds the admin PATCH body reader any bytes. A
// refusal is an error and changes nothing; an accepted patch names only
// dials of DialList, applies without panic, and means one thing: parsing
// it again gives the same dials (the answer cannot depend on the order in
// which Go walks a map), and the patch written back as JSON applies to the
// same dials.
func FuzzParseDialPatch(f *testing.F) {
	for _, b := range []string{
		`{"paused":true}`, `{"paused":null}`, `{"PAUSED":true}`, `{"paused":true,"PAUSED":false}`,
		`{"new_users_per_minute":500,"total_active_users":2000}`, `{"new_users_per_minute":1.5}`,
		`{"new_users_per_minute":"500"}`, `{"onsale_at":"2026-12-24T12:00:00+05:30"}`, `{"onsale_at":"noon"}`,
		`{"queueing":"fifo"}`, `{"version":3}`, `{"epoch":"x"}`, `{"colour":"red"}`, `{}`, `[]`, `null`, ``,
		`{"paused":true}{}`, `{"session_seconds":1e400}`,
	} {
		f.Add([]byte(b))
	}
	base := DefaultDials(time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 24, 18, 0, 0, 0, time.UTC))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseDialPatch(body)
		if err != nil {
			if p != nil {
				t.Fatalf("ParseDialPatch(%q) = %v with error %v", body, p, err)
			}
			return
		}
		for name := range p {
			if _, ok := dialNamed(name); !ok || !contains(p.Changed(), name) {
				t.Fatalf("ParseDialPatch(%q) names %q, not a dial", body, name)
			}
		}
		d := base
		p.Apply(&d)
		if d.Version != base.Version || d.Epoch != base.Epoch {
			t.Fatalf("ParseDialPatch(%q) changed version or epoch", body)
		}
		for range 4 { // map order is random: several parses would disagree if it mattered
			q, err := ParseDialPatch(body)
			if err != nil {
				t.Fatalf("ParseDialPatch(%q) refused on a second parse: %v", body, err)
			}
			e := base
			q.Apply(&e)
			if !reflect.DeepEqual(d, e) {
				t.Fatalf("ParseDialPatch(%q) applies as %+v once and %+v another time", body, d, e)
			}
		}
		written, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParseDialPatch(written)
		if err != nil {
			t.Fatalf("ParseDialPatch(%s) of a written patch: %v", written, err)
		}
		e := base
		q.Apply(&e)
		if !reflect.DeepEqual(d, e) {
			t.Fatalf("patch %q written as %s applies differently", body, written)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
