package paysig

import (
	"errors"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	secret := []byte("whsec_test")
	body := []byte(`{"id":"evt_1","type":"payment.succeeded"}`)
	now := time.Unix(1_800_000_000, 0)
	good := Sign(secret, now, body)
	tests := []struct {
		name   string
		header string
		body   []byte
		at     time.Time
		want   error
	}{
		{"good", good, body, now, nil},
		{"good, 4 minutes later", good, body, now.Add(4 * time.Minute), nil},
		{"replayed 6 minutes later", good, body, now.Add(6 * time.Minute), ErrStale},
		{"from the future", Sign(secret, now.Add(10*time.Minute), body), body, now, ErrStale},
		{"body changed", good, []byte(`{"id":"evt_1","type":"payment.failed"}`), now, ErrMismatch},
		{"wrong secret", Sign([]byte("other"), now, body), body, now, ErrMismatch},
		{"missing", "", body, now, ErrMissing},
		{"no v1", "t=1800000000", body, now, ErrMalformed},
		{"garbage", "hello", body, now, ErrMalformed},
		{"bad hex", "t=1800000000,v1=zz", body, now, ErrMalformed},
		{"rotation: second v1 matches", Sign([]byte("old"), now, body) + "," + good[len("t=1800000000,"):], body, now, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(secret, tc.header, tc.body, tc.at); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v; want %v", err, tc.want)
			}
		})
	}
}
