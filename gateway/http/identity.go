package http

import (
	"bytes"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/shared/account"
)

// identity is the fan joining. A request with an account token (Bearer)
// is that account's, "acct:<id>", whatever the event: the token must verify
// against the core's keys and carry phone_verified. Without one, an event
// whose account_required dial is on refuses the join; any other takes a
// guest, "vis:<id>", the id from the signed visitor cookie, or a fresh one
// minted here (a missing, unsigned or forged cookie: a client never
// chooses its identity). One identity holds one place, so tabs, devices
// and refreshes share it.
// Errors: identity_required (no account token where one is needed, or a
// bad one), phone_not_verified, unavailable (the core's keys are not known
// yet: the gateway started before the core and cannot tell).
func (s *Server) identity(ctx *fasthttp.RequestCtx, accountRequired bool) (string, error) {
	if tok, ok := bearer(ctx); ok {
		return s.account(tok)
	}
	if accountRequired {
		return "", gateway.Errorf(gateway.EIdentity, "this sale is for signed-in fans: sign in with your phone number to join the queue")
	}
	if id, ok := s.cfg.Queue.Visitor(s.cookie(ctx, visitorCookie)); ok {
		return "vis:" + id, nil
	}
	id, cookie := s.cfg.Queue.NewVisitor()
	s.setCookie(ctx, visitorCookie, cookie, 30*24*time.Hour)
	return "vis:" + id, nil
}

// account verifies an account token (shared/account, against the core's
// JWKS) and returns its identity.
func (s *Server) account(tok string) (string, error) {
	if s.cfg.Accounts == nil || len(s.cfg.Accounts.Keys()) == 0 {
		return "", gateway.Errorf(gateway.EUnavailable, "sign-in cannot be checked right now; try again in a moment")
	}
	c, err := s.cfg.Accounts.Verify(tok)
	switch {
	case errors.Is(err, account.ErrExpired):
		return "", gateway.Errorf(gateway.EIdentity, "your sign-in has expired: sign in again")
	case err != nil:
		return "", gateway.Errorf(gateway.EIdentity, "the account token is not valid: sign in again")
	case !c.PhoneVerified:
		return "", gateway.Errorf(gateway.EPhoneUnverified, "verify your phone number to join the queue")
	}
	return c.Identity(), nil
}

// bearer is the request's Authorization bearer token, if any.
func bearer(ctx *fasthttp.RequestCtx) (string, bool) {
	tok := bearerBytes(ctx)
	return string(tok), len(tok) > 0
}

// bearerBytes is bearer as the request holds it (no copy: good until the
// handler returns); empty if none: an Authorization of another scheme
// (Basic, from a site behind a password) is no bearer, and the fan joins
// as a guest as it would without one.
func bearerBytes(ctx *fasthttp.RequestCtx) []byte {
	tok, ok := bytes.CutPrefix(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization), []byte("Bearer "))
	if !ok {
		return nil
	}
	return tok
}
