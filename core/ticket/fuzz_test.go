package ticket

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// fuzzKey is a fixed ticket key, so a finding replays identically.
var fuzzKey = ed25519.NewKeyFromSeed([]byte("onsale ticket fuzz key seed 0123"))

// FuzzVerify feeds the gate's ticket reader any payload (what a camera
// reads off a screen or a print). A refusal is ErrMalformed or
// ErrSignature, never a panic or another error; an accepted payload has
// claims a gate can act on (positive ids within a JavaScript number, a
// ticket number within a booking's range), and since only tickets the key
// signed verify, an accepted v2 payload carries the very bytes Sign makes
// for its claims.
func FuzzVerify(f *testing.F) {
	s := NewSigner(fuzzKey)
	good := s.Sign(Claims{Event: 7, Booking: 1234, N: 2})
	f.Add(good)
	f.Add(strings.ToLower(good))
	f.Add(" " + good + "\n")
	f.Add(good[:len(good)-1])
	f.Add(good[:len(good)-1] + string(good[len(good)-1]+1)) // another spelling of the last 4 bits
	f.Add(Prefix + b32.EncodeToString(make([]byte, 64)))
	f.Add("T3." + good[3:])
	f.Add("t1.e30.")
	f.Add("t1." + base64.RawURLEncoding.EncodeToString([]byte(`{"bkg":1,"n":1}`)) + ".AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, payload string) {
		c, err := Verify(s.PublicKey(), payload)
		if err != nil {
			if c != nil || !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrSignature) {
				t.Fatalf("Verify(%q) = %+v, %v; want nil and ErrMalformed or ErrSignature", payload, c, err)
			}
			return
		}
		if c.Booking <= 0 || c.N <= 0 {
			t.Fatalf("Verify(%q) accepted booking %d ticket %d", payload, c.Booking, c.N)
		}
		if c.Version == 2 {
			if c.Event <= 0 || c.Event > 1<<53 || c.Booking > 1<<53 || c.N > 1<<16 {
				t.Fatalf("Verify(%q) accepted %+v", payload, c)
			}
			// The same bytes as Sign's payload: base32's last character has
			// unused low bits, so a second spelling of a ticket verifies,
			// harmlessly, since gates know a ticket by its Ref, not its text.
			want := s.Sign(*c)
			got, err := b32.DecodeString(strings.ToUpper(strings.TrimSpace(payload)[len(Prefix):]))
			if wantRaw, _ := b32.DecodeString(want[len(Prefix):]); err != nil || string(got) != string(wantRaw) {
				t.Fatalf("Verify(%q) accepted claims %+v that Sign writes as %q", payload, c, want)
			}
		}
	})
}

// FuzzSign is the round trip: a ticket Sign makes for claims a gate can
// hold (ids 1 to 2^53, n 1 to 2^16) verifies to the same claims, in either
// case and under no other key; claims outside that range, which no booking
// has, are refused as malformed rather than read as others.
func FuzzSign(f *testing.F) {
	f.Add(int64(7), int64(1234), 2)
	f.Add(int64(1<<53), int64(1<<53), 1<<16)
	f.Add(int64(1<<53+1), int64(1), 1)
	f.Add(int64(0), int64(1), 1)
	f.Add(int64(-1), int64(1), 1)
	f.Add(int64(1), int64(1), 1<<16+1)
	f.Add(int64(1), int64(1), -1)
	s := NewSigner(fuzzKey)
	other := ed25519.NewKeyFromSeed([]byte("another ticket key seed 01234567")).Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, event, booking int64, n int) {
		in := Claims{Event: event, Booking: booking, N: n}
		p := s.Sign(in)
		c, err := Verify(s.PublicKey(), p)
		valid := event > 0 && event <= 1<<53 && booking > 0 && booking <= 1<<53 && n > 0 && n <= 1<<16
		switch {
		case valid && err != nil:
			t.Fatalf("Verify(Sign(%+v)) = %v", in, err)
		case !valid && !errors.Is(err, ErrMalformed):
			t.Fatalf("Verify(Sign(%+v)) = %+v, %v; want ErrMalformed", in, c, err)
		case valid && (c.Event != event || c.Booking != booking || c.N != n || c.Version != 2):
			t.Fatalf("Verify(Sign(%+v)) = %+v", in, c)
		}
		if !valid {
			return
		}
		if _, err := Verify(s.PublicKey(), strings.ToLower(p)); err != nil {
			t.Fatalf("Verify(lower(%q)) = %v", p, err)
		}
		if _, err := Verify(other, p); !errors.Is(err, ErrSignature) {
			t.Fatalf("Verify(another key) = %v; want ErrSignature", err)
		}
	})
}
