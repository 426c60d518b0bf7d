// Package ticket signs tickets so a gate scanner can check them offline:
// the QR code carries "t1.<payload>.<signature>", base64url, where the
// payload is the ticket's claims as JSON and the signature is Ed25519 over
// "t1.<payload>" with the core's ticket key (not the admit key: a gate
// trusts only tickets).
package ticket

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/onsale/onsale/core"
)

const prefix = "t1."

// Claims is what a ticket says.
type Claims struct {
	Ticket  string `json:"tid"`
	Booking int64  `json:"bkg"`
	Event   int64  `json:"evt"`
	Seat    string `json:"seat,omitempty"` // empty for general admission
	N       int    `json:"n"`
	Issued  int64  `json:"iat"`
}

// Errors returned by Verify.
var (
	ErrMalformed = errors.New("ticket malformed")
	ErrSignature = errors.New("ticket signature invalid")
)

// Signer signs tickets.
type Signer struct{ key ed25519.PrivateKey }

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey) *Signer { return &Signer{key: key} }

// PublicKey is what gate scanners are given.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// Sign returns the QR payload of c.
func (s *Signer) Sign(c Claims) string {
	b, _ := json.Marshal(c)
	msg := prefix + base64.RawURLEncoding.EncodeToString(b)
	return msg + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(s.key, []byte(msg)))
}

// SignTickets returns a booking's tickets with their signed payloads.
func (s *Signer) SignTickets(b *core.Booking) []core.Ticket {
	out := make([]core.Ticket, len(b.Tickets))
	for i, t := range b.Tickets {
		t.Payload = s.Sign(Claims{Ticket: t.ID, Booking: b.ID, Event: t.EventID, Seat: t.Seat, N: t.N, Issued: b.CreatedAt.Unix()})
		out[i] = t
	}
	return out
}

// QR is the package's QR, so that a consumer holding a Signer behind an
// interface draws the codes of the tickets it signed.
func (s *Signer) QR(payload string, size int) ([]byte, error) { return QR(payload, size) }

// Verify checks a payload against the public key and returns its claims.
func Verify(pub ed25519.PublicKey, payload string) (*Claims, error) {
	payload = strings.TrimSpace(payload)
	i := strings.LastIndexByte(payload, '.')
	if !strings.HasPrefix(payload, prefix) || i <= len(prefix) {
		return nil, ErrMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(payload[i+1:])
	if err != nil {
		return nil, ErrMalformed
	}
	if !ed25519.Verify(pub, []byte(payload[:i]), sig) {
		return nil, ErrSignature
	}
	b, err := base64.RawURLEncoding.DecodeString(payload[len(prefix):i])
	if err != nil {
		return nil, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, ErrMalformed
	}
	return &c, nil
}

// IssuedAt is the claims' issue time.
func (c *Claims) IssuedAt() time.Time { return time.Unix(c.Issued, 0) }

// QR renders a payload as a PNG QR code of size pixels (medium error correction).
func QR(payload string, size int) ([]byte, error) {
	return qrcode.Encode(payload, qrcode.Medium, size)
}
