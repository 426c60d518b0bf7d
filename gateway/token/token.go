// Package token mints and checks the gateway's two tokens. The queue token
// (HS256, a secret only gateways hold) carries a fan's event, identity and
// place in line, so a status poll needs no store round trip. The admit
// token (EdDSA, shared/admission) is what the core accepts; the gateway
// signs with the current key of a ring and publishes every key of the ring
// at /.well-known/jwks.json, so a key can be rotated without a gap.
package token

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/shared/admission"
)

// Queue is a fan's place in line.
type Queue struct {
	jwt.RegisteredClaims
	Event    int64 `json:"evt"`
	Position int64 `json:"pos,omitempty"` // 0: pre-queue, place drawn at onsale
	// Admitted is the end of the fan's session once admitted (unix ms).
	Admitted int64 `json:"adm,omitempty"`
	// Epoch is the room incarnation the place belongs to (see gateway.Dials).
	Epoch string `json:"ep,omitempty"`
}

// Identity is the fan the token is for (account or visitor).
func (q *Queue) Identity() string { return q.Subject }

// queueTTL bounds how long a queue token lives; a fan who keeps polling
// gets fresh ones.
const queueTTL = 24 * time.Hour

// Errors.
var (
	ErrInvalid = errors.New("token invalid")
	ErrExpired = errors.New("token expired")
)

// QueueSigner mints and verifies queue tokens with one HMAC secret. It
// keeps no state per token or per fan: a verified token is not cached
// (Verify checks one in about a microsecond, less than a cache's lookup
// and copy once a sale's tokens outnumber what a cache could hold), so
// the gateway's memory does not grow with the fans in line.
type QueueSigner struct {
	secret []byte
	parser *jwt.Parser
	macs   sync.Pool // of *mac: hmac.New(sha256.New, secret)'s keyed state is set up once, not per poll
}

// NewQueueSigner returns a signer; the secret must be at least 32 bytes.
func NewQueueSigner(secret []byte) (*QueueSigner, error) {
	if len(secret) < 32 {
		return nil, errors.New("queue token secret must be at least 32 bytes")
	}
	s := &QueueSigner{secret: secret, parser: jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired(),
		jwt.WithIssuer(issuer))}
	s.macs.New = func() any { return &mac{h: hmac.New(sha256.New, s.secret)} }
	return s, nil
}

const issuer = "onsale-gateway"

// Sign mints a queue token.
func (s *QueueSigner) Sign(event int64, identity string, position, admittedUntil int64, epoch string) (string, error) {
	now := time.Now()
	q := Queue{RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: identity, ID: NewVisitorID(),
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(queueTTL))},
		Event: event, Position: position, Admitted: admittedUntil, Epoch: epoch}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, q).SignedString(s.secret)
}

// Verify checks a queue token for event: signed with this secret (HS256),
// issued by a gateway, not expired, for event, naming an identity and a
// place that is not negative. It returns ErrExpired or ErrInvalid
// otherwise, and the caller's own copy of the claims.
func (s *QueueSigner) Verify(tok string, event int64) (*Queue, error) {
	q, err := s.verifyFast(tok, time.Now())
	if errors.Is(err, errNotFast) {
		q, err = s.verifyJWT(tok)
	}
	return check(q, err, event)
}

// VerifyBytes is Verify at now (the request's time, read once for the
// whole poll) of a token in a buffer the caller keeps (a request's
// header, as fasthttp holds it): tok is read during the call, never kept,
// so a poll makes no copy of it.
func (s *QueueSigner) VerifyBytes(tok []byte, event int64, now time.Time) (*Queue, error) {
	q, err := s.verifyFast(unsafe.String(unsafe.SliceData(tok), len(tok)), now)
	if errors.Is(err, errNotFast) {
		q, err = s.verifyJWT(string(tok))
	}
	return check(q, err, event)
}

// check is Verify's verdict on the claims of a good token.
func check(q *Queue, err error, event int64) (*Queue, error) {
	if err != nil {
		return nil, err
	}
	switch {
	case q.Event != event:
		return nil, fmt.Errorf("%w: for event %d", ErrInvalid, q.Event)
	case q.Subject == "" || q.Position < 0:
		return nil, fmt.Errorf("%w: no identity", ErrInvalid)
	}
	return q, nil
}

// verifyJWT is the general check, by the JWT library: any token the fast
// path (verifyFast) does not read itself.
func (s *QueueSigner) verifyJWT(tok string) (*Queue, error) {
	var q Queue
	_, err := s.parser.ParseWithClaims(tok, &q, func(*jwt.Token) (any, error) { return s.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, ErrExpired
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return &q, nil
}

// Ring holds the admit-token keys: the first signs, all are published.
type Ring struct {
	signer *admission.Signer
	pubs   []ed25519.PublicKey
}

// NewRing returns a ring signing with keys[0]; the others (the previous
// keys, during a rotation) are published only.
func NewRing(keys ...ed25519.PrivateKey) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("an admit key is required")
	}
	r := &Ring{signer: admission.NewSigner(keys[0])}
	for _, k := range keys {
		r.pubs = append(r.pubs, k.Public().(ed25519.PublicKey))
	}
	return r, nil
}

// JWKS is the published key set.
func (r *Ring) JWKS() admission.JWKS { return admission.NewJWKS(r.pubs...) }

// Admit mints an admit token for identity on event, ending at until.
func (r *Ring) Admit(identity string, event int64, until time.Time, max int) (string, error) {
	return r.signer.Admit(identity, event, max, time.Until(until))
}

// Visitor ids: a guest's identity is "vis:<id>", where the id is random
// and minted by a gateway, never chosen by the client. The cookie carries
// "<id>.<mac>", the mac an HMAC-SHA256 of the id under the queue secret
// (so every gateway checks every other's), in its own domain ("visitor:"
// before the id: no queue token's signature is ever a visitor's mac).

// NewVisitor mints a visitor id and the cookie value that carries it.
func (s *QueueSigner) NewVisitor() (id, cookie string) {
	id = NewVisitorID()
	return id, id + "." + s.visitorMAC(id)
}

// Visitor returns the visitor id a cookie value carries, and false when the
// value is not one a gateway minted (missing, unsigned, forged, or of
// another secret).
func (s *QueueSigner) Visitor(cookie string) (string, bool) {
	id, mac, ok := strings.Cut(cookie, ".")
	if !ok || len(id) != visitorIDLen || !hmac.Equal([]byte(mac), []byte(s.visitorMAC(id))) {
		return "", false
	}
	return id, true
}

func (s *QueueSigner) visitorMAC(id string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("visitor:"))
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// visitorIDLen is the length of NewVisitorID's ids (16 bytes, base64).
const visitorIDLen = 22

// NewVisitorID returns a random id (128 bits, URL-safe base64): a visitor
// id (NewVisitor signs it) or a token id.
func NewVisitorID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
