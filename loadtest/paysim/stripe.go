package paysim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/onsale/onsale/shared/paysig"
)

// The Stripe dialect (Config.Dialect = DialectStripe) answers the part of
// Stripe's API a card sale uses, with Stripe's shapes and rules, over the
// simulator's own payments (so the ledger, the checkout page, the
// misbehaviour and the control hooks are the same):
//
//	POST /v1/payment_intents               create and confirm (confirm=true) a card PaymentIntent
//	GET  /v1/payment_intents/{id}          one PaymentIntent (latest_charge always expanded)
//	POST /v1/payment_intents/{id}/capture  capture an authorization
//	POST /v1/payment_intents/{id}/cancel   cancel an authorization
//	POST /v1/refunds                       refund what is left of payment_intent
//	POST /v1/checkout/sessions             a Checkout Session: the card typed on the checkout page
//	GET  /v1/checkout/sessions/{id}        one session (expand[] expands its PaymentIntent)
//	POST /v1/checkout/sessions/{id}/expire expire an open session
//
// A session cs_X is the simulator's payment pi_X, pending until its payer
// approves on the checkout page (checkout.session.completed, and the
// PaymentIntent's events) or its time runs out (checkout.session.expired);
// a declined attempt is payment_intent.payment_failed, and the
// session stays open, as Stripe's does, until Sim.Expire).
//
// Bodies are forms (Stripe's encoding); unknown parameters are refused, as
// Stripe refuses them. The test PaymentMethods are Stripe's: pm_card_visa
// (authorized), pm_card_chargeDeclined (402 card_error),
// pm_card_threeDSecure2Required (requires_action: next_action redirects to
// the checkout page, where the payer passes or fails the step).
//
// Idempotency follows Stripe: a key belongs to the API key (not to a
// path); the same key with other parameters or on another endpoint is 400
// idempotency_error; while the first request runs, 409
// idempotency_key_in_use. Stripe forgets keys after about a day:
// POST /_sim/idempotency/forget (Control) forgets them all now, so a test
// can retry a money job as if a day had passed.
//
// Errors are {"error": {"type", "code", "message", ...}}: a capture or
// cancel of a PaymentIntent in another state is 400
// payment_intent_unexpected_state, a refund with nothing left 400
// charge_already_refunded. Webhooks are Stripe events
// (payment_intent.amount_capturable_updated, .succeeded, .payment_failed,
// .canceled, charge.refunded) signed in Stripe-Signature.

// stripeAPIVersion is the API version the events say they were made with.
const stripeAPIVersion = "2025-09-30.clover"

// stripe test PaymentMethods and what the simulator makes of them.
var stripePaymentMethods = map[string]string{
	"pm_card_visa":                  "tok_visa",
	"pm_card_mastercard":            "tok_visa",
	"pm_card_chargeDeclined":        DeclineToken,
	"pm_card_threeDSecure2Required": ThreeDSToken,
}

func (s *Sim) stripeRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/payment_intents", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(withoutMetadata(f, "metadata"), "amount", "currency", "capture_method", "payment_method", "payment_method_types[0]", "confirm",
			"description", "return_url"); err != nil {
			return 0, nil, err
		}
		req := PaymentRequest{Currency: f.Get("currency"), Reference: f.Get("metadata[reference]"), Method: MethodCard, Capture: CaptureAuto}
		amount, err := strconv.ParseInt(f.Get("amount"), 10, 64)
		switch {
		case err != nil:
			return 0, nil, errorf(EInvalid, "amount: an integer is required")
		case f.Get("confirm") != "true":
			return 0, nil, errorf(EInvalid, "confirm: the simulator takes PaymentIntents confirmed at creation (confirm=true)")
		case f.Get("payment_method_types[0]") != "" && f.Get("payment_method_types[0]") != "card":
			return 0, nil, errorf(EInvalid, "payment_method_types: card only")
		}
		req.Amount = amount
		switch f.Get("capture_method") {
		case "manual":
			req.Capture = CaptureManual
		case "", "automatic", "automatic_async":
		default:
			return 0, nil, errorf(EInvalid, "capture_method: %q is not one of automatic, automatic_async, manual", f.Get("capture_method"))
		}
		tok, ok := stripePaymentMethods[f.Get("payment_method")]
		if !ok {
			return 0, nil, errorf(ENotFound, "No such PaymentMethod: '%s'", f.Get("payment_method"))
		}
		req.PaymentToken = tok
		req.returnURL, req.ext = f.Get("return_url"), &kept{meta: metadata(f, "metadata")}
		p, err := s.createPayment(req)
		if err != nil {
			return 0, nil, err
		}
		if p.Status == StatusFailed {
			return 0, nil, &stripeDecline{pi: stripePI(p, r.Host)}
		}
		return http.StatusOK, stripePI(p, r.Host), nil
	})))
	mux.Handle("GET /v1/payment_intents/{id}", s.api(s.query(func(r *http.Request) (any, error) {
		p, err := s.payment(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return stripePI(p, r.Host), nil
	})))
	mux.Handle("POST /v1/payment_intents/{id}/capture", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(f); err != nil {
			return 0, nil, err
		}
		p, err := s.capture(r.PathValue("id"))
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, stripePI(p, r.Host), nil
	})))
	mux.Handle("POST /v1/payment_intents/{id}/cancel", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(f, "cancellation_reason"); err != nil {
			return 0, nil, err
		}
		p, err := s.cancel(r.PathValue("id"))
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, stripePI(p, r.Host), nil
	})))
	mux.Handle("POST /v1/checkout/sessions", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(withoutMetadata(withoutMetadata(f, "metadata"), "payment_intent_data[metadata]"), "mode", "client_reference_id", "success_url", "cancel_url", "payment_method_types[0]", "expires_at",
			"line_items[0][quantity]", "line_items[0][price_data][currency]", "line_items[0][price_data][unit_amount]",
			"line_items[0][price_data][product_data][name]", "payment_intent_data[capture_method]"); err != nil {
			return 0, nil, err
		}
		amount, err := strconv.ParseInt(f.Get("line_items[0][price_data][unit_amount]"), 10, 64)
		expires, _ := strconv.ParseInt(f.Get("expires_at"), 10, 64)
		now := s.now().Unix()
		switch {
		case f.Get("mode") != "payment":
			return 0, nil, errorf(EInvalid, "mode: the simulator takes payment mode only")
		case f.Get("success_url") == "":
			return 0, nil, errorf(EInvalid, "success_url: required in payment mode")
		case err != nil || f.Get("line_items[0][quantity]") != "1":
			return 0, nil, errorf(EInvalid, "line_items: one item of quantity 1 with price_data[unit_amount]")
		case f.Get("expires_at") != "" && (expires < now+30*60-5 || expires > now+24*3600):
			return 0, nil, errorf(EInvalid, "expires_at: between 30 minutes and 24 hours from now")
		}
		req := PaymentRequest{Amount: amount, Currency: f.Get("line_items[0][price_data][currency]"), Method: MethodCard,
			Reference: cmp.Or(f.Get("payment_intent_data[metadata][reference]"), f.Get("client_reference_id")), Capture: CaptureAuto}
		if f.Get("payment_intent_data[capture_method]") == "manual" {
			req.Capture = CaptureManual
		}
		req.session, req.returnURL = true, f.Get("success_url")
		req.ext = &kept{meta: metadata(f, "payment_intent_data[metadata]"), sessionMeta: metadata(f, "metadata")}
		p, err := s.createPayment(req) // no token: pending until the payer acts on the checkout page
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, stripeSession(p, r.Host, false), nil
	})))
	mux.Handle("GET /v1/checkout/sessions/{id}", s.api(s.query(func(r *http.Request) (any, error) {
		p, err := s.sessionPayment(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return stripeSession(p, r.Host, strings.Contains(r.URL.RawQuery, "expand")), nil
	})))
	mux.Handle("POST /v1/checkout/sessions/{id}/expire", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(f); err != nil {
			return 0, nil, err
		}
		p, err := s.sessionPayment(r.PathValue("id"))
		if err != nil {
			return 0, nil, err
		}
		if p.Status != StatusPending {
			return 0, nil, errorf(EInvalidState, "Only Checkout Sessions with a status in [\"open\"] can be expired.")
		}
		if p, err = s.cancel(p.ID); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, stripeSession(p, r.Host, false), nil
	})))
	mux.Handle("POST /v1/refunds", s.api(s.stripeMutation(func(r *http.Request, f url.Values) (int, any, error) {
		if err := allowOnly(f, "payment_intent", "reason"); err != nil {
			return 0, nil, err
		}
		if f.Get("payment_intent") == "" {
			return 0, nil, errorf(EInvalid, "payment_intent: required (the simulator refunds PaymentIntents)")
		}
		rf, err := s.refund(f.Get("payment_intent"), nil)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, stripeRefund(rf), nil
	})))
}

// allowOnly refuses a form with a parameter outside names (expand[] is
// always allowed), as Stripe does.
func allowOnly(f url.Values, names ...string) error {
	for k := range f {
		if strings.HasPrefix(k, "expand[") {
			continue
		}
		found := false
		for _, n := range names {
			found = found || k == n
		}
		if !found {
			return errorf(EInvalid, "Received unknown parameter: %s", k)
		}
	}
	return nil
}

// stripeMutation is mutation with Stripe's idempotency: keys per API key
// over the method, path and form, and Stripe's error bodies.
func (s *Sim) stripeMutation(fn func(r *http.Request, f url.Values) (int, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, e := readBody(w, r)
		if e != nil {
			s.writeStripeError(w, e)
			return
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			s.writeStripeError(w, errorf(EInvalid, "the body is not a form: %v", err))
			return
		}
		var k idemKey
		if key := r.Header.Get(IdempotencyKeyHeader); key != "" {
			if len(key) > maxIdempotencyKeyLen {
				s.writeStripeError(w, errorf(EInvalid, "Idempotency-Key longer than %d characters", maxIdempotencyKeyLen))
				return
			}
			k = idemKey{apiKey: s.apiKey, key: key} // Stripe: one key, one request, whatever its path
		}
		sum := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "\n" + canonicalForm(form)))
		s.keyed(w, r, k, hex.EncodeToString(sum[:]), true, func(e *Error) { s.writeStripeError(w, e) }, func() (int, []byte, bool) {
			code, v, err := fn(r, form)
			if err != nil {
				code, b := s.stripeError(r, err)
				return code, b, !isInvalid(err) // refused input ran nothing: not kept, as Stripe
			}
			return code, encode(v), true
		})
	})
}

// withoutMetadata is f without its metadata under prefix: a route that
// takes metadata there allows any key.
func withoutMetadata(f url.Values, prefix string) url.Values {
	out := url.Values{}
	for k, v := range f {
		if !strings.HasPrefix(k, prefix+"[") {
			out[k] = v
		}
	}
	return out
}

// metadata reads the form's metadata under prefix (prefix[key]=value).
func metadata(f url.Values, prefix string) map[string]string {
	m := map[string]string{}
	for k := range f {
		if name, ok := strings.CutPrefix(k, prefix+"["); ok && strings.HasSuffix(name, "]") && !strings.Contains(name, "[") {
			m[strings.TrimSuffix(name, "]")] = f.Get(k)
		}
	}
	return m
}

// isInvalid reports whether err refused the input before anything ran.
func isInvalid(err error) bool {
	e, ok := err.(*Error)
	return ok && (e.Code == EInvalid || e.Code == ENotFound)
}

// canonicalForm is a form's parameters in one order.
func canonicalForm(f url.Values) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(strings.Join(f[k], ",")) + "&")
	}
	return b.String()
}

// stripeDecline is a card declined at confirmation: Stripe's 402
// card_error, naming the PaymentIntent.
type stripeDecline struct{ pi map[string]any }

func (d *stripeDecline) Error() string { return "card_declined" }

// stripeError renders err as Stripe would: status and body.
func (s *Sim) stripeError(r *http.Request, err error) (int, []byte) {
	if d, ok := err.(*stripeDecline); ok {
		return http.StatusPaymentRequired, encode(map[string]any{"error": map[string]any{"type": "card_error", "code": "card_declined",
			"decline_code": "generic_decline", "message": "Your card was declined.", "payment_intent": d.pi}})
	}
	e := s.asError(r, err)
	code, typ, scode := status[e.Code], "invalid_request_error", ""
	switch e.Code {
	case EInvalid:
		scode = "parameter_invalid"
		if strings.HasPrefix(e.Message, "Received unknown parameter") {
			scode = "parameter_unknown"
		}
	case ENotFound:
		scode = "resource_missing"
	case EAlreadyCaptured, EAlreadyCanceled, EInvalidState:
		code, scode = http.StatusBadRequest, "payment_intent_unexpected_state"
	case ERefundExceedsCapture:
		code, scode = http.StatusBadRequest, "charge_already_refunded"
	case EKeyReused:
		code, typ = http.StatusBadRequest, "idempotency_error"
	case EInProgress:
		scode = "idempotency_key_in_use"
	case EUnavailable, EInternal:
		typ = "api_error"
	}
	body := map[string]any{"type": typ, "message": e.Message}
	if scode != "" {
		body["code"] = scode
	}
	s.mu.Lock()
	s.refusals[cmp.Or(scode, typ)]++
	s.mu.Unlock()
	return code, encode(map[string]any{"error": body})
}

func (s *Sim) writeStripeError(w http.ResponseWriter, e *Error) {
	code, b := s.stripeError(nil, e)
	writeRaw(w, code, b)
}

// stripePI is a payment as a Stripe PaymentIntent. host is the simulator's
// address as the caller reached it (the 3-D Secure page is on it).
func stripePI(p Payment, host string) map[string]any {
	meta := map[string]string{"reference": p.Reference}
	if p.ext != nil && p.ext.meta != nil {
		meta = p.ext.meta // what the merchant gave it to keep
	}
	pi := map[string]any{"id": p.ID, "object": "payment_intent", "amount": p.Amount, "currency": strings.ToLower(p.Currency),
		"capture_method": map[string]string{CaptureManual: "manual", CaptureAuto: "automatic"}[p.Capture],
		"created":        p.Created, "livemode": false, "metadata": meta,
		"description": p.Reference, "payment_method_types": []string{"card"}, "amount_capturable": 0, "amount_received": 0,
		"last_payment_error": nil, "next_action": nil, "latest_charge": nil}
	switch p.Status {
	case StatusRequiresCapture:
		pi["status"], pi["amount_capturable"] = "requires_capture", p.Amount
	case StatusSucceeded:
		pi["status"], pi["amount_received"] = "succeeded", p.AmountCaptured
	case StatusCanceled:
		pi["status"] = "canceled"
	case StatusFailed:
		pi["status"] = "requires_payment_method"
		pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "message": "Your card was declined (" + p.FailureReason + ")."}
	default: // pending: the 3-D Secure step
		pi["status"] = "requires_action"
		page := "http://" + host + "/checkout/" + url.PathEscape(p.ID)
		if p.returnURL != "" {
			page += "?return=" + url.QueryEscape(p.returnURL)
		}
		pi["next_action"] = map[string]any{"type": "redirect_to_url", "redirect_to_url": map[string]any{"url": page, "return_url": p.returnURL}}
	}
	if p.Status == StatusRequiresCapture || p.Status == StatusSucceeded || (p.Status == StatusCanceled && p.AmountCaptured == 0) {
		pi["latest_charge"] = map[string]any{"id": "ch_" + strings.TrimPrefix(p.ID, "pi_"), "object": "charge", "amount": p.Amount,
			"amount_captured": p.AmountCaptured, "amount_refunded": p.AmountRefunded, "captured": p.Status == StatusSucceeded,
			"refunded": p.AmountCaptured > 0 && p.AmountRefunded >= p.AmountCaptured, "payment_intent": p.ID,
			"currency": strings.ToLower(p.Currency), "paid": true, "status": "succeeded"}
	}
	return pi
}

// sessionPayment is the payment of a Checkout Session (cs_X is pi_X).
func (s *Sim) sessionPayment(id string) (Payment, error) {
	p, err := s.payment("pi_" + strings.TrimPrefix(id, "cs_"))
	if err != nil || !p.session {
		return Payment{}, errorf(ENotFound, "No such checkout.session: '%s'", id)
	}
	return p, nil
}

// sessionMeta is a session's metadata, as its merchant gave it.
func sessionMeta(p Payment) map[string]string {
	if p.ext != nil && p.ext.sessionMeta != nil {
		return p.ext.sessionMeta
	}
	return map[string]string{}
}

// stripeSession is a payment as a Checkout Session; expand: its
// PaymentIntent (with its latest charge) in full rather than its id.
func stripeSession(p Payment, host string, expand bool) map[string]any {
	cs := map[string]any{"id": "cs_" + strings.TrimPrefix(p.ID, "pi_"), "object": "checkout.session", "mode": "payment",
		"amount_total": p.Amount, "currency": strings.ToLower(p.Currency), "client_reference_id": p.Reference, "livemode": false,
		"metadata": sessionMeta(p), "payment_intent": nil, "url": nil, "created": p.Created,
		"success_url": p.returnURL, "status": "complete", "payment_status": "unpaid"}
	switch {
	case p.Status == StatusPending:
		cs["status"] = "open"
		if host != "" {
			cs["url"] = "http://" + host + "/checkout/" + url.PathEscape(p.ID) + "?return=" + url.QueryEscape(p.returnURL)
		}
	case (p.Status == StatusFailed || p.Status == StatusCanceled) && !p.authorized:
		cs["status"] = "expired" // given up on the page, or expired by the merchant: nothing authorized
	}
	if cs["status"] == "complete" {
		if p.Status == StatusSucceeded {
			cs["payment_status"] = "paid"
		}
		cs["payment_intent"] = p.ID
		if expand {
			cs["payment_intent"] = stripePI(p, host)
		}
	}
	return cs
}

func stripeRefund(r Refund) map[string]any {
	return map[string]any{"id": r.ID, "object": "refund", "amount": r.Amount, "currency": "inr", "payment_intent": r.PaymentID,
		"status": "succeeded", "created": r.Created}
}

// stripeEvent is the simulator's event typ about obj as Stripe events
// (none for an event Stripe would not send).
func stripeEvent(typ string, obj any, now time.Time) ([]outgoing, error) {
	var data any
	switch typ {
	case eventAttemptFailed:
		p := obj.(Payment)
		p.Status, p.FailureReason = StatusFailed, "card_declined" // the attempt's PaymentIntent, back to requires_payment_method
		typ, data = "payment_intent.payment_failed", stripePI(p, "")
	case EventPaymentSucceeded, EventPaymentFailed, eventAuthorized, eventAuthorizedByPayer, eventCanceled:
		p := obj.(Payment)
		data = stripePI(p, "")
		if session := sessionEvent(typ, p, now); session != nil {
			pi, err := stripeEvent1(map[string]string{EventPaymentSucceeded: "payment_intent.succeeded", EventPaymentFailed: "payment_intent.payment_failed",
				eventAuthorizedByPayer: "payment_intent.amount_capturable_updated", eventCanceled: "payment_intent.canceled"}[typ], data, now)
			if err != nil {
				return nil, err
			}
			if pi.typ == "" || typ == EventPaymentFailed || typ == eventCanceled && !p.authorized {
				return []outgoing{*session}, nil // a session given up or expired: its PaymentIntent never was
			}
			return []outgoing{*session, pi}, nil
		}
		typ = map[string]string{EventPaymentSucceeded: "payment_intent.succeeded", EventPaymentFailed: "payment_intent.payment_failed",
			eventAuthorized: "payment_intent.amount_capturable_updated", eventAuthorizedByPayer: "payment_intent.amount_capturable_updated",
			eventCanceled: "payment_intent.canceled"}[typ]
	case EventRefundSucceeded:
		r := obj.(Refund)
		typ = "charge.refunded"
		data = map[string]any{"id": "ch_" + strings.TrimPrefix(r.PaymentID, "pi_"), "object": "charge", "payment_intent": r.PaymentID,
			"amount_refunded": r.Amount, "refunded": true}
	default:
		return nil, nil
	}
	ev, err := stripeEvent1(typ, data, now)
	return []outgoing{ev}, err
}

// stripeEvent1 is one Stripe event of typ about data.
func stripeEvent1(typ string, data any, now time.Time) (outgoing, error) {
	id := newID("evt")
	body, err := json.Marshal(map[string]any{"id": id, "object": "event", "api_version": stripeAPIVersion,
		"created": now.Unix(), "livemode": false, "type": typ, "data": map[string]any{"object": data},
		"pending_webhooks": 1, "request": map[string]any{"id": nil, "idempotency_key": nil}})
	return outgoing{id: id, typ: typ, body: body}, err
}

// sessionEvent is the Checkout Session event a step of a session's payment
// makes (nil: none, or not a session's): completed when the payer
// authorizes (or pays) on the page, expired when the payer gives up or the
// merchant expires it.
func sessionEvent(typ string, p Payment, now time.Time) *outgoing {
	if !p.session {
		return nil
	}
	var t string
	switch {
	case typ == eventAuthorizedByPayer || typ == EventPaymentSucceeded && p.Capture == CaptureAuto && p.AmountRefunded == 0:
		t = "checkout.session.completed"
	case typ == EventPaymentFailed || typ == eventCanceled && !p.authorized:
		t = "checkout.session.expired"
	default:
		return nil
	}
	ev, err := stripeEvent1(t, stripeSession(p, "", false), now)
	if err != nil {
		return nil
	}
	return &ev
}

// paymentPrefix starts a payment's id: pi (a PaymentIntent) in the Stripe
// dialect, pay otherwise.
func (s *Sim) paymentPrefix() string {
	switch s.dialect {
	case DialectStripe:
		return "pi"
	case DialectRazorpay:
		return "plink"
	}
	return "pay"
}

// signatureHeader is the header webhooks are signed in.
func (s *Sim) signatureHeader() string {
	if s.dialect == DialectStripe {
		return "Stripe-Signature"
	}
	return paysig.Header
}

// Refusals counts the Stripe dialect's error answers by code (or type, for
// an error without a code), e.g. payment_intent_unexpected_state: a test
// sees that a retry reached the provider and was refused.
func (s *Sim) Refusals() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.refusals)
}

// ForgetIdempotencyKeys forgets every stored Idempotency-Key, as Stripe
// does after about a day: a retry after it runs again.
func (s *Sim) ForgetIdempotencyKeys() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.idem {
		if r.done {
			delete(s.idem, k)
			n++
		}
	}
	return n
}
