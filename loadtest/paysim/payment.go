package paysim

import (
	"math/rand/v2"
	"strings"
	"time"
)

// Payment statuses.
const (
	StatusPending         = "pending"          // UPI: waiting for the payer
	StatusRequiresCapture = "requires_capture" // card, manual capture: authorized
	StatusSucceeded       = "succeeded"        // money taken (refunds do not change it)
	StatusFailed          = "failed"           // declined; no money moved
	StatusCanceled        = "canceled"         // authorization voided
)

// Payment methods and capture modes.
const (
	MethodUPI     = "upi"
	MethodCard    = "card"
	CaptureAuto   = "automatic"
	CaptureManual = "manual"
	DeclineToken  = "tok_decline" // a card token that is always declined
	// ThreeDSToken is a card that needs its 3-D Secure step: the payment
	// waits (pending) on the checkout page until the payer approves
	// (authorized, or charged with automatic capture) or declines.
	ThreeDSToken = "tok_3ds"
)

const maxReferenceLen = 200

// Payment is the provider's payment object.
type Payment struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference"`
	Method         string `json:"method"`
	Capture        string `json:"capture"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	Created        int64  `json:"created"` // unix seconds
	FailureReason  string `json:"failure_reason"`

	returnURL   string // where the 3-D Secure page sends the payer back (Stripe's return_url, Razorpay's callback_url)
	expireBy    int64  // a Razorpay link's expire_by (unix seconds; not enforced)
	session     bool   // a Stripe Checkout Session's PaymentIntent (the card typed on the checkout page)
	referenceID string // a Razorpay link's reference_id
	// ext holds what the provider was given to keep (nil: nothing); set
	// once, when the payment is made (a pointer: Payment stays comparable).
	ext        *kept
	authorized bool // a card authorization was made (a void follows it, not an expiry)
}

// kept is what a dialect's payment was given to keep and hands back: a
// Stripe PaymentIntent's metadata (payment_intent_data's for a session's)
// and its session's; a Razorpay link's notes.
type kept struct {
	meta, sessionMeta, notes map[string]string
}

// Refund is the provider's refund object. Refunds succeed at once.
type Refund struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"`
	Reference string `json:"reference"`
	Amount    int64  `json:"amount"`
	Status    string `json:"status"`
	Created   int64  `json:"created"`
}

// PaymentRequest is the body of POST /v1/payments.
type PaymentRequest struct {
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Reference    string `json:"reference"`
	Method       string `json:"method"`
	PaymentToken string `json:"payment_token,omitempty"`
	Capture      string `json:"capture,omitempty"` // default automatic

	// What a dialect's payment is made with, set before it can settle (an
	// event of a card authorized at once carries them): where its page
	// sends the payer back, whether it is a Stripe Checkout Session's,
	// what it keeps, a Razorpay link's reference_id.
	returnURL   string
	session     bool
	ext         *kept
	referenceID string
}

// RefundRequest is the body of POST /v1/payments/{id}/refunds.
type RefundRequest struct {
	Amount *int64 `json:"amount,omitempty"` // nil: all that is left
}

// validate normalizes r and rejects what a provider would refuse.
func (r *PaymentRequest) validate() error {
	if r.Capture == "" {
		r.Capture = CaptureAuto
	}
	r.Currency = strings.ToUpper(r.Currency)
	switch {
	case r.Amount <= 0:
		return errorf(EInvalid, "amount must be a positive integer (paise)")
	case r.Currency != "INR":
		return errorf(EInvalid, "currency must be INR")
	case r.Reference == "" || len(r.Reference) > maxReferenceLen:
		return errorf(EInvalid, "reference must be 1 to %d characters", maxReferenceLen)
	case r.Capture != CaptureAuto && r.Capture != CaptureManual:
		return errorf(EInvalid, "capture must be automatic or manual")
	}
	switch r.Method {
	case MethodUPI:
		if r.PaymentToken != "" {
			return errorf(EInvalid, "payment_token is for card payments")
		}
		if r.Capture != CaptureAuto {
			return errorf(EInvalid, "upi payments are captured automatically")
		}
	case MethodCard:
		// No token: the card is typed on the hosted checkout page (as
		// Stripe Checkout takes it), where the payer approves or declines.
		if r.PaymentToken != "" && !strings.HasPrefix(r.PaymentToken, "tok_") {
			return errorf(EInvalid, "a card's payment_token is tok_... (none: the hosted checkout page takes the card)")
		}
	default:
		return errorf(EInvalid, "method must be upi or card")
	}
	return nil
}

// createPayment validates r and creates its payment. UPI payments
// start pending and settle after a drawn delay; cards are authorized or
// charged at once.
func (s *Sim) createPayment(r PaymentRequest) (Payment, error) {
	if err := r.validate(); err != nil {
		return Payment{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &Payment{
		ID:        newID(s.paymentPrefix()),
		Amount:    r.Amount,
		Currency:  r.Currency,
		Reference: r.Reference,
		Method:    r.Method,
		Capture:   r.Capture,
		Created:   s.now().Unix(),

		returnURL:   r.returnURL,
		session:     r.session,
		ext:         r.ext,
		referenceID: r.referenceID,
	}
	s.payments[p.ID] = p
	s.byRef[p.Reference] = append(s.byRef[p.Reference], p)
	s.all = append(s.all, p)
	switch {
	case r.Method == MethodUPI:
		p.Status = StatusPending
		if !s.closed {
			id, d := p.ID, s.beh.upiDelay()
			s.settling[id] = time.AfterFunc(d, func() {
				s.background(func() { s.settle(id, nil, true) })
			})
		}
	case r.PaymentToken == ThreeDSToken || r.PaymentToken == "":
		p.Status = StatusPending // the payer's 3-D Secure step, or the card itself, on the checkout page
	case r.PaymentToken == DeclineToken || rand.Float64() < s.beh.FailRate:
		s.fail(p, "card_declined")
	case r.Capture == CaptureManual:
		s.authorize(p, false)
	default:
		s.succeed(p, EntryCharge)
	}
	s.log.Debug("payment created", "payment", p.ID, "reference", p.Reference, "method", p.Method, "status", p.Status)
	return *p, nil
}

// Settle decides a pending payment now (UPI, or a card's 3-D Secure step),
// as if the payer approved (ok) or declined, and queues its webhook. It
// returns a not_found or invalid_state *Error for a payment not pending.
func (s *Sim) Settle(paymentID string, ok bool) (Payment, error) {
	return s.settle(paymentID, &ok, false)
}

// settle decides a pending UPI payment: by ok, or by the fail rate when ok
// is nil. auto is true when its timer fired.
func (s *Sim) settle(id string, ok *bool, auto bool) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payments[id]
	if p == nil {
		return Payment{}, errorf(ENotFound, "no payment %q", id)
	}
	if p.Status != StatusPending {
		if auto {
			return *p, nil
		}
		return Payment{}, errorf(EInvalidState, "payment %s is %s %s, not a pending payment", id, p.Method, p.Status)
	}
	if t := s.settling[id]; t != nil {
		t.Stop()
		delete(s.settling, id)
	}
	if ok == nil {
		approve := rand.Float64() >= s.beh.FailRate
		ok = &approve
	}
	if !*ok && (p.session || s.dialect == DialectRazorpay) {
		// A Stripe Checkout page or a Razorpay link stays open after a
		// failed attempt: the payer may try again on it, until it expires
		// (Expire) or its merchant cancels it.
		s.emit(eventAttemptFailed, *p)
		s.log.Debug("attempt failed; the page stays open", "payment", p.ID, "reference", p.Reference)
		return *p, nil
	}
	switch {
	case *ok && p.Capture == CaptureManual:
		s.authorize(p, true)
	case *ok:
		s.succeed(p, EntryCharge)
	case p.Method == MethodCard:
		s.fail(p, "authentication_failed")
	default:
		s.fail(p, "upi_declined")
	}
	s.log.Debug("upi payment settled", "payment", p.ID, "reference", p.Reference, "status", p.Status, "auto", auto)
	return *p, nil
}

// authorize holds a card's money for a later capture; byPayer: the payer
// did it on the checkout page (a 3-D Secure step, a card typed there), so
// the merchant learns it by webhook, not from its own call's answer.
func (s *Sim) authorize(p *Payment, byPayer bool) {
	p.Status, p.authorized = StatusRequiresCapture, true
	s.record(EntryAuthorization, p, "", p.Amount)
	if byPayer {
		s.emit(eventAuthorizedByPayer, *p)
	} else {
		s.emit(eventAuthorized, *p)
	}
}

// Expire ends a pending payment unpaid, as its page's time runs out (a
// Stripe Checkout Session, a Razorpay link, a UPI request): failed, and
// its webhook queued. It returns a not_found or invalid_state *Error for a
// payment not pending.
func (s *Sim) Expire(paymentID string) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payments[paymentID]
	if p == nil {
		return Payment{}, errorf(ENotFound, "no payment %q", paymentID)
	}
	if p.Status != StatusPending {
		return Payment{}, errorf(EInvalidState, "payment %s is %s, not pending", paymentID, p.Status)
	}
	if t := s.settling[paymentID]; t != nil {
		t.Stop()
		delete(s.settling, paymentID)
	}
	s.fail(p, "expired")
	return *p, nil
}

// succeed takes the money: a charge (automatic capture) or a capture.
func (s *Sim) succeed(p *Payment, entry string) {
	p.Status = StatusSucceeded
	p.AmountCaptured = p.Amount
	s.record(entry, p, "", p.Amount)
	s.emit(EventPaymentSucceeded, *p)
}

func (s *Sim) fail(p *Payment, reason string) {
	p.Status = StatusFailed
	p.FailureReason = reason
	s.emit(EventPaymentFailed, *p)
}

// capture takes an authorized payment's money.
func (s *Sim) capture(id string) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup(id)
	if err != nil {
		return Payment{}, err
	}
	switch p.Status {
	case StatusRequiresCapture:
		s.succeed(p, EntryCapture)
		return *p, nil
	case StatusSucceeded:
		return Payment{}, errorf(EAlreadyCaptured, "payment %s is already captured", id)
	case StatusCanceled:
		return Payment{}, errorf(EAlreadyCanceled, "payment %s was canceled", id)
	}
	return Payment{}, errorf(EInvalidState, "payment %s is %s; only requires_capture can be captured", id, p.Status)
}

// cancel voids an authorization.
func (s *Sim) cancel(id string) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup(id)
	if err != nil {
		return Payment{}, err
	}
	switch p.Status {
	case StatusRequiresCapture:
		p.Status = StatusCanceled
		s.record(EntryVoid, p, "", p.Amount)
		s.emit(eventCanceled, *p)
		return *p, nil
	case StatusPending:
		// A card waiting for its 3-D Secure step, or a Razorpay link not
		// paid: nothing is held yet, and nobody may pay on it any more.
		if p.Method == MethodCard || s.dialect == DialectRazorpay {
			if t := s.settling[id]; t != nil {
				t.Stop()
				delete(s.settling, id)
			}
			p.Status = StatusCanceled
			s.emit(eventCanceled, *p)
			return *p, nil
		}
	case StatusSucceeded:
		return Payment{}, errorf(EAlreadyCaptured, "payment %s is captured; refund it instead", id)
	case StatusCanceled:
		return Payment{}, errorf(EAlreadyCanceled, "payment %s is already canceled", id)
	}
	return Payment{}, errorf(EInvalidState, "payment %s is %s; only requires_capture can be canceled", id, p.Status)
}

// refund gives back amount (nil: all that is left) of a succeeded payment.
func (s *Sim) refund(id string, amount *int64) (Refund, error) {
	if amount != nil && *amount <= 0 {
		return Refund{}, errorf(EInvalid, "amount must be a positive integer (paise)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup(id)
	if err != nil {
		return Refund{}, err
	}
	if p.Status != StatusSucceeded {
		return Refund{}, errorf(EInvalidState, "payment %s is %s; only succeeded payments can be refunded", id, p.Status)
	}
	left := p.AmountCaptured - p.AmountRefunded
	n := left
	if amount != nil {
		n = *amount
	}
	if left == 0 {
		return Refund{}, errorf(ERefundExceedsCapture, "payment %s is fully refunded", id)
	}
	if n > left {
		return Refund{}, errorf(ERefundExceedsCapture, "refund of %d would pass the %d captured (%d refunded already)", n, p.AmountCaptured, p.AmountRefunded)
	}
	p.AmountRefunded += n
	r := Refund{ID: newID("re"), PaymentID: p.ID, Reference: p.Reference, Amount: n, Status: StatusSucceeded, Created: s.now().Unix()}
	s.record(EntryRefund, p, r.ID, n)
	s.emit(EventRefundSucceeded, r)
	s.log.Debug("refund", "payment", p.ID, "reference", p.Reference, "refund", r.ID, "amount", n)
	return r, nil
}

// lookup finds a payment; s.mu is held.
func (s *Sim) lookup(id string) (*Payment, error) {
	if p := s.payments[id]; p != nil {
		return p, nil
	}
	return nil, errorf(ENotFound, "no payment %q", id)
}

// payment returns a copy of one payment.
func (s *Sim) payment(id string) (Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup(id)
	if err != nil {
		return Payment{}, err
	}
	return *p, nil
}

// list returns the payments of reference (all when empty), oldest first.
func (s *Sim) list(reference string) []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.all
	if reference != "" {
		src = s.byRef[reference]
	}
	out := make([]Payment, len(src))
	for i, p := range src {
		out[i] = *p
	}
	return out
}
