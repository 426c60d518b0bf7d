package paysim

import (
	"fmt"
	"net/http"
)

// Error codes, each answered with one HTTP status (see status).
const (
	EInvalid              = "invalid_request"        // malformed or contradictory input
	ETooLarge             = "body_too_large"         // request body over MaxBodyBytes
	EUnauthorized         = "unauthorized"           // missing or wrong API key
	ENotFound             = "not_found"              // no such payment or route
	EMethodNotAllowed     = "method_not_allowed"     // route exists, method does not
	EAlreadyCaptured      = "already_captured"       // capture or cancel of a captured payment
	EAlreadyCanceled      = "already_canceled"       // capture or cancel of a canceled payment
	EInvalidState         = "invalid_state"          // the payment's status does not allow this
	ERefundExceedsCapture = "refund_exceeds_capture" // refunds would pass the captured amount
	EKeyReused            = "idempotency_key_reused" // same Idempotency-Key, other parameters
	EInProgress           = "request_in_progress"    // same Idempotency-Key, first request still running
	EUnavailable          = "unavailable"            // simulated outage
	EInternal             = "internal"               // a bug
)

var status = map[string]int{
	EInvalid:              http.StatusBadRequest,
	ETooLarge:             http.StatusRequestEntityTooLarge,
	EUnauthorized:         http.StatusUnauthorized,
	ENotFound:             http.StatusNotFound,
	EMethodNotAllowed:     http.StatusMethodNotAllowed,
	EAlreadyCaptured:      http.StatusConflict,
	EAlreadyCanceled:      http.StatusConflict,
	EInvalidState:         http.StatusConflict,
	ERefundExceedsCapture: http.StatusConflict,
	EKeyReused:            http.StatusUnprocessableEntity,
	EInProgress:           http.StatusConflict,
	EUnavailable:          http.StatusServiceUnavailable,
	EInternal:             http.StatusInternalServerError,
}

// Error is a failure the API client is told about, as
// {"error": Code, "message": Message}.
type Error struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
