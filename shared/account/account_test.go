package account

import (
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/shared/admission"
)

func TestVerify(t *testing.T) {
	k, _ := admission.GenerateKey()
	other, _ := admission.GenerateKey()
	s, so := NewSigner(k), NewSigner(other)
	v := NewVerifier(map[string]ed25519.PublicKey{admission.KeyID(s.PublicKey()): s.PublicKey()})

	good, _, err := s.Account("42", true, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expired, _, _ := s.Account("42", true, -time.Second)
	foreign, _, _ := so.Account("42", true, time.Hour)
	otherAud, _ := s.Sign(jwt.RegisteredClaims{Issuer: Issuer, Audience: jwt.ClaimStrings{"onsale-hold"}, Subject: "42",
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
	noSub, _ := s.Sign(Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: Issuer, Audience: jwt.ClaimStrings{Audience},
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	noExp, _ := s.Sign(Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: Issuer, Audience: jwt.ClaimStrings{Audience}, Subject: "42"}})
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: Issuer,
		Audience: jwt.ClaimStrings{Audience}, Subject: "42", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).
		SignedString([]byte(s.PublicKey()))

	for _, tc := range []struct {
		name, token string
		want        error
	}{
		{"good", good, nil},
		{"expired", expired, ErrExpired},
		{"unknown key", foreign, ErrInvalid},
		{"another audience", otherAud, ErrInvalid},
		{"no subject", noSub, ErrInvalid},
		{"no expiry", noExp, ErrInvalid},
		{"hs256 with the public key", hs, ErrInvalid},
		{"garbage", "x.y.z", ErrInvalid},
		{"empty", "", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(tc.token)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tc.want)
			}
			if err == nil && (c.Identity() != "acct:42" || !c.PhoneVerified) {
				t.Fatalf("claims = %+v", c)
			}
		})
	}
	if AccountOf("acct:42") != "42" || AccountOf("vis:abc") != "" {
		t.Fatal("AccountOf")
	}
}
