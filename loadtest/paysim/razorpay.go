package paysim

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The Razorpay dialect (Config.Dialect = DialectRazorpay) answers the part
// of Razorpay's API a UPI sale through Payment Links uses, with Razorpay's
// shapes and rules (https://razorpay.com/docs/api/), over the simulator's
// own payments:
//
//	POST /v1/payment_links                 a link (its payer approves or declines on the checkout page)
//	GET  /v1/payment_links[?reference_id=] {"payment_links": [...]}
//	GET  /v1/payment_links/{id}            one link; payments lists its captured payment
//	POST /v1/payment_links/{id}/cancel     cancel a link not paid
//	GET  /v1/payments/{id}                 the link's payment (pay_...)
//	POST /v1/payments/{id}/refund          refund (X-Refund-Idempotency)
//	GET  /v1/payments/{id}/refunds         its refunds
//
// Auth is HTTP Basic: a key id rzp_test_... and the API key as its secret.
// Bodies are JSON; a field Razorpay does not have is refused. reference_id
// is unique: a second link for one is 400 "payment link creation with
// reference ID already attempted" (Razorpay has no idempotency key for
// links). Refunds take X-Refund-Idempotency (10 or more letters, digits,
// hyphens and underscores): the same key and body replay the refund,
// another body is 400, a key still in flight 409. Errors are
// {"error": {"code": "BAD_REQUEST_ERROR", "description", ...}}, 400 for an
// unknown id too, as Razorpay answers.
//
// Webhooks are Razorpay events (payment.captured with payment_link.paid;
// payment.failed for a failed attempt, the link staying payable;
// payment_link.expired when Sim.Expire ends it; payment_link.cancelled;
// refund.processed),
// signed in X-Razorpay-Signature (hex HMAC-SHA256 of the body with the
// webhook secret) and named in X-Razorpay-Event-Id. The UPI payer's delay
// and failures, duplicates, reordering and outages are the Behaviour's.

// DialectRazorpay is Razorpay's shape.
const DialectRazorpay = "razorpay"

// razorpayKeyPrefix starts the key ids the dialect takes.
const razorpayKeyPrefix = "rzp_test_"

func (s *Sim) razorpayRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/payment_links", s.api(s.razorpayCall(func(r *http.Request, body []byte) (any, error) {
		var in struct {
			Amount        int64           `json:"amount"`
			Currency      string          `json:"currency"`
			AcceptPartial bool            `json:"accept_partial"`
			ReferenceID   string          `json:"reference_id"`
			Description   string          `json:"description"`
			Customer      json.RawMessage `json:"customer"`
			Notify        json.RawMessage `json:"notify"`
			CallbackURL   string          `json:"callback_url"`
			CallbackMeth  string          `json:"callback_method"`
			ExpireBy      int64           `json:"expire_by"`
			Notes         json.RawMessage `json:"notes"`
			Options       struct {
				Checkout struct {
					Method map[string]bool `json:"method"`
				} `json:"checkout"`
			} `json:"options"`
			ReminderEnable bool `json:"reminder_enable"`
			UPILink        any  `json:"upi_link"`
		}
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		now := s.now()
		switch {
		case in.Amount < 100:
			return nil, errorf(EInvalid, "The amount must be at least INR 1.00")
		case in.Currency != "" && in.Currency != "INR":
			return nil, errorf(EInvalid, "the simulator's links are in INR")
		case in.AcceptPartial:
			return nil, errorf(EInvalid, "the simulator's links are paid whole")
		case in.ReferenceID == "" || len(in.ReferenceID) > 40:
			return nil, errorf(EInvalid, "reference_id: 1 to 40 characters (onsale names every link)")
		case in.CallbackURL != "" && in.CallbackMeth != "get":
			return nil, errorf(EInvalid, "callback_method must be passed with the value get when callback_url is")
		case in.ExpireBy != 0 && in.ExpireBy < now.Add(15*time.Minute).Unix():
			return nil, errorf(EInvalid, "timestamp must be atleast 15 minutes in future")
		case !in.Options.Checkout.Method["upi"]:
			return nil, errorf(EInvalid, "the simulator's links take UPI: options.checkout.method.upi must be true")
		}
		var notes map[string]string
		_ = json.Unmarshal(in.Notes, &notes) // an object, or null or []: none
		s.mu.Lock()
		_, taken := s.linkRefs[in.ReferenceID]
		if !taken {
			s.linkRefs[in.ReferenceID] = "" // reserved: a concurrent create of the same reference_id is refused, as Razorpay refuses it
		}
		s.mu.Unlock()
		if taken {
			return nil, errorf(EInvalid, "payment link creation with reference ID already attempted")
		}
		// The ledger's reference is the booking's (notes.reference), as the
		// invariant checker reads it; the link's own is reference_id.
		p, err := s.createPayment(PaymentRequest{Amount: in.Amount, Currency: "INR", Reference: cmp.Or(notes["reference"], in.ReferenceID),
			Method: MethodUPI, Capture: CaptureAuto, returnURL: in.CallbackURL, ext: &kept{notes: notes}, referenceID: in.ReferenceID})
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			delete(s.linkRefs, in.ReferenceID)
			return nil, err
		}
		q := s.payments[p.ID]
		q.expireBy = in.ExpireBy
		s.linkRefs[in.ReferenceID] = p.ID
		return razorpayLink(*q, r.Host), nil
	})))
	mux.Handle("GET /v1/payment_links", s.api(s.razorpayCall(func(r *http.Request, _ []byte) (any, error) {
		links := []map[string]any{}
		var ps []Payment
		if ref := r.URL.Query().Get("reference_id"); ref != "" {
			s.mu.Lock()
			id := s.linkRefs[ref]
			s.mu.Unlock()
			if p, err := s.payment(id); err == nil {
				ps = append(ps, p)
			}
		} else {
			ps = s.list("")
		}
		for _, p := range ps {
			links = append(links, razorpayLink(p, r.Host))
		}
		return map[string]any{"payment_links": links}, nil
	})))
	mux.Handle("GET /v1/payment_links/{id}", s.api(s.razorpayCall(func(r *http.Request, _ []byte) (any, error) {
		p, err := s.payment(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return razorpayLink(p, r.Host), nil
	})))
	mux.Handle("POST /v1/payment_links/{id}/cancel", s.api(s.razorpayCall(func(r *http.Request, body []byte) (any, error) {
		if err := decode(body, &struct{}{}); err != nil {
			return nil, err
		}
		p, err := s.cancel(r.PathValue("id"))
		if err != nil {
			if e, ok := err.(*Error); ok {
				switch e.Code {
				case EAlreadyCaptured:
					return nil, errorf(EInvalid, "cannot cancel or expire an already paid/partially paid link")
				case EAlreadyCanceled, EInvalidState:
					return nil, errorf(EInvalid, "cannot cancel or expire an expired link")
				}
			}
			return nil, err
		}
		return razorpayLink(p, r.Host), nil
	})))
	mux.Handle("GET /v1/payments/{id}", s.api(s.razorpayCall(func(r *http.Request, _ []byte) (any, error) {
		p, err := s.payment(linkOf(r.PathValue("id")))
		if err != nil {
			return nil, err
		}
		return razorpayPayment(p), nil
	})))
	mux.Handle("POST /v1/payments/{id}/refund", s.api(s.razorpayRefund()))
	mux.Handle("GET /v1/payments/{id}/refunds", s.api(s.razorpayCall(func(r *http.Request, _ []byte) (any, error) {
		id := linkOf(r.PathValue("id"))
		if _, err := s.payment(id); err != nil {
			return nil, err
		}
		items := []map[string]any{}
		for _, e := range s.Ledger().Entries {
			if e.Type == EntryRefund && e.PaymentID == id {
				items = append(items, razorpayRefund(Refund{ID: e.RefundID, PaymentID: id, Amount: e.Amount, Created: e.Time.Unix()}))
			}
		}
		return map[string]any{"entity": "collection", "count": len(items), "items": items}, nil
	})))
}

// linkOf is the link a payment id (pay_X) belongs to (plink_X).
func linkOf(payID string) string { return "plink_" + strings.TrimPrefix(payID, "pay_") }

// payOf is a link's payment id.
func payOf(linkID string) string { return "pay_" + strings.TrimPrefix(linkID, "plink_") }

// razorpayCall adapts a Razorpay call: the body read, the answer 200 JSON
// or Razorpay's error.
func (s *Sim) razorpayCall(fn func(r *http.Request, body []byte) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, e := readBody(w, r)
		if e != nil {
			s.writeRazorpayError(w, e)
			return
		}
		v, err := fn(r, body)
		if err != nil {
			s.writeRazorpayError(w, s.asError(r, err))
			return
		}
		if r.Method == http.MethodPost {
			s.holdBack(r)
		}
		writeJSON(w, http.StatusOK, v)
	})
}

// razorpayRefund serves POST /v1/payments/{id}/refund under
// X-Refund-Idempotency.
func (s *Sim) razorpayRefund() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, e := readBody(w, r)
		if e != nil {
			s.writeRazorpayError(w, e)
			return
		}
		var k idemKey
		if key := r.Header.Get("X-Refund-Idempotency"); key != "" {
			switch {
			case len(key) < 10:
				s.writeRazorpayError(w, errorf(EInvalid, "The idempotency key must be at least 10 characters long."))
				return
			case strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "":
				s.writeRazorpayError(w, errorf(EInvalid, "The idempotency key must only contain alphanumeric characters, underscores, and hyphens"))
				return
			}
			k = idemKey{apiKey: s.apiKey, method: "refund", key: key}
		}
		sum := sha256.Sum256([]byte(r.URL.Path + "\n" + fingerprint(body)))
		refuse := func(e *Error) {
			if e.Code == EKeyReused {
				e = errorf(EInvalid, "Different request with the same idempotency key has already been processed.")
			} else {
				e = errorf(EInProgress, "Another request with the same idempotency key is still in progress.")
			}
			s.writeRazorpayError(w, e)
		}
		s.keyed(w, r, k, hex.EncodeToString(sum[:]), false, refuse, func() (int, []byte, bool) {
			code, b := s.doRazorpayRefund(r, body)
			return code, b, code < 400 // a refusal ran nothing: not kept
		})
	})
}

func (s *Sim) doRazorpayRefund(r *http.Request, body []byte) (int, []byte) {
	var in struct {
		Amount  *int64          `json:"amount"`
		Speed   string          `json:"speed"`
		Notes   json.RawMessage `json:"notes"`
		Receipt string          `json:"receipt"`
	}
	if err := decode(body, &in); err != nil {
		return s.razorpayError(err.(*Error))
	}
	rf, err := s.refund(linkOf(r.PathValue("id")), in.Amount)
	if err != nil {
		e := s.asError(r, err)
		switch e.Code {
		case ERefundExceedsCapture:
			e = errorf(EInvalid, "The payment has been fully refunded already.")
			if in.Amount != nil {
				e = errorf(EInvalid, "The refund amount provided is greater than amount captured.")
			}
		case EInvalidState:
			e = errorf(EInvalid, "Only payments which have been captured can be refunded")
		}
		return s.razorpayError(e)
	}
	return http.StatusOK, encode(razorpayRefund(rf))
}

// razorpayError renders e as Razorpay would: status and body.
func (s *Sim) razorpayError(e *Error) (int, []byte) {
	code, rcode := status[e.Code], "BAD_REQUEST_ERROR"
	switch e.Code {
	case ENotFound:
		code = http.StatusBadRequest // Razorpay: "The id provided does not exist", 400
		if strings.HasPrefix(e.Message, "no payment") {
			e = errorf(ENotFound, "The id provided does not exist")
		}
	case EUnauthorized:
		e = errorf(EUnauthorized, "The api key provided is invalid")
	case EUnavailable, EInternal:
		rcode = "SERVER_ERROR"
	case EAlreadyCaptured, EAlreadyCanceled, EInvalidState, ERefundExceedsCapture, EKeyReused:
		code = http.StatusBadRequest
	}
	s.mu.Lock()
	s.refusals[e.Message]++
	s.mu.Unlock()
	return code, encode(map[string]any{"error": map[string]any{"code": rcode, "description": e.Message, "source": "NA", "step": "NA",
		"reason": "NA", "metadata": map[string]any{}, "field": nil}})
}

func (s *Sim) writeRazorpayError(w http.ResponseWriter, e *Error) {
	code, b := s.razorpayError(e)
	writeRaw(w, code, b)
}

// razorpayLink is a payment as a Payment Link. host is the simulator's
// address as the caller reached it (the link's page is on it).
func razorpayLink(p Payment, host string) map[string]any {
	status := map[string]string{StatusPending: "created", StatusSucceeded: "paid", StatusFailed: "expired", StatusCanceled: "cancelled"}[p.Status]
	l := map[string]any{"id": p.ID, "entity": "payment_link", "amount": p.Amount, "amount_paid": p.AmountCaptured,
		"currency": p.Currency, "status": status, "reference_id": p.referenceID, "accept_partial": false, "upi_link": false,
		"description": "Tickets, " + p.Reference, "created_at": p.Created, "expire_by": p.expireBy, "expired_at": 0, "cancelled_at": 0,
		"notes": notesOf(p), "order_id": "order_" + strings.TrimPrefix(p.ID, "plink_"),
		"payments": nil, "short_url": ""}
	if p.returnURL != "" {
		l["callback_url"], l["callback_method"] = p.returnURL, "get"
	}
	if host != "" {
		page := "http://" + host + "/checkout/" + url.PathEscape(p.ID)
		if p.returnURL != "" {
			page += "?return=" + url.QueryEscape(p.returnURL)
		}
		l["short_url"] = page
	}
	if p.Status == StatusSucceeded {
		status := "captured"
		if p.AmountRefunded >= p.AmountCaptured {
			status = "refunded" // as Razorpay lists a payment refunded whole
		}
		l["payments"] = []map[string]any{{"amount": p.AmountCaptured, "created_at": p.Created, "method": "upi", "payment_id": payOf(p.ID),
			"plink_id": p.ID, "status": status, "updated_at": p.Created}}
	}
	return l
}

// notesOf is a link's notes as Razorpay answers them: [] when none.
func notesOf(p Payment) any {
	if p.ext == nil || len(p.ext.notes) == 0 {
		return []string{}
	}
	return p.ext.notes
}

// razorpayPayment is a link's payment entity.
func razorpayPayment(p Payment) map[string]any {
	status, refund := "created", any(nil)
	switch {
	case p.Status == StatusFailed:
		status = "failed"
	case p.Status == StatusSucceeded && p.AmountRefunded >= p.AmountCaptured && p.AmountCaptured > 0:
		status, refund = "refunded", "full"
	case p.Status == StatusSucceeded:
		status = "captured"
		if p.AmountRefunded > 0 {
			refund = "partial"
		}
	}
	out := map[string]any{"id": payOf(p.ID), "entity": "payment", "amount": p.Amount, "currency": p.Currency, "status": status,
		"order_id": "order_" + strings.TrimPrefix(p.ID, "plink_"), "method": "upi", "captured": p.Status == StatusSucceeded,
		"amount_refunded": p.AmountRefunded, "refund_status": refund, "description": "#" + strings.TrimPrefix(p.ID, "plink_"),
		"notes": notesOf(p), "created_at": p.Created, "vpa": "fan@upi"}
	if p.Status == StatusFailed {
		out["error_code"], out["error_description"], out["error_source"], out["error_reason"] = "BAD_REQUEST_ERROR", "Payment failed", "issuer", "payment_failed"
	}
	return out
}

func razorpayRefund(r Refund) map[string]any {
	return map[string]any{"id": "rfnd_" + strings.TrimPrefix(r.ID, "re_"), "entity": "refund", "amount": r.Amount, "currency": "INR",
		"payment_id": payOf(r.PaymentID), "notes": map[string]string{}, "receipt": nil, "created_at": r.Created, "status": "processed",
		"speed_processed": "normal", "speed_requested": "normal"}
}

// razorpayEvents is the simulator's event typ about obj as Razorpay events.
func razorpayEvents(typ string, obj any, now time.Time) ([]outgoing, error) {
	type part = map[string]any
	var events []struct {
		typ     string
		payload part
	}
	add := func(t string, payload part) {
		events = append(events, struct {
			typ     string
			payload part
		}{t, payload})
	}
	switch typ {
	case EventPaymentSucceeded:
		p := obj.(Payment)
		pay := part{"entity": razorpayPayment(p)}
		add("payment.captured", part{"payment": pay})
		add("payment_link.paid", part{"payment_link": part{"entity": razorpayLink(p, "")}, "payment": pay,
			"order": part{"entity": part{"id": "order_" + strings.TrimPrefix(p.ID, "plink_"), "receipt": p.Reference, "amount": p.Amount,
				"amount_paid": p.AmountCaptured, "status": "paid"}}})
	case eventAttemptFailed: // the link stays payable
		p := obj.(Payment)
		p.Status = StatusFailed // the attempt's payment entity
		add("payment.failed", part{"payment": part{"entity": razorpayPayment(p)}})
	case EventPaymentFailed: // the link's time ran out
		p := obj.(Payment)
		add("payment_link.expired", part{"payment_link": part{"entity": razorpayLink(p, "")}})
	case eventCanceled:
		p := obj.(Payment)
		add("payment_link.cancelled", part{"payment_link": part{"entity": razorpayLink(p, "")}})
	case EventRefundSucceeded:
		r := obj.(Refund)
		add("refund.processed", part{"refund": part{"entity": razorpayRefund(r)}, "payment": part{"entity": part{"id": payOf(r.PaymentID)}}})
	}
	out := make([]outgoing, 0, len(events))
	for _, e := range events {
		contains := make([]string, 0, len(e.payload))
		for k := range e.payload {
			contains = append(contains, k)
		}
		body, err := json.Marshal(part{"entity": "event", "account_id": "acc_paysim", "event": e.typ, "contains": contains,
			"payload": e.payload, "created_at": now.Unix()})
		if err != nil {
			return nil, fmt.Errorf("razorpay %s: %w", e.typ, err)
		}
		out = append(out, outgoing{id: newID("evt"), typ: e.typ, body: body})
	}
	return out, nil
}

// razorpaySignature is X-Razorpay-Signature: hex HMAC-SHA256 of body.
func razorpaySignature(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
