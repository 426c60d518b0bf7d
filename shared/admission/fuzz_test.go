package admission

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// fuzzKey is a fixed key, so a finding replays identically.
var fuzzKey = ed25519.NewKeyFromSeed([]byte("onsale admission fuzz key seed!!"))

// checkVerified is what every token Verify accepts must satisfy, whatever
// its bytes: the claims the core then trusts without looking again.
func checkVerified(t *testing.T, tok string, c *Claims, err error) {
	t.Helper()
	switch {
	case err != nil && c != nil:
		t.Fatalf("Verify(%q) = %+v, %v; want no claims with an error", tok, c, err)
	case err != nil && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrExpired) && !errors.Is(err, ErrInvalid):
		t.Fatalf("Verify(%q) = %v; want ErrMissing, ErrExpired or ErrInvalid", tok, err)
	case err != nil:
		return
	case c.Subject == "" || c.EventID <= 0 || c.Max < 0:
		t.Fatalf("Verify(%q) accepted claims %+v", tok, c)
	case c.Issuer != Issuer || len(c.Audience) == 0 || !time.Now().Before(c.Expiry()):
		t.Fatalf("Verify(%q) accepted iss %q aud %v exp %v", tok, c.Issuer, c.Audience, c.Expiry())
	}
}

// FuzzVerify feeds the admit-token verifier any string. The seeds are the
// attacks it must refuse (alg none, HS256 keyed with the public key, an
// unknown kid, a non-numeric evt) beside a valid token; the property is
// checkVerified's: an accepted token always carries valid claims, and a
// refusal is one of the three errors.
func FuzzVerify(f *testing.F) {
	s := NewSigner(fuzzKey)
	v := NewVerifierFromPublicKeys(s.PublicKey())
	valid, err := s.Admit("acct:1", 42, 4, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claims(Audience, "42", "acct:1", time.Now().Add(time.Hour)))
	none.Header["kid"] = s.KeyID()
	if tok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType); err == nil {
		f.Add(tok)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(Audience, "42", "acct:1", time.Now().Add(time.Hour)))
	hs.Header["kid"] = s.KeyID()
	if tok, err := hs.SignedString([]byte(s.PublicKey())); err == nil {
		f.Add(tok)
	}
	for _, c := range []jwt.MapClaims{
		claims(Audience, "abc", "acct:1", time.Now().Add(time.Hour)),
		claims(Audience, "-1", "acct:1", time.Now().Add(time.Hour)),
		claims(Audience, "42", "", time.Now().Add(time.Hour)),
		claims("onsale", "42", "acct:1", time.Now().Add(time.Hour)),
		claims(Audience, "42", "acct:1", time.Now().Add(-time.Hour)),
	} {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
		tok.Header["kid"] = s.KeyID()
		if str, err := tok.SignedString(fuzzKey); err == nil {
			f.Add(str)
		}
	}
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJFZERTQSJ9..")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := v.Verify(tok)
		checkVerified(t, tok, c, err)
	})
}

// FuzzVerifyTampered changes one byte of a valid admit token. A tampered
// token must be refused, or, where the change does not alter the decoded
// bytes (base64's unused trailing bits), yield exactly the original claims:
// no change to a token can move it to another account, event or limit.
func FuzzVerifyTampered(f *testing.F) {
	s := NewSigner(fuzzKey)
	v := NewVerifierFromPublicKeys(s.PublicKey())
	tok, err := s.Admit("acct:1", 42, 4, 24*time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	want, err := v.Verify(tok)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint(0), byte('x'))
	f.Add(uint(len(tok)-1), byte('A'))
	f.Add(uint(len(tok)/2), byte('.'))
	f.Fuzz(func(t *testing.T, i uint, b byte) {
		bs := []byte(tok)
		bs[i%uint(len(bs))] = b
		got, err := v.Verify(string(bs))
		checkVerified(t, string(bs), got, err)
		if err == nil && (got.Subject != want.Subject || got.EventID != want.EventID || got.Max != want.Max ||
			!got.Expiry().Equal(want.Expiry())) {
			t.Fatalf("tampered token %q verified as %+v; want %+v", bs, got, want)
		}
	})
}

// FuzzAdmit is the round trip: whatever the gateway admits (an account id
// as valid UTF-8 text, an event, a limit) the core reads back unchanged,
// and what it cannot represent (no account, event <= 0, max < 0) is
// refused by the verifier rather than read as something else.
func FuzzAdmit(f *testing.F) {
	f.Add("acct:1", int64(42), 4)
	f.Add("vis:AAAAAAAAAAAAAAAAAAAAAA", int64(1), 0)
	f.Add("", int64(1), 0)
	f.Add("acct:1", int64(0), 0)
	f.Add("acct:1", int64(-5), 0)
	f.Add("acct:1", int64(1), -1)
	f.Add("\u2028\"<>&", int64(1<<62), 1<<40)
	s := NewSigner(fuzzKey)
	v := NewVerifierFromPublicKeys(s.PublicKey())
	f.Fuzz(func(t *testing.T, account string, event int64, max int) {
		if !utf8.ValidString(account) {
			return // JSON text carries only valid UTF-8; the gateway's identities are ASCII
		}
		tok, err := s.Admit(account, event, max, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.Verify(tok)
		checkVerified(t, tok, c, err)
		valid := account != "" && event > 0 && max >= 0
		switch {
		case valid && err != nil:
			t.Fatalf("Verify(Admit(%q, %d, %d)) = %v", account, event, max, err)
		case !valid && err == nil:
			t.Fatalf("Verify(Admit(%q, %d, %d)) accepted %+v", account, event, max, c)
		case valid && (c.Subject != account || c.EventID != event || c.Max != max):
			t.Fatalf("Verify(Admit(%q, %d, %d)) = %q, %d, %d", account, event, max, c.Subject, c.EventID, c.Max)
		}
	})
}

// FuzzParseJWKS feeds the key-set parser (what the core reads from the
// gateway's /.well-known/jwks.json) any document. Accepted keys are
// Ed25519 public keys of the right size, at least one; a set NewJWKS
// publishes parses back to the same keys under the same ids.
func FuzzParseJWKS(f *testing.F) {
	pub := fuzzKey.Public().(ed25519.PublicKey)
	b, _ := json.Marshal(NewJWKS(pub))
	f.Add(b)
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(pub[:31]) + `"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","alg":"none","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		keys, err := ParseJWKS(doc)
		if err != nil {
			if keys != nil {
				t.Fatalf("ParseJWKS = %v, %v; want no keys with an error", keys, err)
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("ParseJWKS accepted a set without keys")
		}
		var pubs []ed25519.PublicKey
		for kid, k := range keys {
			if len(k) != ed25519.PublicKeySize || kid == "" {
				t.Fatalf("ParseJWKS: key %q has %d bytes", kid, len(k))
			}
			pubs = append(pubs, k)
		}
		again, _ := json.Marshal(NewJWKS(pubs...))
		back, err := ParseJWKS(again)
		if err != nil || len(back) > len(pubs) {
			t.Fatalf("ParseJWKS(NewJWKS(%d keys)) = %d keys, %v", len(pubs), len(back), err)
		}
		for _, k := range pubs {
			if got := back[KeyID(k)]; !got.Equal(k) {
				t.Fatalf("key %s did not round-trip", KeyID(k))
			}
		}
	})
}
