package admission

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func newKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	k, err := GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// claims are raw claims, so a test can put any value in evt (a number, a
// non-numeric string) that Claims itself could not carry.
func claims(aud string, evt any, sub string, exp time.Time) jwt.MapClaims {
	c := jwt.MapClaims{"iss": Issuer, "aud": []string{aud}, "sub": sub,
		"iat": time.Now().Unix(), "exp": exp.Unix()}
	if evt != nil {
		c["evt"] = evt
	}
	return c
}

func TestVerify(t *testing.T) {
	key, other := newKey(t), newKey(t)
	s, so := NewSigner(key), NewSigner(other)
	v := NewVerifierFromPublicKeys(s.PublicKey())
	future := time.Now().Add(time.Hour)

	good, err := s.Admit("acct-1", 42, 4, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	signed := func(c jwt.MapClaims) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
		tk.Header["kid"] = s.KeyID()
		tok, err := tk.SignedString(key)
		if err != nil {
			panic(err)
		}
		return tok
	}
	// alg=none: header {"alg":"none"}, no signature.
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(Audience, "42", "a", future)).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// HS256 keyed with the public key bytes: the classic algorithm-confusion forgery.
	hsTok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(Audience, "42", "a", future))
	hsTok.Header["kid"] = s.KeyID()
	hs, err := hsTok.SignedString([]byte(s.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	tamperedPayload := parts[0] + "." + strings.TrimSuffix(parts[1], parts[1][len(parts[1])-2:]) + "xx." + parts[2]
	foreign, _ := so.Admit("acct-1", 42, 0, time.Hour)

	tests := []struct {
		name  string
		token string
		want  error
	}{
		{"missing", "", ErrMissing},
		{"garbage", "not.a.jwt", ErrInvalid},
		{"expired", signed(claims(Audience, "42", "a", time.Now().Add(-time.Second))), ErrExpired},
		{"alg none", none, ErrInvalid},
		{"hs256 with public key", hs, ErrInvalid},
		{"wrong audience", signed(claims("someone-else", "42", "a", future)), ErrInvalid},
		{"good, raw", signed(claims(Audience, "42", "a", future)), nil},
		{"no event", signed(claims(Audience, nil, "a", future)), ErrInvalid},
		{"empty event", signed(claims(Audience, "", "a", future)), ErrInvalid},
		{"event not a number", signed(claims(Audience, "42abc", "a", future)), ErrInvalid},
		{"event zero", signed(claims(Audience, "0", "a", future)), ErrInvalid},
		{"event negative", signed(claims(Audience, "-7", "a", future)), ErrInvalid},
		{"event as a JSON number", signed(claims(Audience, 42, "a", future)), ErrInvalid},
		{"no subject", signed(claims(Audience, "42", "", future)), ErrInvalid},
		{"tampered payload", tamperedPayload, ErrInvalid},
		{"unknown key", foreign, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(tc.token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, %v; want %v", c, err, tc.want)
			}
		})
	}

	c, err := v.Verify(good)
	if err != nil {
		t.Fatalf("Verify(good) = %v", err)
	}
	if c.Account() != "acct-1" || c.EventID != 42 || c.Max != 4 {
		t.Fatalf("claims = %+v", c)
	}
	// A cached token still expires.
	v.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := v.Verify(good); !errors.Is(err, ErrExpired) {
		t.Fatalf("Verify(cached, after exp) = %v; want ErrExpired", err)
	}
	v.now = time.Now
	// Withdrawing the key drops cached verifications.
	v.SetKeys(map[string]ed25519.PublicKey{so.KeyID(): so.PublicKey()})
	if _, err := v.Verify(good); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Verify after key withdrawn = %v; want ErrInvalid", err)
	}
}

func TestJWKSRotation(t *testing.T) {
	k1, k2 := NewSigner(newKey(t)), NewSigner(newKey(t))
	body, _ := json.Marshal(NewJWKS(k1.PublicKey(), k2.PublicKey()))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	defer srv.Close()
	keys, err := FetchJWKS(context.Background(), srv.Client(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(keys)
	for _, s := range []*Signer{k1, k2} {
		tok, _ := s.Admit("a", 1, 0, time.Minute)
		if _, err := v.Verify(tok); err != nil {
			t.Errorf("token by %s: %v", s.KeyID(), err)
		}
	}
	if _, err := ParseJWKS([]byte(`{"keys":[{"kty":"RSA","n":"x","e":"AQAB"}]}`)); err == nil {
		t.Error("ParseJWKS accepted a set without Ed25519 keys")
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t)
	if err := WritePrivateKeyFile(dir+"/k", k); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKeyFile(dir+"/k.pub", k.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	priv, err := ReadPrivateKeyFile(dir + "/k")
	if err != nil || !priv.Equal(k) {
		t.Fatalf("ReadPrivateKeyFile = %v", err)
	}
	pub, err := ReadPublicKeyFile(dir + "/k.pub")
	if err != nil || !pub.Equal(k.Public()) {
		t.Fatalf("ReadPublicKeyFile = %v", err)
	}
}
