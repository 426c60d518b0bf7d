package http

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/problem"
)

// KeyStore keeps idempotency keys (core/postgres implements it).
type KeyStore interface {
	// ClaimKey returns the claim's fence, which the other three take: they
	// change nothing once another request has claimed the key since.
	ClaimKey(ctx context.Context, account, key string, fingerprint []byte, lease time.Duration) (core.KeyFence, *core.StoredResponse, error)
	SaveResponse(ctx context.Context, account, key string, fence core.KeyFence, r core.StoredResponse) error
	ReleaseKey(ctx context.Context, account, key string, fence core.KeyFence) error
	// RenewKey extends the lease of a key still in flight (core.ErrKeyLost:
	// another request holds it now).
	RenewKey(ctx context.Context, account, key string, fence core.KeyFence, lease time.Duration) error
}

// Provider is what the payment routes ask of the payment provider (a
// core.PaymentProvider: core/paysim, core/stripe, core/razorpay).
type Provider interface {
	Name() string
	Takes(method string) bool
	// CreatePayment creates (or, under the same key, returns) a payment.
	CreatePayment(ctx context.Context, key string, r core.PaymentRequest) (*core.Payment, error)
	Payment(ctx context.Context, id string) (*core.Payment, error)
	// Webhook verifies a webhook with the provider's scheme and reads it.
	Webhook(h http.Header, body []byte, now time.Time) (*core.PaymentEvent, error)
}

// Jobs runs the outbox jobs a request queued (core/outbox's Worker
// implements it).
type Jobs interface {
	// RunNow runs the pending job of a kind for a booking within ctx and
	// reports whether it is done: for a request that answers from it.
	RunNow(ctx context.Context, kind core.JobKind, booking int64) bool
	// Kick hands the job to the worker's own loop and returns at once: the
	// worker owns it, and its shutdown waits for it.
	Kick(kind core.JobKind, booking int64)
}

// Tickets signs a booking's tickets and draws their QR codes
// (core/ticket's Signer implements it).
type Tickets interface {
	SignTickets(b *core.Booking) []core.Ticket
	QR(payload string, size int) ([]byte, error)
}

// Payments wires the payment routes: Pay (async), Confirm (sync), the
// provider's webhook, bookings and ticket QR codes.
type Payments struct {
	Bookings core.Bookings
	Keys     KeyStore
	Provider Provider
	Outbox   Jobs
	Tickets  Tickets
	// PublicURL is the gateway's public address: a provider's page sends
	// the payer back to <PublicURL>/events/<event>/book.
	PublicURL string
}

// keyLease is how long a request owns its idempotency key before a retry
// may take over (the request died without answering, or could not release
// the key). The request renews it every keyLease/3 while it runs (a card
// confirm may take 20 s when the provider is slow), so the lease can be
// short: when the database fails over under a request, its release fails
// too, and its fan's retries are told request_in_flight (409) until the
// lease runs out; with 8 s that is over before the new primary serves
// (about 10 s), instead of 20 s after it. A retry that takes over while
// the first request still runs (its renewals failed, or it was frozen)
// runs the same steps again, each safe to repeat (see unavailable in
// core/postgres).
const keyLease = 8 * time.Second

// result is a handler's answer, stored under the idempotency key for replay
// unless retry says the failure was transient (then the key is released).
type result struct {
	status int
	body   any
	retry  bool
}

func errResult(err error) result {
	var e *core.Error
	if !errors.As(err, &e) {
		e = core.Errorf(core.EInternal, "internal error")
	}
	code, ok := status[e.Code]
	if !ok {
		code = http.StatusInternalServerError
	}
	body := problem.New(e.Code, e.Message, code, "") // the request id is added as it is answered
	for k, v := range e.Detail {
		body[k] = v
	}
	return result{status: code, body: body, retry: code >= 500}
}

// idempotent runs fn at most once per (account, Idempotency-Key), following
// the IETF httpapi draft: the first request runs and its response is kept
// for 24 hours; a repeat with the same fingerprint gets the kept response;
// the same key with another request gets 422; a repeat while the first runs
// gets 409; no key gets 400.
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, account string, body []byte, fn func() result) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		s.fail(w, r, core.Errorf(core.EIdemMissing, "this operation needs an Idempotency-Key header (1 to 255 characters)"))
		return
	}
	h := sha256.New()
	io.WriteString(h, r.Method+" "+r.URL.Path+"\n")
	h.Write(body)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	fence, stored, err := s.Payments.Keys.ClaimKey(ctx, account, key, h.Sum(nil), keyLease)
	if err != nil {
		if core.ErrorCode(err) == core.EIdemInFlight {
			w.Header().Set("Retry-After", "1")
		}
		s.fail(w, r, err)
		return
	}
	if stored != nil {
		w.Header().Set("Idempotent-Replayed", "true")
		w.Header().Set("Content-Type", contentType(stored.Status))
		w.WriteHeader(stored.Status)
		w.Write(stored.Body)
		return
	}
	res := s.whileRenewing(account, key, fence, fn)
	if p, ok := res.body.(map[string]any); ok && res.status >= 400 {
		p["request_id"] = requestID(r) // a replay answers this first request's, as it answers its body
	}
	b, err := json.Marshal(res.body)
	if err != nil {
		res = result{status: http.StatusInternalServerError, retry: true}
		b = []byte(`{"error":"internal","message":"encode response"}`)
	}
	b = append(b, '\n')
	// The request's own context may be gone (client hung up): record the
	// outcome regardless, so the retry replays it.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
	defer scancel()
	if res.retry {
		err = s.Payments.Keys.ReleaseKey(sctx, account, key, fence)
		w.Header().Set("Retry-After", "2")
	} else {
		err = s.Payments.Keys.SaveResponse(sctx, account, key, fence, core.StoredResponse{Status: res.status, Body: b})
	}
	if errors.Is(err, core.ErrKeyLost) {
		// a retry took the key over while this request ran: its own
		// response is the one kept
		s.Log.Warn("idempotency key taken over by a retry; this response not recorded")
	} else if err != nil {
		s.Log.Error("idempotency key not recorded", "err", err)
	}
	w.Header().Set("Content-Type", contentType(res.status))
	w.WriteHeader(res.status)
	w.Write(b)
}

// contentType is the media type of an answer of status: a problem (RFC
// 9457) for an error.
func contentType(status int) string {
	if status >= 400 {
		return problem.ContentType
	}
	return "application/json"
}

// whileRenewing runs fn, renewing the key's lease every keyLease/3 until
// fn returns or the key is lost to another request. Each renewal gives up
// before the next is due, so a slow database cannot pile renewals up, and
// two missed renewals still leave a third inside the lease.
func (s *Server) whileRenewing(account, key string, fence core.KeyFence, fn func() result) result {
	done := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		tick := time.NewTicker(keyLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), keyLease/4)
				err := s.Payments.Keys.RenewKey(ctx, account, key, fence, keyLease)
				cancel()
				if errors.Is(err, core.ErrKeyLost) {
					s.Log.Warn("idempotency key taken over by a retry; no longer renewed")
					return
				}
				if err != nil {
					s.Log.Warn("idempotency key lease not renewed", "err", err)
				}
			}
		}
	}()
	defer func() { close(done); <-renewed }()
	return fn()
}

type payBody struct {
	Email        string `json:"email"`
	Phone        string `json:"phone"`
	PaymentToken string `json:"payment_token"`
}

// readBody reads an optional small JSON object body, returning the raw bytes
// (for the idempotency fingerprint) and the decoded fields.
func readBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, core.Errorf(core.ETooLarge, "the body is over %d bytes", MaxBodyBytes)
	}
	if err != nil {
		return nil, core.Errorf(core.EInvalid, "could not read the body")
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return b, nil
	}
	if err := decodeStrict(b, v); err != nil {
		if core.ErrorCode(err) == core.EInvalid {
			return nil, err
		}
		return nil, core.Errorf(core.EInvalid, "malformed JSON body: %v", err)
	}
	return b, nil
}

func (p payBody) contact() (core.Contact, error) {
	if p.Email != "" && (len(p.Email) > 254 || !strings.Contains(p.Email, "@") || strings.ContainsAny(p.Email, " \r\n<>")) {
		return core.Contact{}, core.Errorf(core.EInvalid, "email is not an address")
	}
	if p.Phone != "" && (len(p.Phone) > 20 || strings.Trim(p.Phone, "+0123456789") != "") {
		return core.Contact{}, core.Errorf(core.EInvalid, "phone must be digits with an optional leading +")
	}
	return core.Contact{Email: p.Email, Phone: p.Phone}, nil
}

// holdRef resolves the principal and names the hold it may act on: its
// Account is the hold owner's identity, which also keys the idempotency
// keys, so an admit token, the account token and the hold's grant of one
// owner share them.
func (s *Server) holdRef(r *http.Request) (*core.Principal, core.HoldRef, error) {
	p, err := s.principal(r)
	if err != nil {
		return nil, core.HoldRef{}, err
	}
	ref, err := p.HoldRef(r.PathValue("hold"), 0)
	return p, ref, err
}

// settledResult answers a Pay or Confirm whose booking is already settled
// (a retry, or a race): from the booking, never a conflict.
func (s *Server) settledResult(b *core.Booking, okStatus int) (result, bool) {
	switch b.Status {
	case core.BookingConfirmed:
		if b.Captured {
			s.showTickets(b)
			return result{status: okStatus, body: b}, true
		}
		b.Tickets = nil // no tickets before the money is taken
		return result{status: http.StatusAccepted, body: map[string]any{"booking": b,
			"message": "confirmed; the payment is being captured, the tickets follow"}}, true
	case core.BookingRefundDue, core.BookingRefunded:
		msg := "the hold expired before the payment: any money taken is refunded, an authorization voided"
		if b.Event != nil && b.Event.Status == core.ShowCancelled {
			msg = "the show was cancelled: any money taken is refunded, an authorization voided"
		}
		r := errResult(core.Errorf(core.EHoldExpired, "%s", msg).With("booking_id", b.ID))
		r.retry = false
		return r, true
	case core.BookingFailed:
		return errResult(core.Errorf(core.EPaymentDeclined, "the payment failed")), true
	}
	return result{}, false
}

// providerError classifies a failed provider call: transient (retry with
// the same Idempotency-Key), a refusal, or a conflict with another attempt.
func (s *Server) providerError(ctx context.Context, b *core.Booking, err error) result {
	var pe *core.ProviderError
	switch {
	case core.ProviderTemporary(err):
		s.Log.Warn("provider: no answer", "booking", b.ID, "err", err)
		return errResult(core.Errorf(core.EProvider, "the payment provider did not answer; retry with the same Idempotency-Key"))
	case errors.As(err, &pe) && (pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden):
		// The provider refuses the core's key: nothing about this payment
		// or this fan. Alert (core/outbox raises the same metric) and let
		// the fan retry under the same key once an operator has fixed it.
		s.Metrics.ProviderMisconfigured.WithLabelValues("create_payment", strconv.Itoa(pe.Status)).Inc()
		s.Log.Error("PAYMENT PROVIDER REFUSES THE CORE'S KEY: check ONSALE_PROVIDER_KEY; payments cannot start", "booking", b.ID, "status", pe.Status, "err", err)
		return errResult(core.Errorf(core.EProvider, "the payment provider is not reachable now; retry with the same Idempotency-Key"))
	case errors.As(err, &pe) && pe.Status == http.StatusPaymentRequired:
		if _, serr := s.Payments.Bookings.Settle(ctx, core.Settlement{BookingID: b.ID, Type: "authorize"}); serr != nil {
			return errResult(serr)
		}
		return errResult(core.Errorf(core.EPaymentDeclined, "the payment was refused: %s", pe.Message))
	default:
		s.Log.Warn("provider refused the request", "booking", b.ID, "err", err)
		return errResult(core.Errorf(core.EPaymentInProgress, "a payment for this booking exists with other details: %v", err))
	}
}

// payInput reads what Pay and Confirm share: the hold the admit token may
// act on and the body (raw, for the idempotency fingerprint). A card token
// is required for Confirm (card) and refused on Pay (UPI). It answers the
// error itself and reports ok=false.
func (s *Server) payInput(w http.ResponseWriter, r *http.Request, card bool) (core.HoldRef, payBody, core.Contact, []byte, bool) {
	var in payBody
	p, ref, err := s.holdRef(r)
	var raw []byte
	if err == nil {
		raw, err = readBody(w, r, &in)
	}
	method := "upi"
	if card {
		method = "card"
	}
	switch {
	case err != nil:
	case !s.Payments.Provider.Takes(method):
		err = core.Errorf(core.EMethodUnavailable, "this box office takes %s through %s", takenBy(s.Payments.Provider), s.Payments.Provider.Name())
	case card && in.PaymentToken != "" && !paymentToken(in.PaymentToken):
		err = core.Errorf(core.EInvalid, "payment_token is the provider's token for the card (pm_..., tok_...), never the card's number; leave it out to pay on the provider's page")
	case !card && in.PaymentToken != "":
		err = core.Errorf(core.EInvalid, "payment_token belongs to /confirm, the card flow")
	}
	var contact core.Contact
	if err == nil {
		contact, err = in.contact()
	}
	if err == nil && contact == (core.Contact{}) {
		contact = s.accountContact(r.Context(), p)
	}
	if err != nil {
		s.fail(w, r, err)
		return ref, in, contact, nil, false
	}
	return ref, in, contact, raw, true
}

// paymentToken reports whether t looks like a provider's card token: 1 to
// 255 letters, digits and underscores, not all digits (a card number is
// refused before it reaches a log or the provider).
func paymentToken(t string) bool {
	if len(t) > 255 || strings.Trim(t, "0123456789") == "" {
		return false
	}
	return strings.Trim(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == ""
}

// takenBy names the methods a provider takes, for a refusal.
func takenBy(p Provider) string {
	switch {
	case p.Takes("card") && !p.Takes("upi"):
		return "cards only (POST /v1/holds/{hold}/confirm with a payment_token)"
	case p.Takes("upi") && !p.Takes("card"):
		return "UPI only (POST /v1/holds/{hold}/payment)"
	}
	return "no payments"
}

// returnURL is the booking page a provider's page sends the payer back to.
func (s *Server) returnURL(b *core.Booking) string {
	if s.Payments.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(s.Payments.PublicURL, "/") + "/events/" + strconv.FormatInt(b.EventID, 10) + "/book"
}

// workContext outlives the client: once money may move, the request's work
// is finished and recorded even if the fan hangs up. Its workTimeout is
// part of LongestRequest, from which the server's write timeout is sized.
func workContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), workTimeout)
}

// pay starts the async (UPI-like) flow: the booking, the one extension of
// the hold, and the payment at the provider under the booking's key
// (charge:<hold>). The outcome arrives later by webhook.
func (s *Server) pay(w http.ResponseWriter, r *http.Request) {
	ref, _, contact, raw, ok := s.payInput(w, r, false)
	if !ok {
		return
	}
	s.idempotent(w, r, ref.Account, raw, func() result {
		ctx, cancel := workContext(r)
		defer cancel()
		b, err := s.Payments.Bookings.StartPayment(ctx, ref, core.FlowAsync, contact)
		if err != nil {
			return errResult(err)
		}
		if res, done := s.settledResult(b, http.StatusCreated); done {
			return res
		}
		if b.PaymentID != "" {
			// A retry (the first answer was lost, a second tab): the
			// payment as the provider has it now, with the page to pay on;
			// its id alone when the provider cannot say.
			var payment any = map[string]string{"id": b.PaymentID}
			if p, err := s.Payments.Provider.Payment(ctx, b.PaymentID); err == nil {
				payment = p
			}
			return result{status: http.StatusCreated, body: map[string]any{"booking": b, "payment": payment}}
		}
		p, err := s.Payments.Provider.CreatePayment(ctx, b.PaymentKey(), core.PaymentRequest{
			Amount: b.AmountPaise, Currency: b.Currency, Reference: b.Reference(), Method: "upi", Capture: "automatic",
			ReturnURL: s.returnURL(b), Since: b.CreatedAt})
		if err != nil {
			return s.providerError(ctx, b, err)
		}
		if err := s.Payments.Bookings.SetPaymentID(ctx, b.ID, p.ID); err != nil {
			return errResult(err)
		}
		b.PaymentID = p.ID
		return result{status: http.StatusCreated, body: map[string]any{"booking": b, "payment": p}}
	})
}

// confirm is the sync (card) flow on the same booking state machine:
// authorize under the booking's key, book the hold's seats exactly (lock the
// booking, conditional book), capture, and only then show the tickets. When
// the hold is gone the authorization is voided and the fan gets 410.
func (s *Server) confirm(w http.ResponseWriter, r *http.Request) {
	ref, in, contact, raw, ok := s.payInput(w, r, true)
	if !ok {
		return
	}
	s.idempotent(w, r, ref.Account, raw, func() result {
		ctx, cancel := workContext(r)
		defer cancel()
		b, err := s.Payments.Bookings.StartPayment(ctx, ref, core.FlowSync, contact)
		if err != nil {
			return errResult(err)
		}
		if res, done := s.settledResult(b, http.StatusOK); done {
			return res
		}
		var p *core.Payment
		if b.PaymentID == "" {
			p, err = s.Payments.Provider.CreatePayment(ctx, b.PaymentKey(), core.PaymentRequest{
				Amount: b.AmountPaise, Currency: b.Currency, Reference: b.Reference(), Method: "card",
				PaymentToken: in.PaymentToken, Capture: "manual", ReturnURL: s.returnURL(b), Since: b.CreatedAt})
			if err != nil {
				return s.providerError(ctx, b, err)
			}
			// The database's failure is the database's (503), not the
			// provider's: the retry finds the payment under the same key.
			if err := s.Payments.Bookings.SetPaymentID(ctx, b.ID, p.ID); err != nil {
				return errResult(err)
			}
		} else if p, err = s.Payments.Provider.Payment(ctx, b.PaymentID); err != nil { // a retry: where did the first attempt get?
			return s.providerError(ctx, b, err)
		}
		var outcome core.BookingStatus
		switch p.Status {
		case core.PaymentRequiresCapture, core.PaymentSucceeded:
			outcome, err = s.Payments.Bookings.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: p.ID, Type: "authorize", Succeeded: true,
				Amount: p.Amount, Currency: p.Currency})
		case core.PaymentFailed, core.PaymentCanceled:
			outcome, err = s.Payments.Bookings.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: p.ID, Type: "authorize"})
		default:
			// Still pending at the provider (e.g. a 3-D Secure step): the
			// reconciler settles it.
			return result{status: http.StatusAccepted, body: map[string]any{"booking": b, "payment": p}}
		}
		if err != nil {
			return errResult(err)
		}
		switch outcome {
		case core.BookingConfirmed:
			s.Payments.Outbox.RunNow(ctx, core.JobCapture, b.ID)
		case core.BookingRefundDue:
			s.Payments.Outbox.RunNow(ctx, core.JobVoid, b.ID)
		}
		if b, err = s.Payments.Bookings.Booking(ctx, b.ID); err != nil {
			return errResult(err)
		}
		if res, done := s.settledResult(b, http.StatusOK); done {
			return res
		}
		return result{status: http.StatusAccepted, body: map[string]any{"booking": b, "payment": p}}
	})
}

// WebhookPath is where the named provider's webhooks are taken: the
// URL to register with it (the simulator's is /v1/webhooks/payments).
func WebhookPath(provider string) string {
	if provider == "paysim" {
		return "/v1/webhooks/payments"
	}
	return "/v1/webhooks/" + provider
}

// webhook takes the provider's events: the provider's adapter checks the
// signature over the raw body with its own scheme (constant time) and reads
// the event; it is applied once (its id is the de-duplication key, in the
// same transaction as its effect).
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		s.fail(w, r, core.Errorf(core.ETooLarge, "the body is over %d bytes", MaxBodyBytes))
		return
	}
	ev, err := s.Payments.Provider.Webhook(r.Header, raw, time.Now())
	if err != nil {
		if core.ErrorCode(err) == core.EBadSignature {
			s.Metrics.Webhooks.WithLabelValues("bad_signature").Inc()
		}
		s.fail(w, r, err)
		return
	}
	if !ev.Created.IsZero() {
		s.Metrics.WebhookLag.Observe(max(0, time.Since(ev.Created).Seconds()))
	}
	booking, _ := core.ParseBookingReference(ev.Reference)
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var outcome core.BookingStatus
	switch ev.Outcome {
	case core.EventSucceeded, core.EventFailed:
		outcome, err = s.Payments.Bookings.Settle(ctx, core.Settlement{EventID: ev.ID, Type: ev.Type, PaymentID: ev.PaymentID,
			BookingID: booking, Succeeded: ev.Outcome == core.EventSucceeded, Amount: ev.Amount, Currency: ev.Currency})
		if err != nil {
			s.fail(w, r, err) // 503: the provider retries
			return
		}
	default:
		outcome = "ignored" // refund.succeeded and others: the outbox already knows
	}
	s.Metrics.Webhooks.WithLabelValues(string(outcome)).Inc()
	log := s.Log.With("provider", s.Payments.Provider.Name(), "event", ev.ID, "type", ev.Type, "payment", ev.PaymentID, "reference", ev.Reference, "outcome", outcome)
	switch outcome {
	case core.OutcomeUnknownOrder:
		log.Warn("payment webhook for an unknown order: acknowledged, needs a look")
	case core.OutcomeOwnPaymentMismatch:
		// The provider contradicts itself about a settled booking's own
		// payment: nothing was refunded or changed (core/postgres logged
		// it loudly); alert.
		s.Metrics.ProviderContradictions.WithLabelValues("webhook").Inc()
		log.Error("PAYMENT PROVIDER CONTRADICTS ITSELF: a settled booking's own payment re-reported with another amount or currency; needs an operator",
			"amount", ev.Amount, "currency", ev.Currency)
	case core.OutcomeStrayRefund:
		// Money the booking does not keep (core.Settlement): its refund
		// is queued; run it now, in the worker's loop.
		log.Warn("payment the booking does not keep: refund queued", "amount", ev.Amount, "currency", ev.Currency)
		if booking > 0 {
			s.Payments.Outbox.Kick(core.JobStrayRefund, booking)
		}
	case core.BookingRefundDue:
		log.Info("late payment: refund queued")
		if booking > 0 {
			// Give the money back at once, in the outbox worker's own loop
			// (its shutdown waits for it); the outbox retries if this
			// attempt fails or the process dies. The move to REFUND_DUE
			// queued the give-back of the booking's flow (core.Transition):
			// a refund for UPI, a void for a card. Both are kicked, as the
			// reconciler does: the kind the flow did not queue finds no
			// job and does nothing.
			for _, kind := range core.GiveBackJobs {
				s.Payments.Outbox.Kick(kind, booking)
			}
		}
	default:
		log.Debug("payment webhook applied")
	}
	writeJSON(w, http.StatusOK, map[string]any{"received": true, "outcome": outcome})
}

// getBooking returns the owner's booking with signed tickets.
func (s *Server) getBooking(w http.ResponseWriter, r *http.Request) {
	b, err := s.ownBooking(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.showTickets(b) // none before the money is taken
	w.Header().Set("Cache-Control", "private, no-store")
	writeJSON(w, http.StatusOK, b)
}

// ticketQR draws one ticket's QR code as a PNG.
func (s *Server) ticketQR(w http.ResponseWriter, r *http.Request) {
	b, err := s.ownBooking(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	if b.Status != core.BookingConfirmed || !b.Captured {
		s.fail(w, r, core.Errorf(core.ENotFound, "booking %d has no tickets yet", b.ID))
		return
	}
	for _, t := range s.Payments.Tickets.SignTickets(b) {
		if t.N == n {
			png, err := s.Payments.Tickets.QR(t.Payload, 320)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Cache-Control", "private, max-age=3600")
			w.Write(png)
			return
		}
	}
	s.fail(w, r, core.Errorf(core.ENotFound, "booking %d has no ticket %q", b.ID, r.PathValue("n")))
}

// ownBooking resolves the principal and loads the booking it may read.
func (s *Server) ownBooking(r *http.Request) (*core.Booking, error) {
	p, err := s.principal(r)
	if err != nil {
		return nil, err
	}
	id, err := strconv.ParseInt(r.PathValue("booking"), 10, 64)
	if err != nil || id <= 0 {
		return nil, core.Errorf(core.ENotFound, "no such booking")
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	b, err := s.Payments.Bookings.Booking(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := p.MayReadBooking(b); err != nil {
		return nil, err
	}
	return b, nil
}

// accountContact is where a signed-in fan's tickets go when Pay names no
// contact: the owner account's phone (the SMS link) and email.
func (s *Server) accountContact(ctx context.Context, p *core.Principal) core.Contact {
	if p == nil || s.Accounts == nil {
		return core.Contact{}
	}
	id, err := strconv.ParseInt(account.AccountOf(p.Identity), 10, 64)
	if err != nil {
		return core.Contact{}
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	a, err := s.Accounts.Store.Account(ctx, id)
	if err != nil {
		s.Log.Warn("account contact not read", "err", err)
		return core.Contact{}
	}
	return core.Contact{Email: a.Email, Phone: a.Phone}
}
