package paysim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 64 << 10

func (s *Sim) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	switch s.dialect {
	case DialectStripe:
		s.stripeRoutes(mux)
	case DialectRazorpay:
		s.razorpayRoutes(mux)
	default:
		s.paysimRoutes(mux)
	}
	mux.Handle("GET /v1/ledger", s.auth(s.query(func(r *http.Request) (any, error) {
		return s.ledgerOf(r.URL.Query().Get("reference")), nil
	})))

	mux.HandleFunc("GET /checkout/{id}", s.checkoutPage)
	mux.HandleFunc("POST /checkout/{id}/approve", s.checkoutSettle(true))
	mux.HandleFunc("POST /checkout/{id}/decline", s.checkoutSettle(false))

	mux.HandleFunc("POST /sms", s.postSMS)
	mux.HandleFunc("GET /sms", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"messages": s.messages(r.URL.Query().Get("to"))})
	})

	if s.control {
		mux.HandleFunc("GET /_sim/config", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, s.Behaviour())
		})
		mux.HandleFunc("PUT /_sim/config", s.putConfig)
		mux.Handle("POST /_sim/payments/{id}/succeed", s.settleHook(true))
		mux.Handle("POST /_sim/payments/{id}/fail", s.settleHook(false))
		mux.HandleFunc("POST /_sim/webhooks/flush", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]int{"flushed": s.FlushWebhooks()})
		})
		mux.HandleFunc("GET /_sim/webhooks", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"deliveries": s.Deliveries()})
		})
		mux.HandleFunc("POST /_sim/idempotency/forget", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]int{"forgotten": s.ForgetIdempotencyKeys()})
		})
	}
	return s.serve(mux)
}

// paysimRoutes is the simulator's own payments API.
func (s *Sim) paysimRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/payments", s.api(s.mutation(func(r *http.Request, body []byte) (int, any, error) {
		var req PaymentRequest
		if err := decode(body, &req); err != nil {
			return 0, nil, err
		}
		p, err := s.createPayment(req)
		return http.StatusCreated, p, err
	})))
	mux.Handle("GET /v1/payments", s.api(s.query(func(r *http.Request) (any, error) {
		return map[string]any{"data": s.list(r.URL.Query().Get("reference"))}, nil
	})))
	mux.Handle("GET /v1/payments/{id}", s.api(s.query(func(r *http.Request) (any, error) {
		return s.payment(r.PathValue("id"))
	})))
	mux.Handle("POST /v1/payments/{id}/capture", s.api(s.mutation(func(r *http.Request, body []byte) (int, any, error) {
		if err := decode(body, &struct{}{}); err != nil {
			return 0, nil, err
		}
		p, err := s.capture(r.PathValue("id"))
		return http.StatusOK, p, err
	})))
	mux.Handle("POST /v1/payments/{id}/cancel", s.api(s.mutation(func(r *http.Request, body []byte) (int, any, error) {
		if err := decode(body, &struct{}{}); err != nil {
			return 0, nil, err
		}
		p, err := s.cancel(r.PathValue("id"))
		return http.StatusOK, p, err
	})))
	mux.Handle("POST /v1/payments/{id}/refunds", s.api(s.mutation(func(r *http.Request, body []byte) (int, any, error) {
		var req RefundRequest
		if err := decode(body, &req); err != nil {
			return 0, nil, err
		}
		rf, err := s.refund(r.PathValue("id"), req.Amount)
		return http.StatusCreated, rf, err
	})))
}

// serve routes through mux, answering unknown routes and methods in JSON,
// and logs each request at debug level.
func (s *Sim) serve(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		if h, pattern := mux.Handler(r); pattern == "" {
			// The mux would answer in plain text; learn its status, answer in JSON.
			probe := &statusWriter{ResponseWriter: discard{make(http.Header)}, status: http.StatusOK}
			h.ServeHTTP(probe, r)
			e := errorf(ENotFound, "no route %s %s", r.Method, r.URL.Path)
			if probe.status == http.StatusMethodNotAllowed {
				e = errorf(EMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
				w.Header().Set("Allow", probe.Header().Get("Allow"))
			}
			writeError(sw, e)
		} else {
			if strings.HasPrefix(pattern, "GET /v1/") && pattern != "GET /v1/ledger" || strings.HasPrefix(pattern, "POST /v1/") {
				s.mu.Lock()
				s.calls[pattern]++ // the provider's API as a merchant calls it
				s.mu.Unlock()
			}
			mux.ServeHTTP(sw, r) // routes again, setting the path values
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "dur", time.Since(start))
	})
}

// api guards the provider API: the outage, then the API key.
func (s *Sim) api(h http.Handler) http.Handler {
	authed := s.auth(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		now := s.now()
		end, out := s.beh.outage(now)
		s.mu.Unlock()
		if out {
			secs := max(1, int(math.Ceil(end.Sub(now).Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			s.writeAPIError(w, errorf(EUnavailable, "provider outage until %s", end.UTC().Format(time.RFC3339)))
			return
		}
		authed.ServeHTTP(w, r)
	})
}

// auth checks the Bearer API key in constant time.
func (s *Sim) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if s.dialect == DialectRazorpay && !strings.HasPrefix(r.URL.Path, "/v1/ledger") {
			// Razorpay: Basic, a key id and the API key as its secret.
			var id string
			id, key, ok = r.BasicAuth()
			ok = ok && strings.HasPrefix(id, razorpayKeyPrefix)
		}
		if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(s.apiKey)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paysim"`)
			s.writeAPIError(w, errorf(EUnauthorized, "missing or wrong API key"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// query adapts a read: 200 with the value, or the error.
func (s *Sim) query(fn func(*http.Request) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := fn(r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// mutation adapts a state-changing POST: it reads the body, honours
// Idempotency-Key, runs fn, and applies TimeoutRate to the answer.
func (s *Sim) mutation(fn func(r *http.Request, body []byte) (int, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, e := readBody(w, r)
		if e != nil {
			writeError(w, e)
			return
		}
		var k idemKey
		if key := r.Header.Get(IdempotencyKeyHeader); key != "" {
			if len(key) > maxIdempotencyKeyLen {
				writeError(w, errorf(EInvalid, "Idempotency-Key longer than %d characters", maxIdempotencyKeyLen))
				return
			}
			k = idemKey{apiKey: s.apiKey, method: r.Method, path: r.URL.Path, key: key}
		}
		s.keyed(w, r, k, fingerprint(body), true, func(e *Error) { writeError(w, e) }, func() (int, []byte, bool) {
			code, v, err := fn(r, body)
			if err != nil {
				e := s.asError(r, err)
				code, v = status[e.Code], e
			}
			// Refused input (400) ran nothing: the client may fix it and
			// use the key again. Everything else is the key's answer.
			return code, encode(v), code != http.StatusBadRequest
		})
	})
}

// holdBack delays a successful answer by TimeoutDelay for a TimeoutRate of
// requests, until the client gives up or Close.
func (s *Sim) holdBack(r *http.Request) {
	s.mu.Lock()
	late, d := rand.Float64() < s.beh.TimeoutRate, s.beh.TimeoutDelay
	s.mu.Unlock()
	if !late {
		return
	}
	s.log.Debug("holding the response back", "method", r.Method, "path", r.URL.Path, "delay", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	case <-s.ctx.Done():
	}
}

func (s *Sim) putConfig(w http.ResponseWriter, r *http.Request) {
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	b := s.Behaviour()
	if err := json.Unmarshal(body, &b); err != nil {
		writeError(w, errorf(EInvalid, "config: %v", err))
		return
	}
	if err := s.SetBehaviour(b); err != nil {
		writeError(w, errorf(EInvalid, "config: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, s.Behaviour())
}

func (s *Sim) settleHook(ok bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.Settle(r.PathValue("id"), ok)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, p)
	})
}

// decode reads body (empty means {}) strictly into v: unknown fields,
// wrong types and trailing data are invalid_request.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(EInvalid, "malformed JSON body: %v", err)
	}
	if dec.More() {
		return errorf(EInvalid, "malformed JSON body: data after the object")
	}
	return nil
}

// readBody reads a request body of at most MaxBodyBytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *Error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errorf(ETooLarge, "body over %d bytes", MaxBodyBytes)
	case err != nil:
		return nil, errorf(EInvalid, "read body: %v", err)
	}
	return body, nil
}

// asError returns err's *Error, or logs err and returns an internal one.
func (s *Sim) asError(r *http.Request, err error) *Error {
	var e *Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = errorf(EInternal, "internal error")
	}
	return e
}

func (s *Sim) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	s.writeAPIError(w, s.asError(r, err))
}

// writeAPIError answers e in the dialect's shape.
func (s *Sim) writeAPIError(w http.ResponseWriter, e *Error) {
	switch s.dialect {
	case DialectStripe:
		s.writeStripeError(w, e)
	case DialectRazorpay:
		s.writeRazorpayError(w, e)
	default:
		writeError(w, e)
	}
}

func writeError(w http.ResponseWriter, e *Error) {
	writeRaw(w, status[e.Code], encode(e))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	writeRaw(w, code, encode(v))
}

// encode marshals v as the body of a response.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":"internal","message":"encode response"}` + "\n")
	}
	return append(b, '\n')
}

func writeRaw(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// discard is a ResponseWriter that keeps only headers.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
