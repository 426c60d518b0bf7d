// Package ticket signs tickets so a gate scanner can check them offline,
// and draws their QR codes.
//
// A ticket's QR code carries "T2." and, in RFC 4648 base32 without
// padding, its claims (three unsigned varints: event, booking, ticket
// number) followed by the Ed25519 signature of the claims (under the
// domain string "onsale ticket v2\x00") with the core's ticket key (not the
// admit key: a gate trusts only tickets). Uppercase base32 is the QR's
// alphanumeric mode (5.5 bits a character instead of 8), and the claims are
// the fewest that identify the ticket: about 70 bytes in all, a version 5
// QR code at medium error correction (37 modules; the JSON format "t1."
// needed version 11, 61 modules). Verify still reads t1 payloads.
package ticket

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/onsale/onsale/core"
)

// Prefix starts every payload Sign makes ("T2."); Verify also reads the
// older "t1." JSON payloads.
const (
	Prefix   = "T2."
	prefixV1 = "t1."
)

// domain is signed before a v2 ticket's claims, so that the ticket key's
// signatures mean "a v2 ticket" and nothing else.
const domain = "onsale ticket v2\x00"

// b32 is the payload's text encoding: uppercase, digits 2-7, no padding,
// all in the QR alphanumeric set.
var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// Claims is what a ticket says. Version 2 tickets carry Event, Booking and
// N only; version 1 tickets also carried the ticket's uuid, its seat and
// its issue time.
type Claims struct {
	Version int    `json:"v"`
	Event   int64  `json:"evt"`
	Booking int64  `json:"bkg"`
	N       int    `json:"n"`
	Ticket  string `json:"tid,omitempty"`  // v1 only
	Seat    string `json:"seat,omitempty"` // v1 only
	Issued  int64  `json:"iat,omitempty"`  // v1 only
}

// Ref is the ticket's reference, "<booking>-<n>": what the gate's lists
// (revoked, used) and answers name a ticket by.
func (c *Claims) Ref() string { return core.TicketRef(c.Booking, c.N) }

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

// Sign returns the QR payload of c (version 2: c's event, booking and N).
func (s *Signer) Sign(c Claims) string {
	claims := encodeClaims(c)
	sig := ed25519.Sign(s.key, append([]byte(domain), claims...))
	return Prefix + b32.EncodeToString(append(claims, sig...))
}

func encodeClaims(c Claims) []byte {
	b := make([]byte, 0, 3*binary.MaxVarintLen64)
	b = binary.AppendUvarint(b, uint64(c.Event))
	b = binary.AppendUvarint(b, uint64(c.Booking))
	return binary.AppendUvarint(b, uint64(c.N))
}

// SignTickets returns a booking's tickets with their signed payloads.
func (s *Signer) SignTickets(b *core.Booking) []core.Ticket {
	out := make([]core.Ticket, len(b.Tickets))
	for i, t := range b.Tickets {
		t.Payload = s.Sign(Claims{Event: t.EventID, Booking: b.ID, N: t.N})
		out[i] = t
	}
	return out
}

// QR is the package's QR, so that a consumer holding a Signer behind an
// interface draws the codes of the tickets it signed.
func (s *Signer) QR(payload string, size int) ([]byte, error) { return QR(payload, size) }

// Verify checks a payload against the public key and returns its claims.
// A v2 payload is read in either case (a scanner may lower it).
func Verify(pub ed25519.PublicKey, payload string) (*Claims, error) {
	payload = strings.TrimSpace(payload)
	if strings.HasPrefix(payload, prefixV1) {
		return verifyV1(pub, payload)
	}
	if len(payload) < len(Prefix) || !strings.EqualFold(payload[:len(Prefix)], Prefix) {
		return nil, ErrMalformed
	}
	raw, err := b32.DecodeString(strings.ToUpper(payload[len(Prefix):]))
	if err != nil || len(raw) <= ed25519.SignatureSize {
		return nil, ErrMalformed
	}
	claims, sig := raw[:len(raw)-ed25519.SignatureSize], raw[len(raw)-ed25519.SignatureSize:]
	if !ed25519.Verify(pub, append([]byte(domain), claims...), sig) {
		return nil, ErrSignature
	}
	c := Claims{Version: 2}
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(claims)
		if n <= 0 || v == 0 || v > 1<<53 { // 1<<53: exact in a JavaScript number
			return nil, ErrMalformed
		}
		vals[i], claims = v, claims[n:]
	}
	if len(claims) != 0 || vals[2] > 1<<16 {
		return nil, ErrMalformed
	}
	c.Event, c.Booking, c.N = int64(vals[0]), int64(vals[1]), int(vals[2])
	return &c, nil
}

// verifyV1 reads "t1.<base64url JSON>.<base64url signature of the rest>".
func verifyV1(pub ed25519.PublicKey, payload string) (*Claims, error) {
	i := strings.LastIndexByte(payload, '.')
	if i <= len(prefixV1) {
		return nil, ErrMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(payload[i+1:])
	if err != nil {
		return nil, ErrMalformed
	}
	if !ed25519.Verify(pub, []byte(payload[:i]), sig) {
		return nil, ErrSignature
	}
	b, err := base64.RawURLEncoding.DecodeString(payload[len(prefixV1):i])
	if err != nil {
		return nil, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(b, &c); err != nil || c.Booking <= 0 || c.N <= 0 {
		return nil, ErrMalformed
	}
	c.Version = 1
	return &c, nil
}

// IssuedAt is a v1 ticket's issue time (zero for v2).
func (c *Claims) IssuedAt() time.Time {
	if c.Issued == 0 {
		return time.Time{}
	}
	return time.Unix(c.Issued, 0)
}

// ECC is the error correction of ticket QR codes: medium (15% of the
// code may be lost). A code read at arm's length from a phone screen or a
// print fails for lack of pixels per module long before it fails for
// damage, so the level that keeps the code smallest while surviving a
// glare spot or a crease wins: high (30%) would take version 8 (49
// modules) for the same payload, and low leaves too little for a cracked
// screen.
const ECC = qrcode.Medium

// MinQRSize is the smallest QR image QR draws, in pixels: a phone shows it
// at full width and a gate camera reads it at arm's length.
const MinQRSize = 512

// QR renders a payload as a square PNG QR code of at least size pixels
// (and at least MinQRSize) with the standard four-module quiet zone, every
// module the same whole number of pixels (no resampling blur).
func QR(payload string, size int) ([]byte, error) {
	q, err := qrcode.New(payload, ECC)
	if err != nil {
		return nil, err
	}
	bits := q.Bitmap() // includes the quiet zone
	n := len(bits)
	px := (max(size, MinQRSize) + n - 1) / n
	img := image.NewPaletted(image.Rect(0, 0, n*px, n*px), color.Palette{color.White, color.Black})
	for y, row := range bits {
		for x, dark := range row {
			if !dark {
				continue
			}
			for dy := range px {
				off := img.PixOffset(x*px, y*px+dy)
				for dx := range px {
					img.Pix[off+dx] = 1
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Version returns the QR version (1 to 40; the code is 17+4*version
// modules square) QR uses for payload.
func Version(payload string) (int, error) {
	q, err := qrcode.New(payload, ECC)
	if err != nil {
		return 0, err
	}
	return q.VersionNumber, nil
}
