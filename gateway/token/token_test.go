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

// Each caller gets its own copy of the claims (the status handler changes
// its copy), a token for another event is refused, and a token stops
// passing once it expires.
func TestQueueTokenCopiesAndExpiry(t *testing.T) {
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
		t.Fatalf("second Verify = %+v, %v; want the claims, unchanged", b, err)
	}
	if _, err := s.Verify(tok, 8); !errors.Is(err, ErrInvalid) {
		t.Fatalf("token for another event = %v; want ErrInvalid", err)
	}
	short, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway",
		Subject: "vis:abc", ExpiresAt: jwt.NewNumericDate(time.Now().Add(1100 * time.Millisecond))}, Event: 7, Position: 3}).SignedString(secret)
	if _, err := s.Verify(short, 7); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if _, err := s.Verify(short, 7); !errors.Is(err, ErrExpired) {
		t.Fatalf("token after its expiry = %v; want ErrExpired", err)
	}
}

// The fast path (fast.go) reads every token Sign makes, and agrees with
// the JWT library on the tokens it reads; claims it does not read go to
// the library, whose verdict Verify then gives. The control: the tokens
// the fast path must hand on really are handed on (errNotFast), so the
// comparison is not of the library with itself.
func TestQueueTokenFastPath(t *testing.T) {
	secret := []byte(strings.Repeat("k", 32))
	s, _ := NewQueueSigner(secret)
	now := time.Now()
	sign := func(claims jwt.Claims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	rc := func(sub string, exp time.Time) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Issuer: "onsale-gateway", Subject: sub, ID: "id1", IssuedAt: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp)}
	}
	signed := func(ev int64, id string, pos, adm int64, ep string) string {
		tok, _ := s.Sign(ev, id, pos, adm, ep)
		return tok
	}
	fast := []struct{ name, tok string }{
		{"waiting", signed(7, "vis:AAAAAAAAAAAAAAAAAAAAAA", 42, 0, "e1")},
		{"pre-queue", signed(7, "acct:9", 0, 0, "")},
		{"admitted", signed(7, "acct:9", 3, now.Add(time.Minute).UnixMilli(), "e1")},
		{"session over", signed(7, "acct:9", 3, now.Add(-time.Minute).UnixMilli(), "e1")},
		{"negative place", signed(7, "acct:9", -1, 0, "e1")},
		{"no identity", signed(7, "", 4, 0, "e1")},
		{"expired", sign(Queue{RegisteredClaims: rc("vis:abc", now.Add(-time.Minute)), Event: 7, Position: 1})},
		{"another issuer", sign(Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "someone", Subject: "vis:abc",
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}, Event: 7, Position: 1})},
		{"no expiry", sign(Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway", Subject: "vis:abc"}, Event: 7, Position: 1})},
	}
	handedOn := []struct{ name, tok string }{
		{"escaped identity", signed(7, "vis:<b>&\"", 42, 0, "e1")},
		{"not before, ahead", sign(Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway", Subject: "vis:abc",
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(time.Minute))}, Event: 7, Position: 1})},
		{"audience", sign(Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: "onsale-gateway", Subject: "vis:abc", Audience: jwt.ClaimStrings{"x"},
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour))}, Event: 7, Position: 1})},
		{"fractional expiry", sign(jwt.MapClaims{"iss": "onsale-gateway", "sub": "vis:abc", "exp": float64(now.Unix()) + 3600.5, "evt": 7, "pos": 1})},
		{"upper-case key", sign(jwt.MapClaims{"ISS": "onsale-gateway", "sub": "vis:abc", "exp": now.Unix() + 3600, "evt": 7, "pos": 1})},
		{"event as a string", sign(jwt.MapClaims{"iss": "onsale-gateway", "sub": "vis:abc", "exp": now.Unix() + 3600, "evt": "7", "pos": 1})},
	}
	check := func(name, tok string) {
		t.Helper()
		got, gerr := s.Verify(tok, 7)
		want, werr := s.verifyJWT(tok)
		if werr == nil && (want.Event != 7 || want.Subject == "" || want.Position < 0) {
			want, werr = nil, ErrInvalid
		}
		if (gerr == nil) != (werr == nil) || errors.Is(gerr, ErrExpired) != errors.Is(werr, ErrExpired) {
			t.Fatalf("%s: Verify = %+v, %v; the library says %+v, %v", name, got, gerr, want, werr)
		}
		if gerr == nil && !sameClaims(got, want) {
			t.Fatalf("%s: Verify = %+v; the library reads %+v", name, got, want)
		}
	}
	for _, tc := range fast {
		if _, err := s.verifyFast(tc.tok, now); errors.Is(err, errNotFast) {
			t.Errorf("%s: the fast path handed on a token as Sign writes it", tc.name)
		}
		check(tc.name, tc.tok)
	}
	for _, tc := range handedOn {
		if _, err := s.verifyFast(tc.tok, now); !errors.Is(err, errNotFast) {
			t.Errorf("%s: the fast path read claims it should hand on: %v", tc.name, err)
		}
		check(tc.name, tc.tok)
	}
}

func sameClaims(a, b *Queue) bool {
	date := func(d *jwt.NumericDate) int64 {
		if d == nil {
			return -1
		}
		return d.UnixNano()
	}
	return a.Issuer == b.Issuer && a.Subject == b.Subject && a.ID == b.ID && a.Event == b.Event && a.Position == b.Position &&
		a.Admitted == b.Admitted && a.Epoch == b.Epoch && date(a.ExpiresAt) == date(b.ExpiresAt) && date(a.IssuedAt) == date(b.IssuedAt) &&
		date(a.NotBefore) == date(b.NotBefore) && len(a.Audience) == len(b.Audience)
}

// A poll's check costs one allocation (the claims the caller gets) and no
// state kept per token: the gateway's memory does not grow with the fans.
func TestQueueVerifyAllocs(t *testing.T) {
	s, _ := NewQueueSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(7, "vis:AAAAAAAAAAAAAAAAAAAAAA", 42, 0, "e1")
	if n := testing.AllocsPerRun(100, func() { s.Verify(tok, 7) }); n > 2 && !race {
		t.Fatalf("Verify allocates %v times a poll; want at most 2 (the claims and their strings)", n)
	}
}

func BenchmarkQueueVerify(b *testing.B) {
	s, _ := NewQueueSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(7, "vis:AAAAAAAAAAAAAAAAAAAAAA", 42, 0, "e1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok, 7); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkQueueVerifyJWT(b *testing.B) {
	s, _ := NewQueueSigner([]byte(strings.Repeat("k", 32)))
	tok, _ := s.Sign(7, "vis:AAAAAAAAAAAAAAAAAAAAAA", 42, 0, "e1")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.verifyJWT(tok); err != nil {
			b.Fatal(err)
		}
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
