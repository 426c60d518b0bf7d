// Package token mints and checks the core's own bearer tokens, all keyed
// by the core's one Ed25519 key (ONSALE_SIGNING_KEY), each kind under its
// own audience so one is never accepted as another: the account token
// (shared/account, aud "onsale"), a hold's grant (aud "onsale-hold") and a
// ticket link (aud "onsale-tickets"). Principal turns any of them into the
// core.Principal the authorization rules (core/principal.go) judge.
//
// Account tokens and ticket links are Ed25519 signatures: others verify
// them with the JWKS. A hold's grant is an HMAC-SHA256 (HS256) under a key
// derived from the signing key: only the cores ever verify a grant, and
// one is minted with every hold answer, where an Ed25519 signature was the
// largest CPU cost of the core's own work on a hold (about a fifth of it).
// Grants signed with Ed25519 before that change are still accepted.
package token

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// Audiences of the core's tokens besides the account token's.
const (
	HoldAudience   = "onsale-hold"
	TicketAudience = "onsale-tickets"
)

// HoldClaims are a hold grant's claims: sub is the hold owner's identity.
type HoldClaims struct {
	jwt.RegisteredClaims
	Hold  string `json:"hold"`
	Event int64  `json:"evt"`
}

// TicketClaims are a ticket link's claims: sub is the booking owner's
// identity.
type TicketClaims struct {
	jwt.RegisteredClaims
	Booking int64 `json:"bkg"`
}

// Keys signs and verifies the core's tokens with one key.
type Keys struct {
	signer            *account.Signer
	accounts, tickets *account.Verifier
	operators         *account.Verifier
	codeKey           []byte

	// Hold grants: MACed with grantKey under grantKID; grants accepts
	// HS256 with that key and, for grants minted before they were MACed,
	// EdDSA with the public keys (keyFor picks the key by the method, so
	// neither key is ever tried with the other's algorithm).
	grantKey    []byte
	grantKID    string
	grantHeader []byte // the grants' JOSE header, base64url-encoded
	pubs        map[string]ed25519.PublicKey
	grants      *jwt.Parser
}

// New returns Keys for the core's private key.
func New(priv ed25519.PrivateKey) *Keys {
	pub := priv.Public().(ed25519.PublicKey)
	keys := map[string]ed25519.PublicKey{admission.KeyID(pub): pub}
	// The sign-in codes' HMAC key is derived from the signing key: every
	// core sharing the key verifies the others' codes, and no second
	// secret is needed.
	ck := sha256.Sum256(append([]byte("onsale sign-in codes\x00"), priv.Seed()...))
	// The grants' MAC key likewise: every core sharing the signing key
	// verifies the others' grants. Its id names the key it derives from.
	gk := sha256.Sum256(append([]byte("onsale hold grants\x00"), priv.Seed()...))
	kid := "hs-" + admission.KeyID(pub)
	hdr, _ := json.Marshal(map[string]string{"alg": jwt.SigningMethodHS256.Alg(), "kid": kid, "typ": "JWT"})
	return &Keys{
		signer:      account.NewSigner(priv),
		accounts:    account.NewVerifier(keys),
		tickets:     account.NewVerifierFor(TicketAudience, keys),
		operators:   account.NewVerifierFor(account.OperatorAudience, keys),
		codeKey:     ck[:],
		grantKey:    gk[:],
		grantKID:    kid,
		grantHeader: base64.RawURLEncoding.AppendEncode(nil, hdr),
		pubs:        keys,
		grants: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg(), jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithAudience(HoldAudience), jwt.WithIssuer(account.Issuer), jwt.WithExpirationRequired(),
		),
	}
}

// PublicKey is the key that verifies every token the core signs (its
// JWKS): all but the hold grants, which only the cores verify.
func (k *Keys) PublicKey() ed25519.PublicKey { return k.signer.PublicKey() }

// JWKS is the core's public key set.
func (k *Keys) JWKS() admission.JWKS { return admission.NewJWKS(k.PublicKey()) }

// CodeKey is the HMAC key of sign-in codes (core.CodeHash).
func (k *Keys) CodeKey() []byte { return k.codeKey }

// Account mints an account token (phone verified) for account id.
func (k *Keys) Account(id int64, ttl time.Duration) (string, time.Time, error) {
	return k.signer.Account(strconv.FormatInt(id, 10), true, ttl)
}

func registered(aud, sub string, exp time.Time) jwt.RegisteredClaims {
	return jwt.RegisteredClaims{Issuer: account.Issuer, Audience: jwt.ClaimStrings{aud}, Subject: sub,
		IssuedAt: jwt.NewNumericDate(time.Now()), ExpiresAt: jwt.NewNumericDate(exp)}
}

// HoldGrant mints the grant of hold h: its owner may act on it until
// core.HoldGrantAfterStart after the show starts. It is MACed (HS256), not
// signed: see the package comment.
// The JWT is assembled here rather than by jwt.Token.SignedString, whose
// header map encoding cost more than the MAC; parseGrant reads it with the
// jwt package like any other.
func (k *Keys) HoldGrant(h *core.Hold) (string, error) {
	exp := h.EventStartsAt.Add(core.HoldGrantAfterStart)
	claims, err := json.Marshal(HoldClaims{RegisteredClaims: registered(HoldAudience, h.Account, exp), Hold: h.ID, Event: h.EventID})
	if err != nil {
		return "", fmt.Errorf("sign hold grant: %w", err)
	}
	enc := base64.RawURLEncoding
	tok := make([]byte, 0, len(k.grantHeader)+1+enc.EncodedLen(len(claims))+1+enc.EncodedLen(sha256.Size))
	tok = append(tok, k.grantHeader...)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, claims)
	mac := hmac.New(sha256.New, k.grantKey)
	mac.Write(tok)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, mac.Sum(nil))
	return string(tok), nil
}

// parseGrant verifies a hold grant into c: HS256 under the grants' key, or
// EdDSA under the core's public key (a grant minted before grants were
// MACed). It returns ErrExpired or an error wrapping ErrInvalid.
func (k *Keys) parseGrant(tok string, c *HoldClaims) error {
	_, err := k.grants.ParseWithClaims(tok, c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		switch t.Method.(type) {
		case *jwt.SigningMethodHMAC:
			if kid == k.grantKID {
				return k.grantKey, nil
			}
		case *jwt.SigningMethodEd25519:
			if pub, ok := k.pubs[kid]; ok {
				return pub, nil
			}
		}
		return nil, fmt.Errorf("unknown key %q for %s", kid, t.Method.Alg())
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	case err != nil:
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	case c.Subject == "":
		return fmt.Errorf("%w: no sub", ErrInvalid)
	}
	return nil
}

// TicketLink mints the link token of booking b: it reads the booking until
// core.TicketLinkAfterStart after the show starts (startsAt).
func (k *Keys) TicketLink(b *core.Booking, startsAt time.Time) (string, error) {
	exp := startsAt.Add(core.TicketLinkAfterStart)
	return k.signer.Sign(TicketClaims{RegisteredClaims: registered(TicketAudience, b.Account, exp), Booking: b.ID})
}

// Operator mints an operator's session token.
func (k *Keys) Operator(name, role string, ttl time.Duration) (string, time.Time, error) {
	return k.signer.Operator(name, role, ttl)
}

// Errors of Principal.
var (
	ErrInvalid = account.ErrInvalid
	ErrExpired = account.ErrExpired
	// ErrNotOurs: the token is not one of the core's (another audience,
	// e.g. an admit token): the caller tries its other verifiers.
	ErrNotOurs = errors.New("not a core token")
)

// Principal verifies one of the core's tokens. It returns ErrNotOurs for a
// token whose audience is none of the core's, ErrExpired, or an error
// wrapping ErrInvalid. The audience is read unverified only to pick the
// verifier, which then checks everything, the audience included.
func (k *Keys) Principal(tok string) (*core.Principal, error) {
	switch audience(tok) {
	case account.Audience:
		c, err := k.accounts.Verify(tok)
		if err != nil {
			return nil, err
		}
		if !c.PhoneVerified {
			return nil, ErrInvalid
		}
		return &core.Principal{Kind: core.PrincipalAccount, Identity: c.Identity(), AccountID: c.Subject}, nil
	case HoldAudience:
		var c HoldClaims
		if err := k.parseGrant(tok, &c); err != nil {
			return nil, err
		}
		if c.Hold == "" || c.Event <= 0 {
			return nil, ErrInvalid
		}
		return &core.Principal{Kind: core.PrincipalHoldGrant, Identity: c.Subject, HoldID: c.Hold, EventID: c.Event}, nil
	case TicketAudience:
		var c TicketClaims
		if err := k.tickets.Parse(tok, &c); err != nil {
			return nil, err
		}
		if c.Booking <= 0 {
			return nil, ErrInvalid
		}
		return &core.Principal{Kind: core.PrincipalTicketLink, Identity: c.Subject, Booking: c.Booking}, nil
	case account.OperatorAudience:
		var c account.OperatorClaims
		if err := k.operators.Parse(tok, &c); err != nil {
			return nil, err
		}
		p := &core.Principal{Kind: core.PrincipalOperator, Identity: core.OperatorPrefix + c.Subject, Operator: c.Subject}
		if c.IssuedAt != nil {
			p.IssuedAt = c.IssuedAt.Time
		}
		return p, nil
	}
	return nil, ErrNotOurs
}

// audience reads a token's one audience without verifying it.
func audience(tok string) string {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil || len(c.Audience) != 1 {
		return ""
	}
	return c.Audience[0]
}
