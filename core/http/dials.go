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

// Dials serves the gateways' durable copy of each event's waiting-room
// dials (core.EventDials): GET and PATCH /internal/v1/events/{event}/dials.
//
// Authentication: the operators' admin token, the same secret the
// gateways' operators' API takes (ONSALE_ADMIN_TOKEN on both services), as
// "Authorization: Bearer <token>", compared in constant time. The gateway
// sends it on its own reads (setting a room up again after Redis lost it)
// and on each operator's change, which it stores here before Redis. No
// token configured: the routes are not served (404), and a gateway with
// an operators' API then fails closed rather than forget a pause.
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

// dialsAuth checks the bearer token and reads the event id.
func (s *Server) dialsAuth(r *http.Request) (int64, error) {
	want := []byte("Bearer " + s.Dials.Token)
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
		return 0, core.Errorf(core.EUnauthorized, "the admin token is required")
	}
	id, ok := eventID(r)
	if !ok {
		return 0, core.Errorf(core.ENotFound, "no event %q", r.PathValue("event"))
	}
	return id, nil
}

func (s *Server) dialsGet(w http.ResponseWriter, r *http.Request) {
	id, err := s.dialsAuth(r)
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
	id, err := s.dialsAuth(r)
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
	d, err := s.Dials.Store.PatchDials(ctx, id, body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"event_id": id, "dials": d})
}
