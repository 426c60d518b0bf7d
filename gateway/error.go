package gateway

import (
	"errors"
	"fmt"
	"time"
)

// Error codes: what a fan, a page or an operator is told went wrong. They
// are API (pages and apps branch on them); gateway/http maps each to one
// HTTP status in one table.
const (
	EInvalid         = "invalid_request"     // malformed body or value
	ETooLarge        = "body_too_large"      // request body over the limit
	EHeadersTooLarge = "headers_too_large"   // request headers (cookies) over the read buffer
	ENotFound        = "not_found"           // no such event, route, page or seat map
	EMethod          = "method_not_allowed"  // the route exists, not with this method
	EUnauthorized    = "unauthorized"        // the operators' API without a valid operator token
	EForbidden       = "forbidden"           // an operator whose role (or a disabled account) may not do this
	EQueueToken      = "invalid_queue_token" // no, a bad or an expired queue token
	EIdentity        = "identity_required"   // no or a bad account token where one is needed
	EPhoneUnverified = "phone_not_verified"  // an account without a verified phone
	ECrossSite       = "cross_site"          // a join or leave sent by another site's page
	ERateLimited     = "rate_limited"        // too many requests from one address or token
	ENotOpen         = "not_open"            // before prequeue_at
	EClosed          = "closed"              // after closes_at
	ESessionEnded    = "session_ended"       // the identity has had its one session
	ERejoin          = "rejoin"              // the room was reset: the token's place is gone
	EOnsalePassed    = "onsale_passed"       // the pre-queue is frozen: its dials are fixed
	EUnavailable     = "unavailable"         // Redis (or the core, for the room) unreachable: fail closed
	EBusy            = "busy"                // every connection to the core is taken: shed
	ECoreUnavailable = "core_unavailable"    // the core did not answer a proxied request
	EInternal        = "internal"            // a bug
)

// Error is a failure a client is told about. Detail carries extra fields
// of the JSON body (when the queue opens);
// RetryAfter, for rate_limited and unavailable answers, says when to come
// back (zero: the writer's default).
type Error struct {
	Code       string
	Message    string
	Detail     map[string]any
	RetryAfter time.Duration
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

// ErrorCode returns the code of err: the *Error in its chain, not_found for
// ErrNoEvent, session_ended for ErrEnded, unavailable for ErrUnavailable,
// else internal.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, ErrNoEvent):
		return ENotFound
	case errors.Is(err, ErrEnded):
		return ESessionEnded
	case errors.Is(err, ErrUnavailable):
		return EUnavailable
	}
	return EInternal
}

// Errors of the store and the room.
var (
	ErrNoEvent     = errors.New("no such event in the waiting room")
	ErrEnded       = errors.New("this identity's session in the event is over")
	ErrUnavailable = errors.New("waiting room store unavailable")
)
