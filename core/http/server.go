// Package http is the core's JSON API over net/http: the catalog, the
// token-verified hold path, health and metrics, and the gateways' durable
// copy of each event's waiting-room dials (dials.go).
package http

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/problem"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 64 << 10

// requestTimeout bounds the database work of one request.
const requestTimeout = 5 * time.Second

// The server's timeouts (cmd/core sets them), sized from the work of the
// longest request, a Pay or a Confirm, because a response cut by the
// write timeout after money moved leaves the fan without the outcome
// (their retry replays it, but only once they retry). net/http starts the
// write deadline once the request's headers are read, so it must cover,
// one after the other:
//
//   - reading the body: at most ReadTimeout (counted from the request's
//     start, so at most that after the headers);
//   - the account's contact, when the body names none: requestTimeout;
//   - claiming the Idempotency-Key: requestTimeout;
//   - the work (workContext, workTimeout): the booking, the provider's
//     calls, the settlement and the capture, all under one deadline;
//   - recording the outcome under the key: requestTimeout;
//   - writing the small JSON answer: writeMargin.
//
// LongestRequest is that sum (45 s), and WriteTimeout adds the margin. A
// proxy in front of the core must wait longer than LongestRequest for an
// answer (HAProxy's cores backend: timeout server 60 s).
const (
	ReadTimeout    = 10 * time.Second
	workTimeout    = 20 * time.Second
	writeMargin    = 5 * time.Second
	LongestRequest = ReadTimeout + requestTimeout + requestTimeout + workTimeout + requestTimeout
	WriteTimeout   = LongestRequest + writeMargin
)

// Verifier checks admit tokens (*admission.Verifier).
type Verifier interface {
	Verify(token string) (*admission.Claims, error)
}

// Server serves the core's API. It knows the store only by the root
// package's interfaces; core/postgres implements them.
type Server struct {
	Catalog  core.Catalog
	Holds    core.Holds
	Verifier Verifier
	// Ready reports whether the database answers (for /readyz).
	Ready   func(context.Context) error
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// Payments, when set, serves the payment routes.
	Payments *Payments
	// Layouts, when set, serves seat layouts (for the gateway's seat map).
	Layouts core.Layouts
	// Tokens, when set, accepts the core's own tokens (account tokens,
	// hold grants, ticket links) besides admit tokens, adds hold_token to
	// hold answers and serves the JWKS.
	Tokens Tokens
	// Accounts, when set (with Tokens), serves sign-in and /v1/me.
	Accounts *Accounts
	// Gate, when set, serves the gate's scan, offline pack and sync (gate.go).
	Gate *Gate
	// Operators, when set (with Tokens), serves the operators' API
	// (operator.go).
	Operators *Operators
	// Dials, when set, serves the gateways' durable copy of each event's
	// dials to the gateways (dials.go: how they authenticate).
	Dials *Dials

	mux *http.ServeMux
}

// Handler returns the routed handler, with JSON errors for unknown routes
// and methods and a latency histogram per route. It does not serve
// /metrics (answered 404 like any unknown route): AdminHandler does, on
// the operators' listener.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /openapi.yaml", serveDocument)
	mux.HandleFunc("GET /v1/events", s.listEvents)
	mux.HandleFunc("GET /v1/events/{event}", s.eventGetter("public, max-age=5", s.publicEvent))
	mux.HandleFunc("POST /v1/events/{event}/holds", s.createHold)
	if s.Layouts != nil {
		// The layout never changes: cached for long. The counts move.
		mux.HandleFunc("GET /v1/events/{event}/layout", s.eventGetter("public, max-age=86400, immutable",
			func(ctx context.Context, id int64) (any, error) { return s.Layouts.Layout(ctx, id) }))
		mux.HandleFunc("GET /v1/events/{event}/stats", s.eventGetter("public, max-age=1",
			func(ctx context.Context, id int64) (any, error) { return s.Layouts.Counts(ctx, id) }))
	}
	mux.HandleFunc("GET /v1/holds/{hold}", s.getHold)
	mux.HandleFunc("DELETE /v1/holds/{hold}", s.releaseHold)
	mux.HandleFunc("POST /v1/holds/{hold}/extend", s.extendHold)
	if s.Payments != nil {
		mux.HandleFunc("POST /v1/holds/{hold}/payment", s.pay)
		mux.HandleFunc("POST /v1/holds/{hold}/confirm", s.confirm)
		mux.HandleFunc("POST "+WebhookPath(s.Payments.Provider.Name()), s.webhook)
		mux.HandleFunc("GET /v1/bookings/{booking}", s.getBooking)
		mux.HandleFunc("GET /v1/bookings/{booking}/tickets/{n}/qr.png", s.ticketQR)
	}
	if s.Tokens != nil {
		s.accountRoutes(mux)
	}
	if s.Gate != nil {
		s.gateRoutes(mux)
	}
	if s.Operators != nil && s.Tokens != nil {
		s.operatorRoutes(mux)
	}
	if s.Dials != nil && s.Dials.Token != "" {
		s.dialsRoutes(mux)
	}
	s.mux = mux
	return http.HandlerFunc(s.serve)
}

// AdminHandler returns the operators' handler: /metrics (what the
// service does, which fans and the internet have no business reading)
// and /healthz, for a listener of its own (ONSALE_CORE_ADMIN_ADDR) that
// only the operators' network reaches.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /metrics", s.Metrics.Handler())
	return mux
}

// Document is the core's OpenAPI 3.1 description (openapi.yaml): what
// this package serves, kept true by its tests, which check every exchange
// they make against it (shared/apitest).
//
//go:embed openapi.yaml
var Document []byte

// serveDocument answers the OpenAPI document.
func serveDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(Document)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// The request's id: the gateway's (the edge names every request it
	// passes on), else one of the core's own; logged, audited, answered.
	if !requestIDPattern.MatchString(r.Header.Get(RequestIDHeader)) {
		r.Header.Set(RequestIDHeader, newRequestID())
	}
	w.Header().Set(RequestIDHeader, r.Header.Get(RequestIDHeader))
	h, pattern := s.mux.Handler(r)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	if pattern == "" {
		// The mux would answer in plain text; learn its status, answer in JSON.
		probe := &statusWriter{ResponseWriter: discard{w.Header()}, status: http.StatusOK}
		h.ServeHTTP(probe, r)
		code, msg := core.ENotFound, "no such route"
		if probe.status == http.StatusMethodNotAllowed {
			code, msg = "method_not_allowed", "method not allowed on this route"
		}
		w.Header().Del("Content-Type")
		writeError(sw, &core.Error{Code: code, Message: msg}, probe.status)
		pattern = "unmatched"
	} else {
		s.mux.ServeHTTP(sw, r) // routes again, setting the path values
	}
	s.Metrics.Requests.WithLabelValues(pattern, strconv.Itoa(sw.status)).Observe(time.Since(start).Seconds())
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		s.fail(w, r, core.Errorf(core.EUnavailable, "database unavailable"))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// listEvents is the fans' catalog: published and closed shows, not yet
// started soonest first (past=true: started, latest first), filtered by
// city, date and kind, a page at a time (limit, cursor).
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	f, err := eventFilter(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.serveEvents(w, r, f, "public, max-age=5")
}

// eventFilter reads a listing's query: city, date (YYYY-MM-DD), kind,
// past (true or false), limit (1 to core.MaxPage) and cursor; for
// operators, status (repeated: any of them; none: every status). Any other
// parameter is refused, so a misspelt filter is not silently ignored.
func eventFilter(r *http.Request, operator bool) (core.EventFilter, error) {
	q := r.URL.Query()
	f := core.EventFilter{City: q.Get("city"), Kind: q.Get("kind")}
	for k := range q {
		switch k {
		case "city", "date", "kind", "past", "limit", "cursor":
		case "status":
			if operator {
				continue
			}
			fallthrough
		default:
			return f, core.Errorf(core.EInvalid, "unknown parameter %q: filter by city, date, kind or past; page with limit and cursor", k)
		}
	}
	if operator {
		f.Statuses = core.ShowStatuses
		if st := q["status"]; len(st) > 0 {
			f.Statuses = nil
			for _, v := range st {
				if !slices.Contains(core.ShowStatuses, v) {
					return f, core.Errorf(core.EInvalid, "status must be one of %v", core.ShowStatuses)
				}
				f.Statuses = append(f.Statuses, v)
			}
		}
	}
	if d := q.Get("date"); d != "" {
		t, err := time.Parse(time.DateOnly, d)
		if err != nil {
			return f, core.Errorf(core.EInvalid, "date must be YYYY-MM-DD")
		}
		f.Date = t
	}
	if f.Kind != "" && f.Kind != core.KindConcert && f.Kind != core.KindMovie {
		return f, core.Errorf(core.EInvalid, "kind must be concert or movie")
	}
	switch q.Get("past") {
	case "", "false":
	case "true":
		f.Past = true
	default:
		return f, core.Errorf(core.EInvalid, "past must be true or false")
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > core.MaxPage {
			return f, core.Errorf(core.EInvalid, "limit must be 1 to %d: page with cursor for more", core.MaxPage).With("max_limit", core.MaxPage)
		}
		f.Limit = n
	}
	c, err := core.ParseCursor(q.Get("cursor"))
	f.After = c
	return f, err
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, f core.EventFilter, cache string) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	page, err := s.Catalog.Events(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", cache)
	writeJSON(w, http.StatusOK, page)
}

// publicEvent reads a show a fan may see: a draft is not found.
func (s *Server) publicEvent(ctx context.Context, id int64) (any, error) {
	e, err := s.Catalog.Event(ctx, id)
	if err == nil && e.Status == core.ShowDraft {
		return nil, core.Errorf(core.ENotFound, "no event %d", id)
	}
	return e, err
}

// eventGetter serves a read of one event's data with the given caching.
func (s *Server) eventGetter(cache string, read func(ctx context.Context, id int64) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := eventID(r)
		if !ok {
			s.fail(w, r, core.Errorf(core.ENotFound, "no event %q", r.PathValue("event")))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := read(ctx, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", cache)
		writeJSON(w, http.StatusOK, v)
	}
}

// holdBody is the wire form of core.HoldRequest: pointers tell a missing
// field from a zero one, so {"quantity":0} is refused as zero.
type holdBody struct {
	Seats         *[]string           `json:"seats"`
	BestAvailable *core.BestAvailable `json:"best_available"`
	Quantity      *int                `json:"quantity"`
}

func (b holdBody) request() (core.HoldRequest, error) {
	var req core.HoldRequest
	if b.Seats != nil {
		req.Seats = *b.Seats
		if req.Seats == nil {
			req.Seats = []string{}
		}
	}
	req.BestAvailable = b.BestAvailable
	if b.Quantity != nil {
		if *b.Quantity <= 0 {
			return req, core.Errorf(core.EInvalid, "quantity must be positive")
		}
		req.Quantity = *b.Quantity
	}
	return req, req.Validate()
}

func (s *Server) createHold(w http.ResponseWriter, r *http.Request) {
	id, ok := eventID(r)
	if !ok {
		s.fail(w, r, core.Errorf(core.ENotFound, "no event %q", r.PathValue("event")))
		return
	}
	p, err := s.principal(r)
	if err == nil {
		err = p.MayCreateHold(id)
	}
	if err != nil {
		s.countHold(err)
		s.fail(w, r, err)
		return
	}
	var body holdBody
	if err := decode(w, r, &body); err != nil {
		s.countHold(err)
		s.fail(w, r, err)
		return
	}
	req, err := body.request()
	if err != nil {
		s.countHold(err)
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	h, err := s.Holds.CreateHold(ctx, core.HoldParams{EventID: id, Account: p.Identity, Limit: p.Max, Request: req})
	s.countHold(err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/holds/"+h.ID)
	w.Header().Set("ETag", etag(h.Version))
	writeJSON(w, http.StatusCreated, s.withGrant(h))
}

func (s *Server) countHold(err error) {
	outcome := "created"
	if err != nil {
		switch c := core.ErrorCode(err); c {
		case core.ESeatsTaken, core.ESoldOut, core.ELimitExceeded, core.EUnavailable, core.EUnauthorized,
			core.ETokenExpired, core.EWrongEvent, core.ENotFound, core.EForbidden:
			outcome = c
		case core.EInvalid, core.ETooLarge:
			outcome = "invalid"
		default:
			outcome = "error"
		}
	}
	s.Metrics.Holds.WithLabelValues(outcome).Inc()
}

func (s *Server) getHold(w http.ResponseWriter, r *http.Request) {
	h, err := s.ownHold(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	h.Status = h.Effective(time.Now())
	w.Header().Set("ETag", etag(h.Version))
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, s.withGrant(h))
}

func (s *Server) releaseHold(w http.ResponseWriter, r *http.Request) {
	s.changeHold(w, r, s.Holds.ReleaseHold)
}

func (s *Server) extendHold(w http.ResponseWriter, r *http.Request) {
	s.changeHold(w, r, s.Holds.ExtendHold)
}

func (s *Server) changeHold(w http.ResponseWriter, r *http.Request, op func(context.Context, core.HoldRef) (*core.Hold, error)) {
	version, err := ifMatch(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.principal(r)
	var ref core.HoldRef
	if err == nil {
		ref, err = p.HoldRef(r.PathValue("hold"), version)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	// The store checks event, owner and version on the row it changes.
	h, err := op(ctx, ref)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(h.Version))
	writeJSON(w, http.StatusOK, s.withGrant(h))
}

// ownHold resolves the principal and loads the hold it may read.
func (s *Server) ownHold(r *http.Request) (*core.Hold, error) {
	p, err := s.principal(r)
	if err != nil {
		return nil, err
	}
	if _, err := p.HoldRef(r.PathValue("hold"), 0); err != nil {
		return nil, err // refused before the store is asked
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	h, err := s.Holds.Hold(ctx, r.PathValue("hold"))
	if err != nil {
		return nil, err
	}
	if err := p.MayReadHold(h); err != nil {
		return nil, err
	}
	return h, nil
}

func eventID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("event"), 10, 64)
	return id, err == nil && id > 0
}

func etag(v int64) string { return `"` + strconv.FormatInt(v, 10) + `"` }

// ifMatch reads the optional If-Match header as a hold version (0: absent).
func ifMatch(r *http.Request) (int64, error) {
	v := r.Header.Get("If-Match")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.Trim(strings.TrimPrefix(v, "W/"), `"`), 10, 64)
	if err != nil || n <= 0 {
		return 0, core.Errorf(core.EInvalid, "If-Match must be a hold version such as \"3\"")
	}
	return n, nil
}

// decode reads one JSON object of at most MaxBodyBytes into v, refusing
// unknown fields (names are matched exactly: see exactNames) and trailing
// data.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err == nil {
		err = decodeStrict(raw, v)
	}
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case core.ErrorCode(err) == core.EInvalid:
		return err
	case errors.As(err, &tooBig):
		return core.Errorf(core.ETooLarge, "the body is over %d bytes", MaxBodyBytes)
	case errors.Is(err, io.EOF):
		return core.Errorf(core.EInvalid, "the body is empty: send a JSON object")
	default:
		return core.Errorf(core.EInvalid, "malformed JSON body: %v", err)
	}
}

// decodeStrict decodes the JSON object raw into v, refusing unknown
// fields and trailing data (io.EOF for no object at all).
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.Decode(new(json.RawMessage)) != io.EOF {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil && !plainNames(raw) {
		err = exactNames(raw, reflect.TypeOf(v))
	}
	return err
}

// plainNames reports whether every member name in the well-formed JSON
// text raw is lower-case ASCII letters, digits and underscores, as every
// name of the API is: such a name matches a field exactly or not at all,
// so exactNames has nothing to find (and the hold path skips its work).
// A string is a member name when a colon follows it.
func plainNames(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		plain := true
		for i++; i < len(raw) && raw[i] != '"'; i++ {
			switch c := raw[i]; {
			case c == '\\':
				i++
				plain = false
			case (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_':
				plain = false
			}
		}
		if plain {
			continue
		}
		j := i + 1
		for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\n' || raw[j] == '\r') {
			j++
		}
		if j < len(raw) && raw[j] == ':' {
			return false
		}
	}
	return true
}

// exactNames refuses a member whose name matches a field of t only when
// case is ignored: encoding/json takes {"Quantity": 2} for quantity, the
// API's description (openapi.yaml) names members exactly, and a client
// that misspells one is told rather than half-understood.
func exactNames(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		ms, ok := members(raw)
		if !ok {
			return nil // not an object: the decoder judged it
		}
		fields := fieldsOf(t)
		for _, m := range ms {
			name, v := m.name, m.value
			ft, ok := fields[name]
			if !ok {
				for field := range fields {
					if strings.EqualFold(field, name) {
						return core.Errorf(core.EInvalid, "malformed JSON body: unknown field %q: names are case-sensitive (%q)", name, field)
					}
				}
				continue // unknown in any case: the decoder refuses it, saying where
			}
			if err := exactNames(v, ft); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, it := range items {
			if err := exactNames(it, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// member is one member of a JSON object.
type member struct {
	name  string
	value json.RawMessage
}

// members lists the members of the JSON object raw in order, a name given
// twice twice (encoding/json decodes each into the field: a map would keep
// only the last for exactNames to see); ok=false if raw is no object.
func members(raw []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		name, isName := t.(string)
		if err != nil || !isName {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{name, v})
	}
	return out, true
}

// memberTypes caches fieldsOf by struct type.
var memberTypes sync.Map // reflect.Type -> map[string]reflect.Type

// fieldsOf maps the JSON member names of struct type t (an embedded
// struct's promoted, as encoding/json does) to their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := memberTypes.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case name == "-" || (!f.IsExported() && !f.Anonymous):
		case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
			for k, v := range fieldsOf(ft) {
				m[k] = v
			}
		case name == "":
			m[f.Name] = f.Type
		default:
			m[name] = f.Type
		}
	}
	memberTypes.Store(t, m)
	return m
}

// status maps each error code to its one HTTP status.
var status = map[string]int{
	core.EInvalid:           http.StatusBadRequest,
	core.ETooLarge:          http.StatusRequestEntityTooLarge,
	core.EUnauthorized:      http.StatusUnauthorized,
	core.ETokenExpired:      http.StatusUnauthorized,
	core.EWrongEvent:        http.StatusForbidden,
	core.EForbidden:         http.StatusForbidden,
	core.ENotFound:          http.StatusNotFound,
	core.ESeatsTaken:        http.StatusConflict,
	core.ESoldOut:           http.StatusConflict,
	core.ELimitExceeded:     http.StatusUnprocessableEntity,
	core.EHoldExpired:       http.StatusGone,
	core.EHoldNotActive:     http.StatusConflict,
	core.EAlreadyExtended:   http.StatusConflict,
	core.EVersionMismatch:   http.StatusPreconditionFailed,
	core.EUnavailable:       http.StatusServiceUnavailable,
	core.EBookingClosed:     http.StatusConflict,
	core.EPaymentDeclined:   http.StatusPaymentRequired,
	core.EPaymentInProgress: http.StatusConflict,
	core.EProvider:          http.StatusBadGateway,
	core.EMethodUnavailable: http.StatusUnprocessableEntity,
	core.EIdemMissing:       http.StatusBadRequest,
	core.EIdemReused:        http.StatusUnprocessableEntity,
	core.EIdemInFlight:      http.StatusConflict,
	core.EBadSignature:      http.StatusBadRequest,
	core.ETicketInvalid:     http.StatusBadRequest,
	core.ETicketRevoked:     http.StatusGone,
	core.EWrongVenue:        http.StatusForbidden,
	core.EAlreadyUsed:       http.StatusConflict,
	core.EInternal:          http.StatusInternalServerError,
	core.ERateLimited:       http.StatusTooManyRequests,
	core.ECodeInvalid:       http.StatusUnauthorized,
	core.EConflict:          http.StatusConflict,
	core.ENotOnSale:         http.StatusConflict,
	core.EShowLocked:        http.StatusConflict,
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *core.Error
	if !errors.As(err, &e) {
		s.Log.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r), "err", err)
		e = core.Errorf(core.EInternal, "internal error")
	}
	code, ok := status[e.Code]
	if !ok {
		code = http.StatusInternalServerError
	}
	switch {
	case code == http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "2")
		s.Log.Warn("failing closed", "path", r.URL.Path, "request_id", requestID(r), "err", err)
	case code == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="onsale"`)
	case code == http.StatusTooManyRequests:
		retryAfter(w, e)
	}
	writeError(w, e, code)
}

// writeError answers e as an RFC 9457 problem (shared/problem), naming
// the request's id.
func writeError(w http.ResponseWriter, e *core.Error, code int) {
	body := problem.New(e.Code, e.Message, code, w.Header().Get(RequestIDHeader))
	for k, v := range e.Detail {
		body[k] = v
	}
	writeBody(w, code, problem.ContentType, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) { writeBody(w, code, "application/json", v) }

func writeBody(w http.ResponseWriter, code int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"internal","message":"encode response"}`)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
