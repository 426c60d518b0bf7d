package token

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strings"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"
)

// Every status poll verifies the fan's queue token, so the common case is
// read here without the JWT library, which decodes the header and the
// claims by reflection before it checks the signature. The fast path takes
// tokens exactly as Sign writes them: the one header Sign writes (a token
// with any other was not made by Sign and is refused: an account token
// sent as a bearer costs no parse), a 32-byte signature, and claims whose
// keys are Sign's own (iss, sub, exp, iat, jti, evt, pos, adm, ep), each at
// most once, with plain integers and strings without escapes. It checks
// the signature before it reads the claims, so the claims it reads are
// ones a gateway wrote. Claims it does not read (a key it does not know,
// an escape, a fraction) go to the library (verifyJWT); the two paths
// accept the same tokens with the same claims (FuzzQueueVerify compares
// them).

var (
	// errNotFast says the fast path does not read these claims: the library does.
	errNotFast   = errors.New("not a token the fast path reads")
	errForeign   = fmt.Errorf("%w: not a queue token", ErrInvalid)
	errSignature = fmt.Errorf("%w: %w", ErrInvalid, jwt.ErrTokenSignatureInvalid)
	errNoExpiry  = fmt.Errorf("%w: no expiry", ErrInvalid)
	errIssuer    = fmt.Errorf("%w: %w", ErrInvalid, jwt.ErrTokenInvalidIssuer)
)

// mac is a pooled HMAC of the queue secret and the buffer its sum goes to
// (a sum into the caller's array would move that array to the heap).
type mac struct {
	h   hash.Hash
	sum [32]byte
}

// jwtHeader is the header Sign writes: base64url of {"alg":"HS256","typ":"JWT"}.
const jwtHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// maxClaims bounds the claims the fast path decodes (on the stack); Sign's
// are about 200 bytes.
const maxClaims = 512

// verified holds a token's claims, their two dates and their strings'
// bytes in one allocation.
type verified struct {
	q        Queue
	exp, iat jwt.NumericDate
	strs     [128]byte // the strings' bytes (keep): Sign's take about 80
	used     int
}

// verifyFast checks tok as Verify does, at now, without the event and
// identity checks; errNotFast when it is not a token this path reads.
func (s *QueueSigner) verifyFast(tok string, now time.Time) (*Queue, error) {
	h, rest, ok := cut(tok)
	if !ok || h != jwtHeader {
		return nil, errForeign
	}
	p, sig, ok := cut(rest)
	var want [32]byte
	if !ok || len(sig) != 43 {
		return nil, errForeign
	}
	if n, err := base64.RawURLEncoding.Decode(want[:], bytesOf(sig)); err != nil || n != len(want) {
		return nil, errForeign
	}
	m := s.macs.Get().(*mac)
	m.h.Reset()
	m.h.Write(bytesOf(tok[:len(h)+1+len(p)]))
	good := hmac.Equal(m.h.Sum(m.sum[:0]), want[:])
	s.macs.Put(m)
	if !good {
		return nil, errSignature
	}
	if len(p) > base64.RawURLEncoding.EncodedLen(maxClaims) {
		return nil, errNotFast
	}
	var buf [maxClaims]byte
	n, err := base64.RawURLEncoding.Decode(buf[:], bytesOf(p))
	if err != nil {
		return nil, errNotFast
	}
	v := new(verified)
	if !v.read(buf[:n]) {
		return nil, errNotFast
	}
	q := &v.q
	switch {
	case q.ExpiresAt == nil:
		return nil, errNoExpiry
	case !now.Before(q.ExpiresAt.Time):
		return nil, ErrExpired
	case q.Issuer != issuer:
		return nil, errIssuer
	}
	return q, nil
}

// read decodes the claims into v; false when they are not as Sign writes
// them. b is read, never kept: the strings are copies (keep), the issuer
// Sign writes the constant itself.
func (v *verified) read(b []byte) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	all := unsafe.String(unsafe.SliceData(b), len(b)) // a view of b: nothing of it is kept but through keep
	var seen uint16
	i := 1
	for i < len(all)-1 {
		if seen != 0 {
			if all[i] != ',' {
				return false
			}
			i++
		}
		key, j, ok := str(all, i)
		if !ok || j >= len(all) || all[j] != ':' {
			return false
		}
		i = j + 1
		k := claimKey(key)
		if k < 0 || seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		if k <= kEpoch {
			var val string
			if val, i, ok = str(all, i); !ok {
				return false
			}
			switch k {
			case kIssuer:
				if val == issuer {
					v.q.Issuer = issuer
				} else {
					v.q.Issuer = v.keep(val)
				}
			case kSubject:
				v.q.Subject = v.keep(val)
			case kID:
				v.q.ID = v.keep(val)
			case kEpoch:
				v.q.Epoch = v.keep(val)
			}
			continue
		}
		var n int64
		if n, i, ok = integer(all, i); !ok {
			return false
		}
		switch k {
		case kExp:
			v.exp.Time = time.Unix(n, 0)
			v.q.ExpiresAt = &v.exp
		case kIat:
			v.iat.Time = time.Unix(n, 0)
			v.q.IssuedAt = &v.iat
		case kEvent:
			v.q.Event = n
		case kPosition:
			v.q.Position = n
		case kAdmitted:
			v.q.Admitted = n
		}
	}
	return i == len(all)-1
}

// keep copies s into v's own bytes (past them, to the heap): the claims
// outlive the buffer they were decoded into.
func (v *verified) keep(s string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > len(v.strs)-v.used {
		return strings.Clone(s)
	}
	k := v.strs[v.used : v.used+len(s)]
	copy(k, s)
	v.used += len(s)
	return unsafe.String(unsafe.SliceData(k), len(k))
}

// The claims the fast path reads: strings first, then integers.
const (
	kIssuer = iota
	kSubject
	kID
	kEpoch
	kExp
	kIat
	kEvent
	kPosition
	kAdmitted
)

func claimKey(k string) int {
	switch k {
	case "iss":
		return kIssuer
	case "sub":
		return kSubject
	case "jti":
		return kID
	case "ep":
		return kEpoch
	case "exp":
		return kExp
	case "iat":
		return kIat
	case "evt":
		return kEvent
	case "pos":
		return kPosition
	case "adm":
		return kAdmitted
	}
	return -1
}

// str reads a JSON string without escapes at s[i:]: its contents and the
// index after it.
func str(s string, i int) (string, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return s[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

// integer reads a JSON integer at s[i:] (at most 15 digits: exact as the
// library's float too): its value and the index after it.
func integer(s string, i int) (int64, int, bool) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	start := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if d := j - start; d == 0 || d > 15 || d > 1 && s[start] == '0' {
		return 0, i, false
	}
	var n int64 // at most 15 digits: no overflow
	for _, c := range []byte(s[start:j]) {
		n = n*10 + int64(c-'0')
	}
	if start > i {
		n = -n
	}
	return n, j, true
}

// cut splits s at its first dot.
func cut(s string) (before, after string, ok bool) {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// bytesOf is s's bytes, without a copy, for reading only (hashing and
// decoding never write their input).
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
