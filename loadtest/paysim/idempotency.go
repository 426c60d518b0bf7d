package paysim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// IdempotencyKeyHeader names the header that makes a POST idempotent, and
// ReplayedHeader marks a replayed response.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
	maxIdempotencyKeyLen = 255
)

// idemKey scopes an Idempotency-Key, as a provider does: per API key,
// method and path.
type idemKey struct {
	apiKey, method, path, key string
}

// idemRecord is a claimed key: running until done, then the stored
// response. Records live as long as the Sim.
type idemRecord struct {
	fingerprint string
	done        bool
	status      int
	body        []byte
}

// claim starts a request under k. It returns the stored response to
// replay (done), or claims k for this request (nil, nil), or refuses: 422
// when the key was used with other parameters, 409 while the first
// request still runs.
func (s *Sim) claim(k idemKey, fingerprint string) (*idemRecord, *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.idem[k]; r != nil {
		switch {
		case r.fingerprint != fingerprint:
			return nil, errorf(EKeyReused, "Idempotency-Key %q was used with other parameters", k.key)
		case !r.done:
			return nil, errorf(EInProgress, "a request with Idempotency-Key %q is still in progress", k.key)
		}
		c := *r
		return &c, nil
	}
	s.idem[k] = &idemRecord{fingerprint: fingerprint}
	return nil, nil
}

// complete stores the response of the request that claimed k, or (store
// false) releases k so that a corrected request may use it.
func (s *Sim) complete(k idemKey, store bool, status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !store {
		delete(s.idem, k)
		return
	}
	r := s.idem[k]
	r.done, r.status, r.body = true, status, body
}

// fingerprint identifies a request body by its meaning: the SHA-256 of
// its canonical JSON (keys sorted, no spaces), so that key order and
// layout do not matter. An empty body counts as {}; a body that is not
// JSON is taken as it is.
func fingerprint(body []byte) string {
	canon := []byte("{}")
	if b := bytes.TrimSpace(body); len(b) > 0 {
		canon = b
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			if c, err := json.Marshal(v); err == nil {
				canon = c
			}
		}
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}
