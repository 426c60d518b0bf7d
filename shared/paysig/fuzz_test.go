package paysig

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// fuzzNow is the receiver's clock in the fuzz targets: fixed, so a finding
// replays the same way whenever it is run.
var fuzzNow = time.Unix(1_767_225_600, 0) // 2026-01-01

// FuzzVerify feeds Verify any header and body. The properties:
//   - it refuses with exactly one of the package's errors, never another;
//   - it accepts only a header that carries the body's true v1 MAC for one
//     of its t values within the tolerance (a forged or mangled header never
//     verifies, however it is spelled);
//   - the header Sign writes for the body always verifies, and fails with
//     ErrMismatch for any other body or secret (the signature binds both).
func FuzzVerify(f *testing.F) {
	secret := []byte("whsec_fuzz_0123456789abcdef")
	body := []byte(`{"id":"evt_1","type":"payment.succeeded","data":{"object":{"id":"pay_1","reference":"booking-1"}}}`)
	good := Sign(secret, fuzzNow, body)
	for _, h := range []string{
		good,
		good + ",v1=00",
		"v1=00," + good,
		" t=1767225600 , v1=" + strings.Repeat("ab", 32),
		"t=1767225600",
		"v1=" + strings.Repeat("0", 64),
		"t=abc,v1=00",
		"t=1767225600,v1=zz",
		"t=1767225600,v1",
		"t=-9223372036854775808,v1=00",
		"t=9223372036854775807,v1=00",
		"t=1,t=1767225600,v1=00",
		"",
		",,,",
		"t=1767225600,v1=" + strings.ToUpper(good[len("t=1767225600,v1="):]),
	} {
		f.Add(h, body, int64(0))
	}
	f.Add(good, []byte{}, int64(301))
	f.Add(good, []byte("x"), int64(-301))

	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64) {
		err := Verify(secret, header, body, fuzzNow)
		if err != nil && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrMalformed) &&
			!errors.Is(err, ErrStale) && !errors.Is(err, ErrMismatch) {
			t.Fatalf("Verify(%q) = %v; want one of the package's errors", header, err)
		}
		if err == nil && !carriesMAC(secret, header, body) {
			t.Fatalf("Verify(%q) = nil for a header without the body's MAC", header)
		}

		// Sign's own header, at a skew from the receiver's clock.
		skew %= int64(2 * Tolerance / time.Second)
		at := fuzzNow.Add(time.Duration(skew) * time.Second)
		signed := Sign(secret, at, body)
		err = Verify(secret, signed, body, fuzzNow)
		inside := skew <= int64(Tolerance/time.Second) && skew >= -int64(Tolerance/time.Second)
		switch {
		case inside && err != nil:
			t.Fatalf("Verify(Sign(skew %ds)) = %v; want nil", skew, err)
		case !inside && !errors.Is(err, ErrStale):
			t.Fatalf("Verify(Sign(skew %ds)) = %v; want ErrStale", skew, err)
		}
		if !inside {
			return
		}
		other := append(bytes.Clone(body), 'x')
		if err := Verify(secret, signed, other, fuzzNow); !errors.Is(err, ErrMismatch) {
			t.Fatalf("Verify(signed, another body) = %v; want ErrMismatch", err)
		}
		if err := Verify([]byte("another secret"), signed, body, fuzzNow); !errors.Is(err, ErrMismatch) {
			t.Fatalf("Verify(another secret) = %v; want ErrMismatch", err)
		}
	})
}

// carriesMAC is the specification Verify is checked against, written
// independently: some t=<ts> with the true v1 MAC over ts "." body, the last
// t of the header being the one that counts.
func carriesMAC(secret []byte, header string, body []byte) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	want := hex.EncodeToString(mac(secret, ts, body))
	for _, s := range sigs {
		if strings.EqualFold(s, want) {
			return true
		}
	}
	return false
}
