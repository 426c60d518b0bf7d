package paysim

import (
	"testing"
)

// TestClaimInProgress: a second request under a key still running is
// refused with 409, one with other parameters with 422, and after the first
// completes the same parameters replay.
func TestClaimInProgress(t *testing.T) {
	s, err := New(Config{APIKey: "k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := idemKey{apiKey: "k", method: "POST", path: "/v1/payments", key: "a"}
	fp := fingerprint([]byte(`{"amount":1,"reference":"x"}`))
	if r, e := s.claim(k, fp); r != nil || e != nil {
		t.Fatalf("first claim = %v, %v; want nil, nil", r, e)
	}
	if _, e := s.claim(k, fp); e == nil || e.Code != EInProgress {
		t.Errorf("claim while running = %v; want %s", e, EInProgress)
	}
	if _, e := s.claim(k, fingerprint([]byte(`{"amount":2}`))); e == nil || e.Code != EKeyReused {
		t.Errorf("claim with other parameters while running = %v; want %s", e, EKeyReused)
	}
	s.complete(k, true, 201, []byte("stored"))
	if r, e := s.claim(k, fingerprint([]byte(` {"reference":"x", "amount":1}`))); e != nil || r == nil || r.status != 201 || string(r.body) != "stored" {
		t.Errorf("claim after completion = %+v, %v; want the stored 201", r, e)
	}
}

func TestFingerprint(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":2}`, `{ "b": 2, "a": 1 }`, true},
		{``, `{}`, true},
		{` `, `{}`, true},
		{`{"a":1}`, `{"a":1.0}`, false}, // numbers compared as written
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":{"x":1,"y":2}}`, `{"a":{"y":2,"x":1}}`, true},
		{`not json`, `not json`, true},
		{`not json`, `not  json`, false},
	}
	for _, tc := range tests {
		if got := fingerprint([]byte(tc.a)) == fingerprint([]byte(tc.b)); got != tc.same {
			t.Errorf("fingerprint(%q) == fingerprint(%q) is %v; want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
