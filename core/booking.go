package core

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// Booking statuses: one booking per hold, PAYMENT_PENDING until the payment
// settles, then CONFIRMED, or REFUND_DUE (money came for a hold that was
// gone) and REFUNDED, or FAILED.
const (
	BookingPending   = "PAYMENT_PENDING"
	BookingConfirmed = "CONFIRMED"
	BookingRefundDue = "REFUND_DUE"
	BookingRefunded  = "REFUNDED"
	BookingFailed    = "FAILED"
)

// Payment flows: async (UPI-like: the provider calls back by webhook) and
// sync (card: authorize, book, capture within the request).
const (
	FlowAsync = "async"
	FlowSync  = "sync"
)

// LatePolicy decides what a payment that arrives after its hold expired gets.
type LatePolicy string

const (
	// PolicyRefund keeps the countdown the fan was shown: a payment for an
	// expired hold is refunded, even when nobody has taken the seats yet.
	PolicyRefund LatePolicy = "refund"
	// PolicyHonour books a late payment whenever the hold id still matches
	// and every seat is still this hold's (not swept, not re-held).
	PolicyHonour LatePolicy = "honour"
)

// Booking is an order for the seats of one hold.
type Booking struct {
	ID          int64    `json:"booking_id"`
	HoldID      string   `json:"hold_id"`
	EventID     int64    `json:"event_id"`
	Account     string   `json:"account"`
	Seats       []string `json:"seats"`
	Quantity    int      `json:"quantity"`
	AmountPaise int64    `json:"amount_paise"`
	Currency    string   `json:"currency"`
	Flow        string   `json:"flow"`
	Status      string   `json:"status"`
	PaymentID   string   `json:"payment_id,omitempty"`
	// Attempt counts the bookings of this hold: a new one follows a FAILED payment.
	Attempt int `json:"attempt"`
	// Captured: the money is taken (UPI at once; a card once captured).
	// Tickets are shown only for a confirmed, captured booking.
	Captured  bool      `json:"captured"`
	Email     string    `json:"email,omitempty"`
	Phone     string    `json:"phone,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Tickets   []Ticket  `json:"tickets,omitempty"`
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
type Settlement struct {
	EventID   string // provider event id, for de-duplication ("" when not from a webhook)
	Type      string // provider event type, for the record
	PaymentID string
	BookingID int64
	Succeeded bool
}

// Settle outcomes besides booking statuses.
const (
	OutcomeDuplicate    = "DUPLICATE"     // this provider event was handled before
	OutcomeUnknownOrder = "UNKNOWN_ORDER" // no booking matches: logged and acknowledged
)

// Bookings is the payment side of the core.
type Bookings interface {
	// StartPayment creates the booking for a valid hold, or returns the
	// live booking it has (in whatever status: the caller answers from it),
	// and extends the hold once, in one transaction.
	StartPayment(ctx context.Context, ref HoldRef, flow string, c Contact) (*Booking, error)
	SetPaymentID(ctx context.Context, booking int64, paymentID string) error
	// Settle applies a provider outcome exactly once: a success books the
	// hold's seats (CONFIRMED) or, when they are gone, records REFUND_DUE
	// and queues the refund; a failure marks the booking FAILED. It returns
	// the booking's status, or OutcomeDuplicate / OutcomeUnknownOrder.
	Settle(ctx context.Context, s Settlement) (string, error)
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
	return id, err == nil && id > 0
}
