// Package paysig signs and verifies payment-provider webhooks:
//
//	Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + raw body)>
//
// The provider (and its simulator) signs; the core verifies over the raw
// body with a constant-time compare and a timestamp tolerance, so a captured
// webhook cannot be replayed later and a forged one never verifies.
package paysig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header is the HTTP header that carries the signature.
const Header = "Payment-Signature"

// Tolerance is how far a webhook's timestamp may be from the receiver's clock.
const Tolerance = 5 * time.Minute

// Errors returned by Verify.
var (
	ErrMissing   = errors.New("payment signature missing")
	ErrMalformed = errors.New("payment signature malformed")
	ErrStale     = errors.New("payment signature timestamp outside the tolerance")
	ErrMismatch  = errors.New("payment signature does not match")
)

// Sign returns the header value for body signed at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks header against body at now. Several v1 values are allowed
// (the provider sends one per active secret during a rotation).
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if header == "" {
		return ErrMissing
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrMalformed
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil {
				return ErrMalformed
			}
			sigs = append(sigs, b)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrStale
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrMismatch
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}
