package token

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/shared/admission"
)

func TestQueueToken(t *testing.T) {
	s, err := NewQueueSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewQueueSigner([]byte(strings.Repeat("x", 32)))
	tok, _ := s.Sign(7, "vis:abc", 42, 0, "e1")
	q, err := s.Verify(tok, 7)
	if err != nil || q.Position != 42 || q.Identity() != "vis:abc" {
		t.Fatalf("Verify = %+v, %v", q, err)
	}
	forged, _ := other.Sign(7, "vis:abc", 1, 0, "e1")
	parts := strings.Split(tok, ".")
	tampered := parts[0] + "." + strings.ReplaceAll(parts[1], "A", "B") + "." + parts[2]
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:abc", ExpiresAt: jwt.NewNumericDate(time.Now().Add(-time.Minute))}, Event: 7}).SignedString([]byte(strings.Repeat("k", 32)))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:abc", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}, Event: 7, Position: 1}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	key, _ := admission.GenerateKey()
	eddsa, _ := admission.NewSigner(key).Sign(admission.Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:abc", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}})
	tests := []struct {
		name, tok string
		event     int64
		want      error
	}{
		{"other secret", forged, 7, ErrInvalid},
		{"tampered", tampered, 7, ErrInvalid},
		{"expired", expired, 7, ErrExpired},
		{"wrong event", tok, 8, ErrInvalid},
		{"alg none", none, 7, ErrInvalid},
		{"wrong algorithm (EdDSA)", eddsa, 7, ErrInvalid},
		{"garbage", "a.b.c", 7, ErrInvalid},
	}
	for _, tc := range tests {
		if _, err := s.Verify(tc.tok, tc.event); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v; want %v", tc.name, err, tc.want)
		}
	}
	if _, err := NewQueueSigner([]byte("short")); err == nil {
		t.Error("a short secret was accepted")
	}
}

func TestRing(t *testing.T) {
	cur, _ := admission.GenerateKey()
	prev, _ := admission.GenerateKey()
	r, err := NewRing(cur, prev)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admission.ParseJWKS(mustJSON(r.JWKS()))
	if err != nil || len(keys) != 2 {
		t.Fatalf("JWKS has %d keys, %v; want both keys of the rotation", len(keys), err)
	}
	v := admission.NewVerifier(keys)
	tok, _ := r.Admit("acct:1", 9, time.Now().Add(10*time.Minute), 6)
	c, err := v.Verify(tok)
	if err != nil || c.EventID != 9 || c.Account() != "acct:1" || c.Max != 6 {
		t.Fatalf("admit token = %+v, %v", c, err)
	}
	// A token from the previous key still verifies during the rotation.
	old, _ := admission.NewSigner(prev).Admit("acct:2", 9, 0, time.Minute)
	if _, err := v.Verify(old); err != nil {
		t.Fatalf("token of the previous key: %v", err)
	}
}

// A verified token is cached: polling again with it gives the same claims
// (each caller its own copy), a different event is still refused, and a
// cached token stops passing once it expires.
func TestQueueTokenCache(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	s, _ := NewQueueSigner(secret)
	tok, _ := s.Sign(7, "vis:abc", 42, 0, "e1")
	a, err := s.Verify(tok, 7)
	if err != nil {
		t.Fatal(err)
	}
	a.Position = 1 // the status handler changes its copy
	b, err := s.Verify(tok, 7)
	if err != nil || b.Position != 42 {
		t.Fatalf("second Verify = %+v, %v; want the cached claims, unchanged", b, err)
	}
	if _, err := s.Verify(tok, 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cached token for another event = %v; want ErrInvalid", err)
	}
	short, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:abc", ExpiresAt: jwt.NewNumericDate(time.Now().Add(1100 * time.Millisecond))}, Event: 7, Position: 3}).SignedString(secret)
	if _, err := s.Verify(short, 7); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if _, err := s.Verify(short, 7); !errors.Is(err, ErrExpired) {
		t.Fatalf("cached token after its expiry = %v; want ErrExpired", err)
	}
}

// A visitor cookie is good only as a gateway minted it: under the same
// secret, unchanged; anything a client makes up is refused.
func TestVisitor(t *testing.T) {
	s, _ := NewQueueSigner([]byte(strings.Repeat("k", 32)))
	other, _ := NewQueueSigner([]byte(strings.Repeat("x", 32)))
	id, cookie := s.NewVisitor()
	if got, ok := s.Visitor(cookie); !ok || got != id || len(id) != visitorIDLen {
		t.Fatalf("Visitor(minted) = %q, %v; want %q", got, ok, id)
	}
	_, foreign := other.NewVisitor()
	mac := cookie[strings.IndexByte(cookie, '.')+1:]
	chosen := "chosen-by-the-client-00"
	for _, tc := range []struct{ name, cookie string }{
		{"empty", ""},
		{"unsigned (an old cookie)", id},
		{"chosen id, no mac", chosen},
		{"chosen id with another id's mac", chosen + "." + mac},
		{"minted id, mac changed", id + "." + strings.ToUpper(mac)},
		{"mac of another secret", foreign},
		{"minted id, empty mac", id + "."},
		{"extra part", cookie + ".x"},
	} {
		if got, ok := s.Visitor(tc.cookie); ok {
			t.Errorf("Visitor(%s %q) = %q, true; want refused", tc.name, tc.cookie, got)
		}
	}
	if a, _ := s.NewVisitor(); a == id {
		t.Error("two visitors minted the same id")
	}
}
