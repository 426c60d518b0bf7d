package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// LatePolicy decides what a payment that arrives after its hold expired gets.
type LatePolicy string

const (
	// PolicyRefund keeps the countdown the fan was shown: a payment for an
	// expired hold is refunded, even when nobody has taken the seats yet.
	PolicyRefund LatePolicy = "refund"
	// PolicyHonour books a late payment whenever the hold id still matches
	// and every seat is still this hold's (not re-held by another fan, nor
	// ended by a release or by a settle of the account's limit; a GA hold's
	// tickets: not yet swept back to the counter). A seated hold is never
	// swept (migration 00012), so a late payment for seats nobody took is
	// booked however late it comes.
	PolicyHonour LatePolicy = "honour"
)

// Booking is an order for the seats of one hold.
type Booking struct {
	ID          int64         `json:"booking_id"`
	HoldID      string        `json:"hold_id"`
	EventID     int64         `json:"event_id"`
	Account     string        `json:"account"`
	Seats       []string      `json:"seats"`
	Quantity    int           `json:"quantity"`
	AmountPaise int64         `json:"amount_paise"`
	Currency    string        `json:"currency"`
	Flow        Flow          `json:"flow"`
	Status      BookingStatus `json:"status"`
	PaymentID   string        `json:"payment_id,omitempty"`
	// Attempt counts the bookings of this hold: a new one follows a FAILED payment.
	Attempt int `json:"attempt"`
	// Captured: the money is taken (UPI at once; a card once captured).
	// Tickets are shown only for a confirmed, captured booking.
	Captured  bool      `json:"captured"`
	Email     string    `json:"email,omitempty"`
	Phone     string    `json:"phone,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Tickets   []Ticket  `json:"tickets,omitempty"`
	// Event is the show the booking is for: what a ticket page shows.
	Event *BookingEvent `json:"event,omitempty"`
}

// BookingEvent is the show of a booking, as a fan's ticket shows it.
type BookingEvent struct {
	ID       int64     `json:"id"`
	Name     string    `json:"name"`
	Kind     string    `json:"kind"`
	StartsAt time.Time `json:"starts_at"`
	Venue    Venue     `json:"venue"`
	// Status is the show's (ShowCancelled: it will not take place, and
	// CancelReason says why).
	Status       string `json:"status"`
	CancelReason string `json:"cancel_reason,omitempty"`
}

// Reference is the order reference the provider knows the booking by.
func (b *Booking) Reference() string { return BookingReference(b.ID) }

// PaymentKey is the provider idempotency key of the booking's payment:
// charge:<hold> for a hold's first booking, charge:<hold>:<attempt> after.
func (b *Booking) PaymentKey() string {
	if b.Attempt <= 1 {
		return "charge:" + b.HoldID
	}
	return "charge:" + b.HoldID + ":" + strconv.Itoa(b.Attempt)
}

// Ticket is one admission: a seat of a confirmed booking, or one GA ticket.
type Ticket struct {
	ID      string `json:"ticket_id"`
	EventID int64  `json:"event_id"`
	Seat    string `json:"seat,omitempty"`
	N       int    `json:"n"`
	// Payload is the signed text the QR code carries, verifiable offline.
	Payload string `json:"payload,omitempty"`
	// QR is where the QR image of the ticket is served.
	QR string `json:"qr,omitempty"`
}

// Contact is where tickets are sent.
type Contact struct {
	Email string `json:"email,omitempty"`
	Phone string `json:"phone,omitempty"`
}

// Settlement is what the provider says happened to a payment.
//
// A booking keeps one payment: the one whose id it recorded (or, before it
// recorded one, the first that succeeds for it), of the booking's amount in
// its currency. Money that arrives otherwise is not the booking's to keep,
// and Settle queues a JobStrayRefund for it (outcome OutcomeStrayRefund):
// a second payment on a settled booking, a payment whose id is not the
// booking's, or one whose amount or currency differ (that last one also
// fails a pending booking: its own payment was not what it asked for; on a
// settled booking it is OutcomeOwnPaymentMismatch, refunded by nobody).
// A failure declines a booking only when it is the booking's own payment's
// (OutcomeOtherPayment, OutcomeFailureParked).
// Amount and Currency are checked when Currency is set: every provider
// object carries them (webhook, reconciler, card confirm). The provider has
// no test and live modes to tell apart: one API key is one account.
type Settlement struct {
	EventID   string // provider event id, for de-duplication ("" when not from a webhook)
	Type      string // provider event type, for the record
	PaymentID string
	BookingID int64
	Succeeded bool
	Amount    int64  // what the payment took (paise)
	Currency  string // its currency ("": not known, not checked)
}

// Settle's results besides booking statuses. They are untyped so that they
// compare with a BookingStatus (Settle's result) and with a decoded JSON
// string alike.
const (
	OutcomeDuplicate    = "DUPLICATE"     // this provider event was handled before
	OutcomeUnknownOrder = "UNKNOWN_ORDER" // no booking matches: logged and acknowledged
	OutcomeStrayRefund  = "STRAY_REFUND"  // money the booking does not keep: a JobStrayRefund gives it back
	// OutcomeOtherPayment: a failure of a payment that is not the
	// booking's recorded one. It says nothing of the booking's own
	// payment (which may still succeed), so the booking is left as it is.
	OutcomeOtherPayment = "OTHER_PAYMENT"
	// OutcomeFailureParked: a failure of a payment for a booking that has
	// recorded no payment id yet (the webhook outran SetPaymentID). It is
	// kept in payment_events and applied when SetPaymentID records that
	// very payment; a failure of any other payment never declines the
	// booking (the reconciler, which sees every payment of the booking,
	// settles one whose payments all failed).
	OutcomeFailureParked = "FAILURE_PARKED"
	// OutcomeOwnPaymentMismatch: the provider re-reported a settled
	// booking's own payment with another amount or currency than the
	// booking's. The provider contradicts itself: nothing is refunded or
	// changed (the fan holds valid tickets for a payment the provider
	// took); it is logged loudly and counted in
	// metrics.ProviderContradictions for an operator.
	OutcomeOwnPaymentMismatch = "OWN_PAYMENT_MISMATCH"
)

// Bookings is the payment side of the core.
type Bookings interface {
	// StartPayment creates the booking for a valid hold, or returns the
	// live booking it has (in whatever status: the caller answers from it),
	// and extends the hold once, in one transaction.
	StartPayment(ctx context.Context, ref HoldRef, flow Flow, c Contact) (*Booking, error)
	SetPaymentID(ctx context.Context, booking int64, paymentID string) error
	// Settle applies a provider outcome exactly once: a success books the
	// hold's seats (CONFIRMED) or, when they are gone, records REFUND_DUE
	// and queues the refund; a failure marks the booking FAILED. It returns
	// the booking's status, or OutcomeDuplicate / OutcomeUnknownOrder.
	Settle(ctx context.Context, s Settlement) (BookingStatus, error)
	Booking(ctx context.Context, id int64) (*Booking, error)
}

// BookingReference is the provider-side order reference of booking id.
func BookingReference(id int64) string { return "booking-" + strconv.FormatInt(id, 10) }

// ParseBookingReference is the inverse of BookingReference.
func ParseBookingReference(ref string) (int64, bool) {
	s, ok := strings.CutPrefix(ref, "booking-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0 && BookingReference(id) == ref // one spelling per booking ("booking-01" is not one)
}

// KeyFence names one claim of an idempotency key (ClaimKey's): saving,
// releasing and renewing the key take it and change nothing once the key
// belongs to a later claim (a retry that took over when this request's
// lease ran out, its core frozen or cut off). So a late first request can
// neither delete the retry's claim nor overwrite the response it stores.
type KeyFence time.Time

// ErrKeyLost: the key now belongs to a later claim (see KeyFence).
var ErrKeyLost = errors.New("idempotency key taken over by another request")

// StoredResponse is a response kept for replay under an idempotency key.
type StoredResponse struct {
	Status int
	Body   []byte
}

// Payment is the payment provider's payment object.
type Payment struct {
	ID             string `json:"id"`
	Status         string `json:"status"` // PaymentPending, PaymentRequiresCapture, ...
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference"`
	Method         string `json:"method"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	FailureReason  string `json:"failure_reason,omitempty"`
	// CheckoutURL is where the payer completes a payment that waits for
	// them (a UPI collect page, a card's 3-D Secure step): the provider's
	// own page, so no provider script runs in onsale's pages. Empty when
	// nothing waits for the payer.
	CheckoutURL string `json:"checkout_url,omitempty"`
}

// Payment statuses at the provider.
const (
	PaymentPending         = "pending"
	PaymentRequiresCapture = "requires_capture" // a card authorization, not yet captured
	PaymentSucceeded       = "succeeded"
	PaymentFailed          = "failed"
	PaymentCanceled        = "canceled"
)

// Refund is the provider's refund object.
type Refund struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Status    string `json:"status"`
}

// PaymentRequest creates a payment at the provider.
type PaymentRequest struct {
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Reference    string `json:"reference"`
	Method       string `json:"method"` // upi or card
	PaymentToken string `json:"payment_token,omitempty"`
	Capture      string `json:"capture"` // automatic or manual
	// ReturnURL is where the provider's page sends the payer back to
	// (onsale's booking page); not sent to the simulator, which takes it
	// on its checkout page's link instead.
	ReturnURL string `json:"-"`
	// Since is when the booking was made: a provider's page that expires
	// is given a time from it, so that every retry of the create sends the
	// same request (a provider compares a retried key's parameters).
	Since time.Time `json:"-"`
}

// PaymentProvider is the payment provider as the core uses it, whichever it
// is: core/paysim (onsale's simulator), core/stripe (cards), core/razorpay
// (UPI). Every call that moves money takes an idempotency key derived from
// the booking (or hold) and the attempt; an adapter whose provider keeps
// keys for less time than the outbox retries, or has none for a call, looks
// the effect up before it acts again, so a retry is carried out once
// whatever its age. Errors are *ProviderError in the core's vocabulary
// (402 declined, 409 already_captured / already_canceled /
// refund_exceeds_capture / invalid_state, 5xx or a transport error
// temporary): the adapters translate their provider's.
type PaymentProvider interface {
	// Name is the provider's name in logs and metrics (paysim, stripe,
	// razorpay).
	Name() string
	// Takes reports whether the provider takes a payment method ("upi",
	// "card"): Pay (UPI) and Confirm (card) refuse a method it does not.
	Takes(method string) bool
	// CreatePayment creates (or, under the same key, returns) a payment.
	CreatePayment(ctx context.Context, key string, r PaymentRequest) (*Payment, error)
	// Payment fetches a payment by the id CreatePayment returned.
	Payment(ctx context.Context, id string) (*Payment, error)
	// PaymentsFor lists the payments made for a booking, for the
	// reconciler: by its reference, or its payment's key, or the payment
	// it recorded, whichever the provider can look up.
	PaymentsFor(ctx context.Context, q PaymentLookup) ([]Payment, error)
	// Capture takes the money of an authorized payment.
	Capture(ctx context.Context, key, id string) (*Payment, error)
	// Cancel voids an authorization that was not captured.
	Cancel(ctx context.Context, key, id string) (*Payment, error)
	// Refund gives back whatever is left of what was captured.
	Refund(ctx context.Context, key, id string) (*Refund, error)
	// Webhook verifies a webhook's signature over its raw body (with the
	// provider's own scheme) and reads it as a PaymentEvent: an error
	// with code EBadSignature when the signature fails, EInvalid when it
	// verifies but is not an event.
	Webhook(h http.Header, body []byte, now time.Time) (*PaymentEvent, error)
}

// PaymentLookup names a booking's payments for PaymentsFor.
type PaymentLookup struct {
	Reference string // the booking's reference (BookingReference)
	Key       string // the booking's payment key (Booking.PaymentKey)
	PaymentID string // the payment the booking recorded ("" when none yet)
}

// PaymentEvent is a provider's webhook read into the core's terms.
type PaymentEvent struct {
	ID      string    // the provider's event id: the de-duplication key
	Type    string    // the provider's event type, for the record
	Created time.Time // when the provider made it (zero: not said)
	// Outcome: EventSucceeded (the money is there: taken, or a card
	// authorized), EventFailed, or EventIgnored (an event the flows do
	// not need, such as a refund's: the outbox knows already).
	Outcome   EventOutcome
	PaymentID string
	Reference string // the booking's reference (BookingReference)
	Amount    int64  // paise
	Currency  string // upper case
}

// EventOutcome is what a provider event says of its payment.
type EventOutcome string

// Event outcomes.
const (
	EventSucceeded EventOutcome = "succeeded"
	EventFailed    EventOutcome = "failed"
	EventIgnored   EventOutcome = "ignored"
)

// ProviderError is an error answer of the payment provider.
type ProviderError struct {
	Status  int    // HTTP status
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("provider: %d %s: %s", e.Status, e.Code, e.Message)
}

// ProviderTemporary reports whether retrying the same provider call (same
// idempotency key) may succeed: the provider was down, overloaded or busy
// with the first attempt, or the outcome is unknown (a transport error or a
// timeout).
func ProviderTemporary(err error) bool {
	var pe *ProviderError
	if errors.As(err, &pe) {
		return pe.Status >= 500 || pe.Status == http.StatusTooManyRequests || pe.Code == "request_in_progress"
	}
	return err != nil
}

// ProviderRefusedCapture reports whether err is the provider's definite
// refusal to capture that payment: the card issuer declined it (402), or
// the authorization can no longer be captured (409 already_canceled: it
// was voided or ran out; 409 invalid_state: it failed). Only such an
// answer says no money will come for the booking, and only it may undo a
// sale. Every other refusal (401 or 403 from a wrong or revoked API key,
// 404 from a key of another account, 400 from a client the provider's API
// has moved away from) says nothing about the payment: it is the core's
// configuration, fixed by an operator, and the capture is tried again.
func ProviderRefusedCapture(err error) bool {
	var pe *ProviderError
	if !errors.As(err, &pe) {
		return false
	}
	return pe.Status == http.StatusPaymentRequired || ProviderConflict(err, "already_canceled") || ProviderConflict(err, "invalid_state")
}

// ProviderMisconfigured reports whether err is a refusal of the provider
// that no retry by itself fixes and that is not about the payment: the
// core's key, account or request is wrong (401, 403, 404, 400, 422, ...).
// A money job that meets it keeps retrying (an operator fixes the key and
// the next attempt succeeds) and raises an alert.
func ProviderMisconfigured(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && !ProviderTemporary(err) && pe.Status != http.StatusConflict && pe.Status != http.StatusPaymentRequired
}

// ProviderConflict reports whether err is the provider's 409 with code: the
// call conflicts with the payment's state (already_captured, ...).
func ProviderConflict(err error, code string) bool {
	var pe *ProviderError
	return errors.As(err, &pe) && pe.Status == http.StatusConflict && pe.Code == code
}
