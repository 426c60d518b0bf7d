package http

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"

	"github.com/onsale/onsale/core"
)

// Dials serves the durable copy of each event's waiting-room dials
// (core.EventDials): GET and PATCH /internal/v1/events/{event}/dials.
//
// Authentication: a GET is the gateways' own (setting a room up again
// after Redis lost it), with the gateways' service token (ONSALE_ADMIN_TOKEN
// on both services) as "Authorization: Bearer <token>", compared in
// constant time; or an operator's token that may read shows. A PATCH is an
// operator's change, which the gateway stores here before Redis with the
// operator's own token: the operator must have core.PermDials now, and the
// change is audited under their name. No service token configured: the
// routes are not served (404), and a gateway with an operators' API then
// fails closed rather than forget a pause.
type Dials struct {
	Store core.EventDials
	Token string // at least MinDialsToken bytes (main checks it)
}

// MinDialsToken is the shortest token the dials routes take: the
// gateway's own minimum for the admin token (gwhttp.MinAdminToken).
const MinDialsToken = 32

// maxDialsBody bounds a PATCH of dials (the gateway's own bound).
const maxDialsBody = 16 << 10

// maxDialNames bounds the dials one object may name: the gateway has a
// dozen; a body naming hundreds is not the gateway's.
const maxDialNames = 64

func (s *Server) dialsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /internal/v1/events/{event}/dials", s.dialsGet)
	mux.HandleFunc("PATCH /internal/v1/events/{event}/dials", s.dialsPatch)
}

// dialsAuth checks the bearer token (the service token, when service is
// allowed, or an operator's with perm) and reads the event id.
func (s *Server) dialsAuth(r *http.Request, service bool, perm string) (int64, core.Actor, error) {
	var by core.Actor
	want := []byte("Bearer " + s.Dials.Token)
	if !service || subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
		if s.Operators == nil || s.Tokens == nil {
			return 0, by, core.Errorf(core.EUnauthorized, "the service token is required")
		}
		var err error
		if _, by, err = s.operator(r, perm); err != nil {
			return 0, by, err
		}
	}
	id, ok := eventID(r)
	if !ok {
		return 0, by, core.Errorf(core.ENotFound, "no event %q", r.PathValue("event"))
	}
	return id, by, nil
}

func (s *Server) dialsGet(w http.ResponseWriter, r *http.Request) {
	id, _, err := s.dialsAuth(r, true, core.PermReadShows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	d, err := s.Dials.Store.Dials(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"event_id": id, "dials": d})
}

// dialsPatch merges a JSON object of dials into the event's stored ones:
// a body that is not a JSON object of at most maxDialNames values is
// refused invalid_request, and nothing is stored.
func (s *Server) dialsPatch(w http.ResponseWriter, r *http.Request) {
	id, by, err := s.dialsAuth(r, false, core.PermDials)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDialsBody))
	if err != nil {
		s.fail(w, r, core.Errorf(core.ETooLarge, "the body is over %d bytes", maxDialsBody))
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil || !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		s.fail(w, r, core.Errorf(core.EInvalid, "the body must be a JSON object of dials by name"))
		return
	}
	if len(obj) == 0 || len(obj) > maxDialNames {
		s.fail(w, r, core.Errorf(core.EInvalid, "the body must name 1 to %d dials", maxDialNames))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	d, err := s.Dials.Store.PatchDials(ctx, id, body, by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"event_id": id, "dials": d})
}
