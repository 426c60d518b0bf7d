package ticket

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// StaffAudience is the aud of staff tokens: they open the gate's API and
// nothing else (the core's other tokens have other audiences).
const StaffAudience = "onsale-gate"

// StaffClaims are a staff token's claims: sub "staff:<name>", the venue
// and the gate the steward scans at.
type StaffClaims struct {
	jwt.RegisteredClaims
	Venue int64  `json:"venue"`
	Gate  string `json:"gate"`
}

// StaffToken mints a staff token for s with the core's signing key, valid
// for ttl.
func StaffToken(signer *account.Signer, s core.Staff, ttl time.Duration) (string, time.Time, error) {
	if err := s.Validate(); err != nil {
		return "", time.Time{}, err
	}
	now := time.Now()
	exp := now.Add(ttl)
	tok, err := signer.Sign(StaffClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: account.Issuer, Audience: jwt.ClaimStrings{StaffAudience}, Subject: core.StaffPrefix + s.Name,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
		},
		Venue: s.Venue, Gate: s.Gate,
	})
	return tok, exp, err
}

// StaffVerifier checks staff tokens.
type StaffVerifier struct{ v *account.Verifier }

// NewStaffVerifier trusts staff tokens signed by the core's signing key pub.
func NewStaffVerifier(pub ed25519.PublicKey) *StaffVerifier {
	return &StaffVerifier{v: account.NewVerifierFor(StaffAudience, map[string]ed25519.PublicKey{admission.KeyID(pub): pub})}
}

// Errors of StaffVerifier.Verify besides account.ErrExpired.
var ErrStaffInvalid = errors.New("staff token invalid")

// Verify returns a staff token's steward, or account.ErrExpired, or
// ErrStaffInvalid.
func (v *StaffVerifier) Verify(token string) (core.Staff, error) {
	var c StaffClaims
	if err := v.v.Parse(token, &c); err != nil {
		if errors.Is(err, account.ErrExpired) {
			return core.Staff{}, err
		}
		return core.Staff{}, ErrStaffInvalid
	}
	name, ok := strings.CutPrefix(c.Subject, core.StaffPrefix)
	s := core.Staff{Name: name, Venue: c.Venue, Gate: c.Gate}
	if !ok || s.Validate() != nil {
		return core.Staff{}, ErrStaffInvalid
	}
	return s, nil
}
