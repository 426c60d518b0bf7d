// Package admission holds the admit token that the gateway signs and the
// core verifies: its claims, the Ed25519 keys that sign it, and a verifier
// pinned to EdDSA. Both services import it so they agree on every claim.
package admission

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Audience is the aud claim of every admit token: the booking core.
const Audience = "onsale-core"

// Issuer is the iss claim the gateway puts in admit tokens.
const Issuer = "onsale-gateway"

// Claims are the claims of an admit token. Subject is the account, EventID
// the event the holder was admitted to, Max the holder's ticket limit (0: the
// event's own limit applies).
//
// On the wire evt is the event id as a decimal string ("42"); the verifier
// parses it once and refuses a token whose evt is not a positive integer, so
// callers compare int64s and never parse it again.
type Claims struct {
	jwt.RegisteredClaims
	EventID int64 `json:"evt,string"`
	Max     int   `json:"max,omitempty"`
}

// Account returns the account the token was issued to.
func (c *Claims) Account() string { return c.Subject }

// Expiry returns the token's expiry, or the zero time when it has none.
func (c *Claims) Expiry() time.Time {
	if c.ExpiresAt == nil {
		return time.Time{}
	}
	return c.ExpiresAt.Time
}

// Errors returned by Verify. ErrExpired is distinct so a client can be told
// to go back through the queue rather than that its token is forged.
var (
	ErrMissing = errors.New("admit token missing")
	ErrInvalid = errors.New("admit token invalid")
	ErrExpired = errors.New("admit token expired")
)
