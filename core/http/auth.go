package http

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/onsale/onsale/core"
)

// ClientAddrHeader carries the fan's address from the gateway, which sets
// it on every request it forwards (overwriting a client's). Only gateways
// reach the core, so the core trusts it for the per-address limits.
const ClientAddrHeader = "X-Onsale-Client-Addr"

// smsTimeout bounds the code SMS, sent while the fan waits.
const smsTimeout = 5 * time.Second

// CodeSender sends a text message (core/notify's SMS).
type CodeSender interface {
	Send(ctx context.Context, to, text string) error
}

// Accounts wires sign-in by phone and code and /v1/me. The rules are
// core's (core/account.go); the store counts the limits.
type Accounts struct {
	Store core.Accounts
	// SMS sends the codes. The send is synchronous, within smsTimeout: the
	// fan waits for the code anyway, a failed send is answered at once (503,
	// press resend), and the code never has to be kept in clear for a
	// background job (the store keeps only its HMAC).
	SMS CodeSender
	// LogCodes, for development without an SMS gateway, logs each code at
	// warn level. Without it and without SMS, sign-in answers 503.
	LogCodes bool
	Limits   core.SignInLimits
	TokenTTL time.Duration // 0: core.AccountTokenTTL
}

func (s *Server) accountRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		writeJSON(w, http.StatusOK, s.Tokens.JWKS())
	})
	if s.Accounts == nil {
		return
	}
	mux.HandleFunc("POST /v1/auth/code", s.sendCode)
	mux.HandleFunc("POST /v1/auth/verify", s.verifyCode)
	mux.HandleFunc("GET /v1/me", s.getMe)
	mux.HandleFunc("PATCH /v1/me", s.patchMe)
	mux.HandleFunc("GET /v1/me/bookings", s.myBookings)
}

// clientAddr is the key the per-address limits count the fan under
// (core.AddrKey: IPv4 by address, IPv6 by /64): the gateway's header if it
// is an IP address, else the TCP peer's.
func clientAddr(r *http.Request) string {
	if k, ok := core.AddrKey(r.Header.Get(ClientAddrHeader)); ok {
		return k
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if k, ok := core.AddrKey(host); ok {
		return k
	}
	return host
}

// countSignIn counts a sign-in request's outcome.
func (s *Server) countSignIn(step string, err error) {
	outcome := map[string]string{"code": "sent", "verify": "verified"}[step]
	if err != nil {
		switch c := core.ErrorCode(err); c {
		case core.ECodeInvalid, core.ERateLimited, core.EUnavailable:
			outcome = c
		case core.EInvalid, core.ETooLarge:
			outcome = "invalid"
		default:
			outcome = "error"
		}
	}
	s.Metrics.SignIns.WithLabelValues(step, outcome).Inc()
}

// sendCode sends a sign-in code. The answer is the same whether or not the
// number has an account: nothing about accounts is looked up.
func (s *Server) sendCode(w http.ResponseWriter, r *http.Request) {
	err := s.sendCodeErr(w, r)
	s.countSignIn("code", err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusAccepted, map[string]any{"sent": true,
		"expires_in_seconds": int(core.CodeTTL / time.Second), "resend_after_seconds": int(core.ResendAfter / time.Second)})
}

func (s *Server) sendCodeErr(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Phone string `json:"phone"`
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	phone, err := core.NormalizePhone(in.Phone)
	if err != nil {
		return err
	}
	a := s.Accounts
	if a.SMS == nil && !a.LogCodes {
		return core.Errorf(core.EUnavailable, "sign-in codes cannot be sent: no SMS gateway is configured")
	}
	code, err := core.NewCode()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	hash := core.CodeHash(s.Tokens.CodeKey(), phone, code)
	err = a.Store.StoreCode(ctx, core.CodeRequest{Phone: phone, Addr: clientAddr(r), Hash: hash}, a.Limits)
	if err != nil {
		return err
	}
	if a.SMS == nil {
		s.Log.Warn("sign-in code (development: no SMS gateway, ONSALE_DEV_LOG_CODES)", "phone", phone, "code", code)
		return nil
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), smsTimeout)
	defer scancel()
	if err := a.SMS.Send(sctx, phone, core.CodeSMS(code)); err != nil {
		s.Log.Warn("sign-in code not sent", "err", err)
		// Nobody received this code: it must not stay the live one, use
		// up the resend wait or count as a send to the phone.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
		defer dcancel()
		if derr := a.Store.DropCode(dctx, phone, hash); derr != nil {
			s.Log.Warn("unsent sign-in code not dropped", "err", derr)
		}
		return core.Errorf(core.EUnavailable, "the code could not be sent: press resend to try again")
	}
	return nil
}

// verifyCode signs a fan in: a right code gets an account token.
func (s *Server) verifyCode(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Phone string `json:"phone"`
		Code  string `json:"code"`
	}
	if err := decode(w, r, &in); err != nil {
		s.countSignIn("verify", err)
		s.fail(w, r, err)
		return
	}
	phone, err := core.NormalizePhone(in.Phone)
	if err == nil && !core.ValidCodeShape(in.Code) {
		err = core.Errorf(core.EInvalid, "code must be %d digits", core.CodeDigits)
	}
	if err != nil {
		s.countSignIn("verify", err)
		s.fail(w, r, err)
		return
	}
	a := s.Accounts
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	acct, err := a.Store.VerifyCode(ctx, phone, clientAddr(r), core.CodeHash(s.Tokens.CodeKey(), phone, in.Code), a.Limits)
	s.countSignIn("verify", err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ttl := a.TokenTTL
	if ttl <= 0 {
		ttl = core.AccountTokenTTL
	}
	tok, exp, err := s.Tokens.Account(acct.ID, ttl)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"token": tok, "expires_at": exp.UTC().Truncate(time.Second), "account": acct})
}

// me resolves an account token into its account id.
func (s *Server) me(r *http.Request) (*core.Principal, int64, error) {
	p, err := s.principal(r)
	if err == nil {
		err = p.MayUseAccount()
	}
	if err != nil {
		return nil, 0, err
	}
	id, err := strconv.ParseInt(p.AccountID, 10, 64)
	if err != nil || id <= 0 {
		return nil, 0, core.Errorf(core.EUnauthorized, "the token is not valid")
	}
	return p, id, nil
}

func (s *Server) getMe(w http.ResponseWriter, r *http.Request) {
	_, id, err := s.me(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	acct, err := s.Accounts.Store.Account(ctx, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, acct)
}

func (s *Server) patchMe(w http.ResponseWriter, r *http.Request) {
	_, id, err := s.me(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var in struct {
		Email *string `json:"email"`
	}
	if err := decode(w, r, &in); err != nil {
		s.fail(w, r, err)
		return
	}
	if in.Email == nil {
		s.fail(w, r, core.Errorf(core.EInvalid, `give {"email": "..."} ("" removes it)`))
		return
	}
	patch := core.AccountPatch{Email: in.Email}
	if err := patch.Normalize(); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	acct, err := s.Accounts.Store.UpdateAccount(ctx, id, patch)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, acct)
}

// myBookings lists the account's bookings, upcoming shows first, with
// their tickets.
func (s *Server) myBookings(w http.ResponseWriter, r *http.Request) {
	p, _, err := s.me(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	bs, err := s.Accounts.Store.AccountBookings(ctx, p.Identity)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i := range bs {
		s.showTickets(&bs[i])
	}
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, map[string]any{"bookings": bs})
}

// retryAfter sets Retry-After from a rate_limited error's detail.
func retryAfter(w http.ResponseWriter, e *core.Error) {
	secs := 60
	switch v := e.Detail["retry_after_seconds"].(type) {
	case int:
		secs = v
	case json.Number:
		if n, err := v.Int64(); err == nil {
			secs = int(n)
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
}
