// Package account holds the account token: the core signs it when a fan
// proves a phone number with a one-time code, and both the gateway (who may
// join a queue) and the core (whose holds and bookings a fan may read and
// pay) verify it. EdDSA only, with the core's own key, published as a JWKS
// (shared/admission's JWK helpers: the same Ed25519 key format).
package account

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/shared/admission"
)

// Issuer is the iss claim of every account token: the booking core.
const Issuer = "onsale-core"

// Audience is the aud claim of an account token: onsale's gateways and
// cores. The core signs other tokens with the same key under other
// audiences (a hold's grant, a ticket link, a gate's staff token), so a
// token of one kind is never accepted as another.
const Audience = "onsale"

// IdentityPrefix starts the identity a signed-in fan has in the queue, in
// admit tokens and on holds and bookings: "acct:" and the account id.
const IdentityPrefix = "acct:"

// Claims are an account token's claims: Subject is the account id (a
// decimal string), PhoneVerified that the fan proved the phone by a code.
type Claims struct {
	jwt.RegisteredClaims
	PhoneVerified bool `json:"phone_verified"`
}

// Identity is the account's identity in the queue, in admit tokens and on
// holds and bookings.
func (c *Claims) Identity() string { return IdentityPrefix + c.Subject }

// AccountOf returns the account id of an identity, or "" for an identity
// that is not an account's (a visitor's).
func AccountOf(identity string) string {
	id, ok := strings.CutPrefix(identity, IdentityPrefix)
	if !ok {
		return ""
	}
	return id
}

// Errors returned by Verify.
var (
	ErrInvalid = errors.New("account token invalid")
	ErrExpired = errors.New("account token expired")
)

// Signer mints account tokens with one Ed25519 key (its kid in the header).
type Signer struct {
	priv ed25519.PrivateKey
	kid  string
}

// NewSigner returns a Signer for priv.
func NewSigner(priv ed25519.PrivateKey) *Signer {
	return &Signer{priv: priv, kid: admission.KeyID(priv.Public().(ed25519.PublicKey))}
}

// PublicKey returns the verifying half of the key, for the JWKS.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }

// Account mints an account token for account id, valid for ttl.
func (s *Signer) Account(id string, phoneVerified bool, ttl time.Duration) (string, time.Time, error) {
	now := time.Now()
	exp := now.Add(ttl)
	tok, err := s.Sign(Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Audience: jwt.ClaimStrings{Audience}, Subject: id,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
		},
		PhoneVerified: phoneVerified,
	})
	return tok, exp, err
}

// Sign signs any claims with the key: the core's other tokens (each with
// its own audience) use it too.
func (s *Signer) Sign(c jwt.Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = s.kid
	tok, err := t.SignedString(s.priv)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return tok, nil
}

// Verifier checks account tokens: EdDSA pinned, a known kid, iss
// onsale-core, aud onsale, exp required, a non-empty sub. Safe for
// concurrent use; it implements admission.KeySet for JWKS refresh.
type Verifier struct {
	keys   *atomic.Pointer[map[string]ed25519.PublicKey]
	parser *jwt.Parser
}

// NewVerifier returns a Verifier trusting keys (by kid).
func NewVerifier(keys map[string]ed25519.PublicKey) *Verifier {
	return NewVerifierFor(Audience, keys)
}

// NewVerifierFor verifies the core's tokens of another audience with the
// same rules (the core's own grants and links).
func NewVerifierFor(audience string, keys map[string]ed25519.PublicKey) *Verifier {
	v := &Verifier{keys: new(atomic.Pointer[map[string]ed25519.PublicKey]), parser: parser(audience)}
	v.SetKeys(keys)
	return v
}

func parser(audience string) *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithAudience(audience), jwt.WithIssuer(Issuer), jwt.WithExpirationRequired(),
	)
}

// Sibling returns a Verifier of the core's tokens of another audience
// (an operator's token beside account tokens) that trusts v's keys, now
// and after every SetKeys on either: one JWKS refresh keeps both.
func (v *Verifier) Sibling(audience string) *Verifier {
	return &Verifier{keys: v.keys, parser: parser(audience)}
}

// Keys returns the trusted keys (not to be modified).
func (v *Verifier) Keys() map[string]ed25519.PublicKey { return *v.keys.Load() }

// SetKeys replaces the trusted keys.
func (v *Verifier) SetKeys(keys map[string]ed25519.PublicKey) {
	cp := make(map[string]ed25519.PublicKey, len(keys))
	for k, p := range keys {
		cp[k] = p
	}
	v.keys.Store(&cp)
}

// Verify returns an account token's claims, or ErrExpired, or an error
// wrapping ErrInvalid.
func (v *Verifier) Verify(token string) (*Claims, error) {
	c := new(Claims)
	if err := v.Parse(token, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse verifies token into claims c (any jwt.Claims): for the core's
// other tokens. A token without a subject is invalid.
func (v *Verifier) Parse(token string, c jwt.Claims) error {
	_, err := v.parser.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, ok := v.Keys()[kid]
		if !ok {
			return nil, fmt.Errorf("unknown kid %q", kid)
		}
		return k, nil
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case err != nil:
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if sub, _ := c.GetSubject(); sub == "" {
		return fmt.Errorf("%w: no sub", ErrInvalid)
	}
	return nil
}

// OperatorAudience is the aud claim of an operator's session token: the
// core signs it when an operator signs in with name and password; the core
// (every operators' route) and the gateway (the console's dials and live
// view) verify it with the same keys as account tokens.
const OperatorAudience = "onsale-operator"

// Operator mints an operator's session token for name with role, valid
// for ttl (the core at sign-in; a local stack for its own operator).
func (s *Signer) Operator(name, role string, ttl time.Duration) (string, time.Time, error) {
	now := time.Now()
	exp := now.Add(ttl)
	tok, err := s.Sign(OperatorClaims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer: Issuer, Audience: jwt.ClaimStrings{OperatorAudience}, Subject: name,
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}, Role: role})
	return tok, exp, err
}

// OperatorClaims are an operator token's claims: Subject is the operator's
// name, Role the role at sign-in. The core reads the operator's current
// role and state from its database on every request; the gateway trusts
// the role in the token for its reads and asks the core for every change.
type OperatorClaims struct {
	jwt.RegisteredClaims
	Role string `json:"role"`
}
