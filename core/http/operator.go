package http

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/layout"
)

// The operators' API, /operator/v1: operators sign in with name and
// password for a session token, and run venues' layouts and shows with it.
// Who may do what is core's rule (core/operator.go); every change is
// audited by the store in the change's own transaction.

// ShowStore is the operators' store of layouts and shows (core/postgres).
type ShowStore interface {
	ImportLayout(ctx context.Context, name string, l *layout.Layout, by core.Actor) (*core.VenueLayout, error)
	VenueLayout(ctx context.Context, id int64) (*core.VenueLayout, *layout.Layout, error)
	VenueLayouts(ctx context.Context) ([]core.VenueLayout, error)
	CreateShows(ctx context.Context, plan core.ShowPlan, vl *core.VenueLayout, l *layout.Layout, by core.Actor) ([]core.Event, error)
	UpdateShow(ctx context.Context, id int64, edit func(before core.Event, now time.Time) (core.Event, error), by core.Actor) (*core.Event, error)
	SetShowStatus(ctx context.Context, id int64, to string, by core.Actor) (*core.Event, error)
	CancelShow(ctx context.Context, id int64, reason string, by core.Actor) (*core.Event, *core.Cancellation, error)
	Cancellation(ctx context.Context, id int64) (*core.Cancellation, error)
	Sales(ctx context.Context, id int64) (*core.Sales, error)
	Attendees(ctx context.Context, id int64) ([]core.Attendee, error)
}

// Operators wires the operators' API.
type Operators struct {
	Store    core.Operators
	Shows    ShowStore
	TokenTTL time.Duration // 0: core.OperatorTokenTTL
	// PasswordCost is bcrypt's work factor for the passwords it stores
	// (0: DefaultPasswordCost; tests lower it).
	PasswordCost int
	// SignInEvery is how often a locked name and address may try again
	// (0: every 6 s after a burst of 10 failures; tests lengthen it).
	SignInEvery time.Duration

	failures *signInFailures
}

// maxLayoutBytes bounds an imported layout: the 40,000-seat stadium's
// document is about 60 KB; a layout listing each seat of a 150,000-seat
// venue fits too.
const maxLayoutBytes = 4 << 20

// DefaultPasswordCost is the work factor of operator passwords (about
// 50-100 ms a hash on the machines onsale is measured on).
const DefaultPasswordCost = 11

// HashPassword hashes an operator password for the store at cost (0:
// DefaultPasswordCost).
func HashPassword(p string, cost int) ([]byte, error) {
	if cost == 0 {
		cost = DefaultPasswordCost
	}
	return bcrypt.GenerateFromPassword([]byte(p), cost)
}

// noOperatorHash is compared against when the name is unknown, so a wrong
// name takes as long as a wrong password.
var noOperatorHash, _ = bcrypt.GenerateFromPassword([]byte("no such operator, no such password"), DefaultPasswordCost)

func (s *Server) operatorRoutes(mux *http.ServeMux) {
	if s.Operators.failures == nil {
		every := s.Operators.SignInEvery
		if every == 0 {
			every = signInEvery
		}
		s.Operators.failures = newSignInFailures(every)
	}
	mux.HandleFunc("POST /operator/v1/sessions", s.operatorSignIn)
	mux.HandleFunc("GET /operator/v1/me", s.operatorMe)
	mux.HandleFunc("GET /operator/v1/operators", s.listOperators)
	mux.HandleFunc("POST /operator/v1/operators", s.createOperator)
	mux.HandleFunc("PATCH /operator/v1/operators/{name}", s.patchOperator)
	mux.HandleFunc("GET /operator/v1/audit", s.auditLog)
	mux.HandleFunc("GET /operator/v1/layouts", s.listLayouts)
	mux.HandleFunc("POST /operator/v1/layouts", s.importLayout)
	mux.HandleFunc("GET /operator/v1/layouts/{layout}", s.getLayout)
	mux.HandleFunc("GET /operator/v1/events", s.operatorEvents)
	mux.HandleFunc("POST /operator/v1/events", s.createShows)
	mux.HandleFunc("GET /operator/v1/events/{event}", s.operatorEvent)
	mux.HandleFunc("PATCH /operator/v1/events/{event}", s.patchShow)
	mux.HandleFunc("POST /operator/v1/events/{event}/publish", s.showStatus(core.ShowPublished))
	mux.HandleFunc("POST /operator/v1/events/{event}/close", s.showStatus(core.ShowClosed))
	mux.HandleFunc("POST /operator/v1/events/{event}/cancel", s.cancelShow)
	mux.HandleFunc("GET /operator/v1/events/{event}/cancellation", s.cancellation)
	mux.HandleFunc("GET /operator/v1/events/{event}/audit", s.showAudit)
	mux.HandleFunc("GET /operator/v1/events/{event}/sales", s.sales)
	mux.HandleFunc("GET /operator/v1/events/{event}/attendees", s.attendees)
}

// showID reads the route's show id, or answers 404 and says so.
func (s *Server) showID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, ok := eventID(r)
	if !ok {
		s.fail(w, r, core.Errorf(core.ENotFound, "no event %q", r.PathValue("event")))
	}
	return id, ok
}

// RequestIDHeader carries a request's id: the gateway sets it on what it
// forwards; a request without one gets one here. It is logged and audited.
const RequestIDHeader = "X-Request-Id"

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID is the request's id (serve made sure it has one).
func requestID(r *http.Request) string { return r.Header.Get(RequestIDHeader) }

// newRequestID names a request that came without an id.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// operator resolves the request's operator and checks it may do perm: an
// operator token whose operator still exists, is not disabled and whose
// role (as stored now, not as signed) has perm.
func (s *Server) operator(r *http.Request, perm string) (*core.Operator, core.Actor, error) {
	p, err := s.principal(r)
	if err != nil {
		return nil, core.Actor{}, err
	}
	if p.Kind != core.PrincipalOperator {
		return nil, core.Actor{}, core.Errorf(core.EForbidden, "this needs an operator's token: sign in at /operator/v1/sessions")
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	o, _, err := s.Operators.Store.OperatorByName(ctx, p.Operator)
	if core.ErrorCode(err) == core.ENotFound {
		return nil, core.Actor{}, core.Errorf(core.EUnauthorized, "operator %s no longer exists", p.Operator)
	}
	if err != nil {
		return nil, core.Actor{}, err
	}
	if !o.Disabled && p.IssuedAt.Before(o.SessionsAfter) {
		return nil, core.Actor{}, core.Errorf(core.EUnauthorized, "your session ended (the password, role or account changed): sign in again")
	}
	if err := o.May(perm); err != nil { // a disabled operator: 403, whatever the token
		return nil, core.Actor{}, err
	}
	return o, core.Actor{Operator: o.Name, RequestID: requestID(r)}, nil
}

type signInBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

func (s *Server) operatorSignIn(w http.ResponseWriter, r *http.Request) {
	var body signInBody
	if err := decode(w, r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if body.Name == "" || body.Password == "" {
		s.fail(w, r, core.Errorf(core.EInvalid, "name and password are required"))
		return
	}
	if !core.ValidOperatorName(body.Name) || len(body.Password) > core.MaxPassword {
		// No such operator can exist: refused as a wrong password is, before
		// the limiter's memory, the database or bcrypt are spent on it.
		s.fail(w, r, core.Errorf(core.EUnauthorized, "wrong name or password, or the operator is disabled"))
		return
	}
	// A try counts as a failure while its password is compared (see
	// signInFailures), so tries sent at once cannot pass a lock together.
	try, wait := s.Operators.failures.try(clientAddr(r) + "\x00" + body.Name)
	if wait > 0 {
		s.fail(w, r, core.Errorf(core.ERateLimited, "too many wrong passwords for %s: wait", body.Name).
			With("retry_after_seconds", int(wait.Seconds())+1))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	o, hash, err := s.Operators.Store.OperatorByName(ctx, body.Name)
	switch {
	case core.ErrorCode(err) == core.ENotFound:
		hash = noOperatorHash
	case err != nil:
		try.done(false)
		s.fail(w, r, err)
		return
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(body.Password)) != nil || o == nil || o.Disabled {
		try.done(true)
		s.Log.Warn("operator sign-in refused", "operator", body.Name, "addr", clientAddr(r), "request_id", requestID(r))
		s.fail(w, r, core.Errorf(core.EUnauthorized, "wrong name or password, or the operator is disabled"))
		return
	}
	try.done(false)
	ttl := s.Operators.TokenTTL
	if ttl == 0 {
		ttl = core.OperatorTokenTTL
	}
	tok, exp, err := s.Tokens.Operator(o.Name, o.Role, ttl)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.Log.Info("operator signed in", "audit", "sign_in", "operator", o.Name, "role", o.Role, "addr", clientAddr(r), "request_id", requestID(r))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp, "operator": o})
}

func (s *Server) operatorMe(w http.ResponseWriter, r *http.Request) {
	o, _, err := s.operator(r, core.PermReadShows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	perms := []string{}
	for _, p := range []string{core.PermReadShows, core.PermEditShows, core.PermCancel, core.PermSales, core.PermDials, core.PermOperators} {
		if core.RoleMay(o.Role, p) {
			perms = append(perms, p)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"operator": o, "permissions": perms})
}

func (s *Server) listOperators(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermOperators); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	ops, err := s.Operators.Store.ListOperators(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"operators": ops})
}

func (s *Server) createOperator(w http.ResponseWriter, r *http.Request) {
	_, by, err := s.operator(r, core.PermOperators)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var n core.NewOperator
	if err := decode(w, r, &n); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := n.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	hash, err := HashPassword(n.Password, s.Operators.PasswordCost)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	o, err := s.Operators.Store.CreateOperator(ctx, n, hash, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/operator/v1/operators/"+o.Name)
	writeJSON(w, http.StatusCreated, o)
}

func (s *Server) patchOperator(w http.ResponseWriter, r *http.Request) {
	me, by, err := s.operator(r, core.PermOperators)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var p core.OperatorPatch
	if err := decode(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := p.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("name")
	if name == me.Name && ((p.Disabled != nil && *p.Disabled) || (p.Role != nil && *p.Role != core.RoleAdmin)) {
		// The last admin could lock everyone out; another admin does it.
		s.fail(w, r, core.Errorf(core.EConflict, "an admin cannot disable or demote themselves: ask another admin"))
		return
	}
	var hash []byte
	if p.Password != nil {
		if hash, err = HashPassword(*p.Password, s.Operators.PasswordCost); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	o, err := s.Operators.Store.UpdateOperator(ctx, name, p, hash, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// auditFilter reads an audit listing's before (an entry id) and limit.
func auditFilter(r *http.Request, subject string) (core.AuditFilter, error) {
	f := core.AuditFilter{Subject: subject, Limit: core.DefaultPage}
	q := r.URL.Query()
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return f, core.Errorf(core.EInvalid, "before is an audit entry's id")
		}
		f.Before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > core.MaxPage {
			return f, core.Errorf(core.EInvalid, "limit must be 1 to %d: page with before for more", core.MaxPage)
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) serveAudit(w http.ResponseWriter, r *http.Request, perm, subject string) {
	if _, _, err := s.operator(r, perm); err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := auditFilter(r, subject)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	entries, err := s.Operators.Store.Audit(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries})
}

// auditLog is the whole audit log (admins), newest first.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request) {
	s.serveAudit(w, r, core.PermOperators, r.URL.Query().Get("subject"))
}

// showAudit is one show's audit trail, newest first.
func (s *Server) showAudit(w http.ResponseWriter, r *http.Request) {
	id, ok := s.showID(w, r)
	if !ok {
		return
	}
	s.serveAudit(w, r, core.PermReadShows, "event:"+strconv.FormatInt(id, 10))
}

func (s *Server) listLayouts(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermReadShows); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	ls, err := s.Operators.Shows.VenueLayouts(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"layouts": ls})
}

var layoutNamePattern = regexp.MustCompile(`^[\p{L}\p{N} ._()-]{1,100}$`)

// importLayout stores the layout document in the body (core/layout's
// JSON, the seed's format) under ?name= (default "standard"). A document
// that does not parse or validate is refused invalid_request with
// "problems": each naming where (line and column, or the section, row and
// seat) and what.
func (s *Server) importLayout(w http.ResponseWriter, r *http.Request) {
	_, by, err := s.operator(r, core.PermEditShows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "standard"
	}
	if !layoutNamePattern.MatchString(name) {
		s.fail(w, r, core.Errorf(core.EInvalid, "name is 1 to 100 letters, digits, spaces or ._()-"))
		return
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLayoutBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.fail(w, r, core.Errorf(core.ETooLarge, "a layout is at most %d bytes", maxLayoutBytes))
		return
	case err != nil:
		s.fail(w, r, core.Errorf(core.EInvalid, "read the layout: %v", err))
		return
	}
	if err := exactNames(b, reflect.TypeOf(layout.Layout{})); err != nil {
		s.fail(w, r, err)
		return
	}
	l, err := layout.ParseBytes(b)
	var probs *layout.Problems
	if errors.As(err, &probs) {
		e := core.Errorf(core.EInvalid, "the layout has %d problem(s): %s", len(probs.List)+probs.More, probs.List[0].Path+": "+probs.List[0].Message).
			With("problems", probs.List)
		if probs.More > 0 {
			e = e.With("more_problems", probs.More)
		}
		s.fail(w, r, e)
		return
	}
	if err != nil {
		s.fail(w, r, core.Errorf(core.EInvalid, "%v", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	vl, err := s.Operators.Shows.ImportLayout(ctx, name, l, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/operator/v1/layouts/"+strconv.FormatInt(vl.ID, 10))
	writeJSON(w, http.StatusCreated, vl)
}

// getLayout answers a layout and its document (sections, rows, seat
// numbers and bands: what the console draws as a seat map).
func (s *Server) getLayout(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermReadShows); err != nil {
		s.fail(w, r, err)
		return
	}
	id, err := strconv.ParseInt(r.PathValue("layout"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, core.Errorf(core.ENotFound, "no layout %q", r.PathValue("layout")))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	vl, l, err := s.Operators.Shows.VenueLayout(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"layout": vl, "document": l})
}

// operatorEvents lists shows of every status (status=, repeated, narrows
// it), with the catalog's filters and paging.
func (s *Server) operatorEvents(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermReadShows); err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := eventFilter(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.serveEvents(w, r, f, "no-store")
}

func (s *Server) operatorEvent(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermReadShows); err != nil {
		s.fail(w, r, err)
		return
	}
	id, ok := s.showID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	e, err := s.Catalog.Event(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, e)
}

// createShows creates one or many draft shows of a title on a layout
// (core.ShowRequest); the answer lists them.
func (s *Server) createShows(w http.ResponseWriter, r *http.Request) {
	_, by, err := s.operator(r, core.PermEditShows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req core.ShowRequest
	if err := decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.LayoutID <= 0 {
		s.fail(w, r, core.Errorf(core.EInvalid, "layout_id is required: a layout's id (GET /operator/v1/layouts)"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 4*requestTimeout) // a series of large shows copies many seats
	defer cancel()
	vl, l, err := s.Operators.Shows.VenueLayout(ctx, req.LayoutID)
	if core.ErrorCode(err) == core.ENotFound {
		err = core.Errorf(core.EInvalid, "no layout %d: import one first", req.LayoutID)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	zone, err := time.LoadLocation(vl.Venue.Timezone)
	if err != nil {
		s.fail(w, r, core.Errorf(core.EInvalid, "the venue's time zone %q is unknown", vl.Venue.Timezone))
		return
	}
	plan, err := req.Plan(zone, vl.Bands, time.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shows, err := s.Operators.Shows.CreateShows(ctx, plan, vl, l, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"events": shows})
}

// patchShow edits a show until core.EditFreeze before its sale opens.
func (s *Server) patchShow(w http.ResponseWriter, r *http.Request) {
	_, by, err := s.operator(r, core.PermEditShows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, ok := s.showID(w, r)
	if !ok {
		return
	}
	var p core.ShowPatch
	if err := decode(w, r, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	e, err := s.Operators.Shows.UpdateShow(ctx, id, func(before core.Event, now time.Time) (core.Event, error) {
		zone, err := time.LoadLocation(before.Venue.Timezone)
		if err != nil {
			return before, core.Errorf(core.EInvalid, "the venue's time zone %q is unknown", before.Venue.Timezone)
		}
		return p.Apply(before, zone, now)
	}, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// showStatus moves a show to status to (publish, close).
func (s *Server) showStatus(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, by, err := s.operator(r, core.PermEditShows)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		id, ok := s.showID(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		e, err := s.Operators.Shows.SetShowStatus(ctx, id, to, by)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, e)
	}
}

type cancelBody struct {
	Reason string `json:"reason"`
}

// cancelShow cancels a show: every confirmed booking is refunded through
// the outbox and its holder told; the answer has the progress so far
// (GET .../cancellation follows it).
func (s *Server) cancelShow(w http.ResponseWriter, r *http.Request) {
	_, by, err := s.operator(r, core.PermCancel)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id, ok := s.showID(w, r)
	if !ok {
		return
	}
	var body cancelBody
	if err := decode(w, r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	body.Reason = strings.TrimSpace(body.Reason)
	if utf8.RuneCountInString(body.Reason) > core.MaxCancelReason {
		s.fail(w, r, core.Errorf(core.EInvalid, "reason is at most %d characters", core.MaxCancelReason))
		return
	}
	// A show of 40,000 bookings moves them all in one transaction.
	ctx, cancel := context.WithTimeout(r.Context(), 6*requestTimeout)
	defer cancel()
	e, c, err := s.Operators.Shows.CancelShow(ctx, id, body.Reason, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.Log.Warn("show cancelled", "audit", "show.cancel", "operator", by.Operator, "request_id", by.RequestID, "event", id,
		"bookings", c.Bookings, "due_paise", c.DuePaise)
	writeJSON(w, http.StatusOK, map[string]any{"event": e, "cancellation": c})
}

// cancellation reports how far a show's cancellation has come.
func (s *Server) cancellation(w http.ResponseWriter, r *http.Request) {
	if _, _, err := s.operator(r, core.PermReadShows); err != nil {
		s.fail(w, r, err)
		return
	}
	id, ok := s.showID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	c, err := s.Operators.Shows.Cancellation(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, c)
}

// wantCSV reads a report's format: format=csv, or format=json (the default).
func wantCSV(r *http.Request) (bool, error) {
	switch r.URL.Query().Get("format") {
	case "", "json":
		return false, nil
	case "csv":
		return true, nil
	}
	return false, core.Errorf(core.EInvalid, "format must be json or csv")
}

// writeCSV answers rows as a CSV download named name.
func writeCSV(w http.ResponseWriter, name string, rows [][]string) {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	for _, row := range rows {
		for i, cell := range row {
			row[i] = csvSafe(cell)
		}
	}
	cw := csv.NewWriter(w)
	_ = cw.WriteAll(rows) // the header is sent: a broken connection cannot be answered
}

// csvSafe keeps a cell from being read as a formula by a spreadsheet (a
// fan's email address is theirs to choose): a cell starting with = + - @,
// a tab or a carriage return gets a leading apostrophe (OWASP's advice).
func csvSafe(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) && !phoneNumber.MatchString(cell) {
		return "'" + cell
	}
	return cell
}

// phoneNumber is a cell a spreadsheet reads as a number, not a formula: a
// phone in E.164 (+919812345678) keeps its plus.
var phoneNumber = regexp.MustCompile(`^\+?[0-9]{1,15}$`)

func inr(paise int64) string { return fmt.Sprintf("%d.%02d", paise/100, paise%100) }

// sales answers a show's figures per band (JSON, or CSV with format=csv).
func (s *Server) sales(w http.ResponseWriter, r *http.Request) {
	id, csvOut, ok := s.report(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	sales, err := s.Operators.Shows.Sales(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !csvOut {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, sales)
		return
	}
	rows := [][]string{{"band", "name", "price_inr", "capacity", "sold", "held", "available", "revenue_inr", "refunded", "refunded_inr"}}
	for _, b := range append(sales.Bands, sales.Total) {
		code, name, price := b.Code, b.Name, inr(b.PricePaise)
		if code == "" {
			code, name, price = "TOTAL", "", ""
		}
		rows = append(rows, []string{code, name, price, strconv.Itoa(b.Capacity), strconv.Itoa(b.Sold), strconv.Itoa(b.Held),
			strconv.Itoa(b.Available), inr(b.RevenuePaise), strconv.Itoa(b.Refunded), inr(b.RefundedPaise)})
	}
	writeCSV(w, fmt.Sprintf("show-%d-sales.csv", id), rows)
}

// attendees answers a show's valid tickets, with their holders' contacts
// and check-ins: the gate's list (JSON, or CSV with format=csv).
func (s *Server) attendees(w http.ResponseWriter, r *http.Request) {
	id, csvOut, ok := s.report(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*requestTimeout)
	defer cancel()
	list, err := s.Operators.Shows.Attendees(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !csvOut {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]any{"event_id": id, "attendees": list})
		return
	}
	rows := [][]string{{"ticket", "booking", "seat", "band", "phone", "email", "checked_in_at", "gate"}}
	for _, a := range list {
		at := ""
		if a.CheckedInAt != nil {
			at = a.CheckedInAt.UTC().Format(time.RFC3339)
		}
		rows = append(rows, []string{a.Ticket, strconv.FormatInt(a.Booking, 10), a.Seat, a.Band, a.Phone, a.Email, at, a.Gate})
	}
	writeCSV(w, fmt.Sprintf("show-%d-attendees.csv", id), rows)
}

// report authorizes a report (PermSales: it names fans' contacts) and
// reads its show and format.
func (s *Server) report(w http.ResponseWriter, r *http.Request) (int64, bool, bool) {
	if _, _, err := s.operator(r, core.PermSales); err != nil {
		s.fail(w, r, err)
		return 0, false, false
	}
	id, ok := s.showID(w, r)
	if !ok {
		return 0, false, false
	}
	csvOut, err := wantCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return 0, false, false
	}
	return id, csvOut, true
}

// Failed operator sign-ins are limited per address and name: a burst of
// signInBurst, then one every signInEvery; a locked pair is answered 429
// whatever the password, so guessing learns nothing while locked. A try
// in flight counts against the bucket until its password is compared, so
// tries sent at once cannot all pass a lock the first of them would set;
// a right password spends nothing. (No limit per name from any address: it
// would let anyone lock an operator out on sale day; bcrypt's cost and
// passwords of 12 bytes or more bound guessing from many addresses.)
const (
	signInBurst = 10
	signInEvery = 6 * time.Second
	signInKeys  = 100_000
)

type signInBucket struct {
	lim      *rate.Limiter
	inFlight int
}

type signInFailures struct {
	mu    sync.Mutex
	every time.Duration
	m     map[string]*signInBucket
}

func newSignInFailures(every time.Duration) *signInFailures {
	return &signInFailures{every: every, m: make(map[string]*signInBucket)}
}

// bucket is key's bucket (f.mu held); past signInKeys keys, the refilled
// and idle ones are dropped first, and a new key shares the overflow bucket.
func (f *signInFailures) bucket(key string) *signInBucket {
	if b, ok := f.m[key]; ok {
		return b
	}
	if len(f.m) >= signInKeys {
		now := time.Now()
		for k, b := range f.m {
			if b.inFlight == 0 && b.lim.TokensAt(now) >= signInBurst {
				delete(f.m, k)
			}
		}
		if len(f.m) >= signInKeys {
			key = "\x00overflow"
			if b, ok := f.m[key]; ok {
				return b
			}
		}
	}
	b := &signInBucket{lim: rate.NewLimiter(rate.Every(f.every), signInBurst)}
	f.m[key] = b
	return b
}

// signInTry is one sign-in in flight; done ends it.
type signInTry struct {
	f *signInFailures
	b *signInBucket
}

// try starts a sign-in of key, or says how long a locked key waits.
func (f *signInFailures) try(key string) (*signInTry, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bucket(key)
	if left := b.lim.TokensAt(time.Now()) - float64(b.inFlight); left < 1 {
		return nil, max(time.Duration((1-left)*float64(f.every)), time.Second)
	}
	b.inFlight++
	return &signInTry{f: f, b: b}, 0
}

// done ends the try: a wrong password spends its failure.
func (t *signInTry) done(failed bool) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.b.inFlight--
	if failed {
		t.b.lim.Allow()
	}
}
