package admission

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Signer mints admit tokens with one Ed25519 key; the key id goes in the
// header so verifiers can hold several keys during a rotation.
type Signer struct {
	priv ed25519.PrivateKey
	kid  string
}

// NewSigner returns a Signer for priv.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	return &Signer{priv: priv, kid: KeyID(priv.Public().(ed25519.PublicKey))}
}

// KeyID returns the kid this signer puts in token headers.
func (s *Signer) KeyID() string { return s.kid }

// PublicKey returns the verifying half of the signer's key.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Admit mints a token admitting account to event for ttl, with ticket limit max
// (0 leaves the event's own limit).
func (s *Signer) Admit(account string, event int64, max int, ttl time.Duration) (string, error) {
	now := time.Now()
	return s.Sign(Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Audience:  jwt.ClaimStrings{Audience},
			Subject:   account,
			ID:        newJTI(),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		EventID: event,
		Max:     max,
	})
}

// Sign signs arbitrary claims; callers other than Admit are tests and tools.
func (s *Signer) Sign(c Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = s.kid
	tok, err := t.SignedString(s.priv)
	if err != nil {
		return "", fmt.Errorf("sign admit token: %w", err)
	}
	return tok, nil
}

func newJTI() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
