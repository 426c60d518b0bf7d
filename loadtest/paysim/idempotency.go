package paysim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
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

// keyed runs one state-changing request under k (k.key "": none), in the
// way every dialect shares: the key is claimed (refuse answers a refusal
// of the claim, in the dialect's words), a kept answer is replayed (with
// Idempotent-Replayed when replayed is set), run is carried out (a panic
// releases the key), its answer kept under k unless keep is false (it ran
// nothing: the client may fix the request and use the key again), held
// back by TimeoutRate when it succeeded, and written.
func (s *Sim) keyed(w http.ResponseWriter, r *http.Request, k idemKey, fp string, replayed bool, refuse func(*Error),
	run func() (code int, body []byte, keep bool)) {
	if k.key != "" {
		stored, e := s.claim(k, fp)
		if e != nil {
			refuse(e)
			return
		}
		if stored != nil {
			if replayed {
				w.Header().Set(ReplayedHeader, "true")
			}
			writeRaw(w, stored.status, stored.body)
			return
		}
	}
	completed := false
	if k.key != "" {
		defer func() { // a panic must not leave the key in progress forever
			if !completed {
				s.complete(k, false, 0, nil)
			}
		}()
	}
	if s.beforeExec != nil {
		s.beforeExec()
	}
	code, b, keep := run()
	if k.key != "" {
		s.complete(k, keep, code, b)
		completed = true
	}
	if code < 400 {
		s.holdBack(r)
	}
	writeRaw(w, code, b)
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
