package admission

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// cacheSize bounds the verified-token cache. A fan reuses one admit token for
// every call of a session, so a hit skips the Ed25519 verification (~50 µs).
const cacheSize = 1 << 15

// Verifier checks admit tokens: EdDSA only (the algorithm is pinned, so
// alg=none and HS256-with-the-public-key tokens are refused), a known kid,
// aud=onsale-core, iss=onsale-gateway, an exp in the future, a non-empty
// sub and an evt that is a positive event id. It is safe for concurrent use.
type Verifier struct {
	keys   atomic.Pointer[map[string]ed25519.PublicKey]
	parser *jwt.Parser

	mu    sync.RWMutex
	cache map[string]*Claims

	now func() time.Time
}

// NewVerifier returns a Verifier trusting keys (by kid).
func NewVerifier(keys map[string]ed25519.PublicKey) *Verifier {
	v := &Verifier{
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithAudience(Audience),
			jwt.WithIssuer(Issuer),
			jwt.WithExpirationRequired(),
		),
		cache: make(map[string]*Claims),
		now:   time.Now,
	}
	v.SetKeys(keys)
	return v
}

// NewVerifierFromPublicKeys trusts the given public keys under their KeyID.
func NewVerifierFromPublicKeys(pubs ...ed25519.PublicKey) *Verifier {
	m := make(map[string]ed25519.PublicKey, len(pubs))
	for _, p := range pubs {
		m[KeyID(p)] = p
	}
	return NewVerifier(m)
}

// SetKeys replaces the trusted keys and forgets every cached verification,
// so a key withdrawn from the set stops admitting at once.
func (v *Verifier) SetKeys(keys map[string]ed25519.PublicKey) {
	cp := make(map[string]ed25519.PublicKey, len(keys))
	for k, p := range keys {
		cp[k] = p
	}
	v.keys.Store(&cp)
	v.mu.Lock()
	v.cache = make(map[string]*Claims)
	v.mu.Unlock()
}

// Verify returns the token's claims, or ErrMissing, ErrExpired or an error
// wrapping ErrInvalid. The returned Claims must not be modified.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if token == "" {
		return nil, ErrMissing
	}
	now := v.now()
	v.mu.RLock()
	c, ok := v.cache[token]
	v.mu.RUnlock()
	if ok {
		if !now.Before(c.Expiry()) {
			return nil, ErrExpired
		}
		return c, nil
	}
	c = new(Claims)
	_, err := v.parser.ParseWithClaims(token, c, v.keyFor)
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, ErrExpired
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	case c.Subject == "":
		return nil, fmt.Errorf("%w: no sub", ErrInvalid)
	case c.EventID <= 0:
		return nil, fmt.Errorf("%w: evt is not a positive event id", ErrInvalid)
	case c.Max < 0:
		return nil, fmt.Errorf("%w: negative max", ErrInvalid)
	}
	v.mu.Lock()
	if len(v.cache) >= cacheSize {
		// Dropping everything is crude but bounded and rare: tokens of live
		// sessions are verified again once and cached anew.
		v.cache = make(map[string]*Claims)
	}
	v.cache[token] = c
	v.mu.Unlock()
	return c, nil
}

func (v *Verifier) keyFor(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := (*v.keys.Load())[kid]
	if !ok {
		return nil, fmt.Errorf("unknown kid %q", kid)
	}
	return k, nil
}

// JWKSTimeout bounds one read of a JWKS, whatever the HTTP client: a
// server that accepts the connection and never answers must not stop the
// refresh (a verifier that never learns a rotated key refuses every token
// signed with it).
const JWKSTimeout = 5 * time.Second

// CheckJWKSURL refuses a JWKS URL that is not https, unless it names a
// loopback host (a gateway and core on one machine, the local stack): the
// keys decide whose tokens are believed, so whoever can rewrite them on
// the wire could mint any token.
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("jwks url: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("jwks url %q names no host", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("jwks url %q: want https (plain http only to a loopback address)", raw)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// FetchJWKS downloads and parses a JWKS document, within JWKSTimeout (or
// ctx's deadline if sooner). The services check the URL at start
// (CheckJWKSURL).
func FetchJWKS(ctx context.Context, client *http.Client, url string) (map[string]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, JWKSTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks: status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	return ParseJWKS(b)
}

// KeySet is a verifier whose trusted keys a JWKS refresh replaces:
// *Verifier here, and shared/account's verifier of account tokens.
type KeySet interface {
	Keys() map[string]ed25519.PublicKey
	SetKeys(map[string]ed25519.PublicKey)
}

// Keys returns the trusted keys by kid (not to be modified).
func (v *Verifier) Keys() map[string]ed25519.PublicKey { return *v.keys.Load() }

// RetireAfter is how many successful reads in a row must lack a key
// before RefreshJWKS stops trusting it.
const RetireAfter = 10

// RefreshJWKS re-fetches url every interval and installs the keys in v
// until ctx ends. A failed fetch keeps the previous keys and is reported to
// onErr. Keys are merged, not replaced: a key that a read lacks is kept
// until RetireAfter successful reads in a row have lacked it. Behind a
// load balancer, two cores mid-rotation serve different sets, and
// replacing would make each read undo the last (tokens signed with the key
// one core still uses refused every other read); the cost is that a
// withdrawn key stays trusted for about RetireAfter intervals (restart the
// verifying service to drop one at once).
func RefreshJWKS(ctx context.Context, v KeySet, client *http.Client, url string, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	missed := make(map[string]int) // kid: reads in a row that lacked it
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		keys, err := FetchJWKS(ctx, client, url)
		if err != nil {
			if onErr != nil {
				onErr(err)
			}
			continue
		}
		if merged := mergeKeys(v.Keys(), keys, missed); !sameKeys(merged, v.Keys()) {
			v.SetKeys(merged)
		}
	}
}

// mergeKeys returns the keys of a read (fresh, which win for their kid)
// and those of prev that fewer than RetireAfter reads in a row have
// lacked, counting this one in missed.
func mergeKeys(prev, fresh map[string]ed25519.PublicKey, missed map[string]int) map[string]ed25519.PublicKey {
	out := make(map[string]ed25519.PublicKey, len(prev)+len(fresh))
	for kid, k := range fresh {
		out[kid] = k
		delete(missed, kid)
	}
	for kid, k := range prev {
		if _, ok := out[kid]; ok {
			continue
		}
		if missed[kid]++; missed[kid] < RetireAfter {
			out[kid] = k
		} else {
			delete(missed, kid)
		}
	}
	return out
}

func sameKeys(a, b map[string]ed25519.PublicKey) bool {
	if len(a) != len(b) {
		return false
	}
	for k, p := range a {
		if q, ok := b[k]; !ok || !p.Equal(q) {
			return false
		}
	}
	return true
}
