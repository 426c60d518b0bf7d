package health

import "bytes"

// KindOf says what a proxied request to the core is evidence of: holds
// (POST /v1/events/{id}/holds) and the calls on holds and bookings (pay,
// confirm, extend, release, reads) are; the catalog, sign-in, accounts and
// the gate are not (they are not what the admission rate feeds, and some
// fail for reasons of their own, such as sign-in without an SMS sender).
// It allocates nothing: it runs on every proxied request.
func KindOf(method, path []byte) Kind {
	switch {
	case bytes.HasPrefix(path, []byte("/v1/holds/")), bytes.HasPrefix(path, []byte("/v1/bookings/")):
		return KindBooking
	case string(method) == "POST" && bytes.HasPrefix(path, []byte("/v1/events/")) &&
		bytes.HasSuffix(bytes.TrimSuffix(path, []byte("/")), []byte("/holds")):
		return KindHold
	}
	return KindNone
}

// OutcomeOf classifies the core's answer: status and body as the core sent
// them, or answered false when it gave none (busy tells a request the
// gateway shed because every connection to the core stayed taken, which
// is the core being slow, from a connection refused or timed out).
func OutcomeOf(status int, body []byte, answered, busy bool) Outcome {
	switch {
	case busy:
		return Unavailable
	case !answered:
		return Unreachable
	case status == 503:
		return Unavailable
	case status == 502 && bytes.Contains(body, []byte(`"provider_unavailable"`)):
		return OK // the core answered: the payment provider is what is down
	case status >= 500:
		return Failed
	}
	return OK
}
