package http

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
)

// Tokens mints and checks the core's own tokens (core/token's Keys
// implements it).
type Tokens interface {
	// Principal verifies an account token, hold grant or ticket link;
	// token.ErrNotOurs for any other token (an admit token).
	Principal(tok string) (*core.Principal, error)
	HoldGrant(h *core.Hold) (string, error)
	Account(id int64, ttl time.Duration) (string, time.Time, error)
	Operator(name, role string, ttl time.Duration) (string, time.Time, error)
	JWKS() admission.JWKS
	CodeKey() []byte
}

// principal resolves the request's bearer token into who it acts for: an
// admit token (the gateway's), or one of the core's own (an account token,
// a hold grant, a ticket link). What the principal may do is core's rule
// (core/principal.go); this only says who it is.
func (s *Server) principal(r *http.Request) (*core.Principal, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return nil, core.Errorf(core.EUnauthorized, "a token is required: Authorization: Bearer <token>")
	}
	// The admit token first: it is the hot path's token and its verifier
	// caches, while a core token fails it at once on its unknown key id.
	c, err := s.Verifier.Verify(tok)
	switch {
	case err == nil:
	case errors.Is(err, admission.ErrExpired):
		return nil, core.Errorf(core.ETokenExpired, "the admit token has expired: join the queue again")
	case s.Tokens == nil:
		return nil, core.Errorf(core.EUnauthorized, "the token is not valid")
	default:
		p, err := s.Tokens.Principal(tok)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, token.ErrExpired):
			return nil, core.Errorf(core.ETokenExpired, "the token has expired: sign in again, or open the newest link")
		default:
			return nil, core.Errorf(core.EUnauthorized, "the token is not valid")
		}
	}
	return &core.Principal{Kind: core.PrincipalAdmit, Identity: c.Account(), EventID: c.EventID, Max: c.Max}, nil
}

// withGrant adds the hold's grant to a hold answer (none without Tokens).
func (s *Server) withGrant(h *core.Hold) *core.Hold {
	if s.Tokens == nil || h.EventStartsAt.IsZero() {
		return h
	}
	tok, err := s.Tokens.HoldGrant(h)
	if err != nil {
		s.Log.Error("hold grant not signed", "hold", h.ID, "err", err)
		return h
	}
	h.Token = tok
	return h
}

// showTickets signs a booking's tickets and names their QR images, for a
// confirmed booking whose money is taken; no tickets otherwise.
func (s *Server) showTickets(b *core.Booking) {
	if b.Status != core.BookingConfirmed || !b.Captured || s.Payments == nil || s.Payments.Tickets == nil {
		b.Tickets = nil
		return
	}
	b.Tickets = s.Payments.Tickets.SignTickets(b)
	for i := range b.Tickets {
		b.Tickets[i].QR = "/v1/bookings/" + strconv.FormatInt(b.ID, 10) + "/tickets/" + strconv.Itoa(b.Tickets[i].N) + "/qr.png"
	}
}
