package http

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/account"
)

// Gate serves the gate's API to staff tokens: scan (redeem a ticket once),
// the offline pack, and the sync of offline scans.
type Gate struct {
	CheckIns core.CheckIns
	// TicketKey verifies tickets (the ticket key's public half).
	TicketKey ed25519.PublicKey
	// Staff verifies staff tokens (aud onsale-gate, the core's signing key).
	Staff *ticket.StaffVerifier
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (s *Server) gateRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/gate/scan", s.gateScan)
	mux.HandleFunc("GET /v1/gate/offline", s.gateOffline)
	mux.HandleFunc("POST /v1/gate/sync", s.gateSync)
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// staff verifies the bearer staff token.
func (g *Gate) staff(r *http.Request) (core.Staff, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return core.Staff{}, core.Errorf(core.EUnauthorized, "a staff token is required: Authorization: Bearer <token> (bin/stafftoken makes one)")
	}
	st, err := g.Staff.Verify(strings.TrimSpace(tok))
	switch {
	case errors.Is(err, account.ErrExpired):
		return core.Staff{}, core.Errorf(core.ETokenExpired, "the staff token has expired: ask for a new one")
	case err != nil:
		return core.Staff{}, core.Errorf(core.EUnauthorized, "the staff token is not valid")
	}
	return st, nil
}

// verify checks a QR payload's signature and shape.
func (g *Gate) verify(payload string) (*ticket.Claims, error) {
	c, err := ticket.Verify(g.TicketKey, payload)
	switch {
	case errors.Is(err, ticket.ErrSignature):
		return nil, core.Errorf(core.ETicketInvalid, "not a ticket of ours: the signature does not verify")
	case err != nil:
		return nil, core.Errorf(core.ETicketInvalid, "not a ticket: the code cannot be read as one")
	}
	return c, nil
}

// scanBody is POST /v1/gate/scan's body.
type scanBody struct {
	Ticket string `json:"ticket"`
	// ScanID is the scanner's UUID for this look (optional): sent again,
	// by a retry or a sync, it is recognised as the same scan.
	ScanID string `json:"scan_id"`
}

// badScanID is the answer to a scan id that is not a UUID.
var badScanID = core.Errorf(core.EInvalid, "scan_id is a UUID (or absent)")

// ScanAnswer is a scan's 200 answer.
type ScanAnswer struct {
	Result string `json:"result"` // "admitted"
	*core.CheckIn
}

func (s *Server) gateScan(w http.ResponseWriter, r *http.Request) {
	g := s.Gate
	st, err := g.staff(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body scanBody
	if err := decode(w, r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if !core.ValidScanID(body.ScanID) {
		s.fail(w, r, badScanID)
		return
	}
	c, err := g.verify(body.Ticket)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	in, err := g.CheckIns.Redeem(ctx, core.Scan{Event: c.Event, Booking: c.Booking, N: c.N, Staff: st, At: g.now(), ScanID: body.ScanID})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ScanAnswer{Result: "admitted", CheckIn: in})
}

// OfflineAnswer is GET /v1/gate/offline's answer: the pack, the ticket
// public key (base64 of the raw 32-byte Ed25519 key) and who asked.
type OfflineAnswer struct {
	*core.OfflinePack
	PublicKey string `json:"public_key"`
	Gate      string `json:"gate"`
	Staff     string `json:"staff"`
	// Note says what offline checking can and cannot promise.
	Note string `json:"note"`
}

// OfflineNote is the offline pack's note.
const OfflineNote = "offline scans check the signature, today's events, this list of revoked tickets and the scanner's own scans; " +
	"two scanners offline can each admit a copy of one ticket: the duplicate is reported when they sync"

func (s *Server) gateOffline(w http.ResponseWriter, r *http.Request) {
	g := s.Gate
	st, err := g.staff(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			s.fail(w, r, core.Errorf(core.EInvalid, "since is an RFC 3339 time (the previous pack's as_of)"))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	p, err := g.CheckIns.Offline(ctx, st.Venue, g.now(), since)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, OfflineAnswer{OfflinePack: p, PublicKey: base64.StdEncoding.EncodeToString(g.TicketKey),
		Gate: st.Gate, Staff: core.StaffPrefix + st.Name, Note: OfflineNote})
}

// syncBody is POST /v1/gate/sync's body: the scans made offline.
type syncBody struct {
	Scans []struct {
		Ticket string    `json:"ticket"`
		At     time.Time `json:"at"`
		ScanID string    `json:"scan_id"`
	} `json:"scans"`
}

// SyncAnswer is POST /v1/gate/sync's answer: one result per scan, in
// order, and the counts.
type SyncAnswer struct {
	Results    []core.SyncResult `json:"results"`
	Admitted   int               `json:"admitted"`
	Duplicates int               `json:"duplicates"`
	Refused    int               `json:"refused"`
}

// maxSyncAge bounds how old an offline scan's time may be; older (or
// future) times are recorded as the sync's time.
const maxSyncAge = 48 * time.Hour

func (s *Server) gateSync(w http.ResponseWriter, r *http.Request) {
	g := s.Gate
	st, err := g.staff(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body syncBody
	if err := decode(w, r, &body); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(body.Scans) > core.MaxSyncScans {
		s.fail(w, r, core.Errorf(core.EInvalid, "at most %d scans per sync", core.MaxSyncScans))
		return
	}
	for _, sc := range body.Scans {
		if !core.ValidScanID(sc.ScanID) {
			s.fail(w, r, badScanID)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	now := g.now()
	ans := SyncAnswer{Results: make([]core.SyncResult, 0, len(body.Scans))}
	for _, sc := range body.Scans {
		c, err := g.verify(sc.Ticket)
		if err != nil {
			ans.Results = append(ans.Results, core.SyncOutcome("", nil, err))
			ans.Refused++
			continue
		}
		at := sc.At
		if at.IsZero() || at.After(now.Add(time.Minute)) || at.Before(now.Add(-maxSyncAge)) {
			at = now
		}
		in, err := g.CheckIns.Redeem(ctx, core.Scan{Event: c.Event, Booking: c.Booking, N: c.N, Staff: st, At: at, Offline: true,
			ScanID: sc.ScanID, ClientAt: sc.At})
		if code := core.ErrorCode(err); err != nil && (code == core.EUnavailable || code == core.EInternal) {
			// The scanner keeps its scans and syncs again; scans
			// redeemed so far are recognised as its own then.
			s.fail(w, r, err)
			return
		}
		res := core.SyncOutcome(c.Ref(), in, err)
		switch res.Result {
		case core.SyncAdmitted:
			ans.Admitted++
		case core.SyncDuplicate:
			ans.Duplicates++
		default:
			ans.Refused++
		}
		ans.Results = append(ans.Results, res)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ans)
}
