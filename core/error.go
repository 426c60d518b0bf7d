package core

import (
	"errors"
	"fmt"
)

// Error codes. The HTTP layer maps each to one status.
const (
	EInvalid           = "invalid_request"         // malformed or contradictory input
	ETooLarge          = "body_too_large"          // request body over the limit
	EUnauthorized      = "unauthorized"            // no or bad admit token
	ETokenExpired      = "token_expired"           // admit token past its exp
	EWrongEvent        = "wrong_event"             // token admits to another event; at the gate: a ticket of this venue not for the day's events
	EForbidden         = "forbidden"               // not the hold's owner
	ENotFound          = "not_found"               // no such event or hold
	ESeatsTaken        = "seats_taken"             // some seat is held, booked or unknown
	ESoldOut           = "sold_out"                // not enough GA tickets or band seats
	ELimitExceeded     = "limit_exceeded"          // the account would pass its limit
	EHoldExpired       = "hold_expired"            // the hold is no longer valid
	EHoldNotActive     = "hold_not_active"         // released, expired or booked already
	EAlreadyExtended   = "already_extended"        // the one extension is used
	EVersionMismatch   = "version_mismatch"        // If-Match names another version
	EUnavailable       = "unavailable"             // database unreachable: fail closed
	EBookingClosed     = "booking_closed"          // the hold's booking is settled already
	EPaymentDeclined   = "payment_declined"        // the provider refused the payment
	EPaymentInProgress = "payment_in_progress"     // another payment for this hold is under way
	EProvider          = "provider_unavailable"    // the payment provider did not answer
	EMethodUnavailable = "method_unavailable"      // the provider in use does not take this payment method (UPI, card)
	EIdemMissing       = "idempotency_key_missing" // an operation that needs one came without
	EIdemReused        = "idempotency_key_reused"  // same key, another request
	EIdemInFlight      = "request_in_flight"       // same key, first request still running
	EBadSignature      = "invalid_signature"       // a webhook that does not verify
	EInternal          = "internal"                // a bug

	// Accounts and who may act (core/account.go, core/principal.go).
	ERateLimited = "rate_limited" // too many code sends or verifies: Retry-After says when
	ECodeInvalid = "code_invalid" // a sign-in code that is wrong, expired, used or out of attempts
)

// Operators and the shows they run (core/operator.go, core/show.go).
const (
	EConflict   = "conflict"    // the name is taken, or the change collides with another
	ENotOnSale  = "not_on_sale" // the show is a draft, closed or cancelled: no seats are sold
	EShowLocked = "show_locked" // the sale has opened (or is about to): the show can no longer be edited
)

// The gate's error codes (core/gate.go).
const (
	ETicketInvalid = "ticket_invalid" // a QR payload that is malformed or not signed by the ticket key
	ETicketRevoked = "ticket_revoked" // the ticket's booking is not CONFIRMED and captured (or was withdrawn)
	EWrongVenue    = "wrong_venue"    // the ticket is for an event at another venue than the staff's
	EAlreadyUsed   = "already_used"   // the ticket was checked in before: gate and at say where and when
)

// Error is a failure a client is told about. Detail carries extra fields for
// the JSON body (the taken seats, the limit, ...).
type Error struct {
	Code    string
	Message string
	Detail  map[string]any
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With adds a detail field and returns e.
func (e *Error) With(key string, v any) *Error {
	if e.Detail == nil {
		e.Detail = make(map[string]any)
	}
	e.Detail[key] = v
	return e
}

// ErrorCode returns the code of the *Error in err's chain, or EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}
