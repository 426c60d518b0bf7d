// Package problem writes error answers as RFC 9457 problem details, the
// one shape of every error both services answer: type, title, status and
// detail as the RFC names them, and onsale's extension members: error (the
// stable code clients switch on), message (the detail again, for clients
// written before problem details), request_id, and any member the error
// adds (the taken seats, the limit, retry_after_seconds, ...).
package problem

import "strings"

// ContentType is the media type of a problem answer.
const ContentType = "application/problem+json"

// TypePrefix starts each problem's type URI: a URN per error code, stable
// and not meant to be fetched (RFC 9457 section 3.1.1: a type need not be
// dereferenceable); docs/api.md lists the codes.
const TypePrefix = "urn:onsale:problem:"

// New returns the members of a problem: code is onsale's error code,
// message the human explanation, status the HTTP status, requestID the
// request's id ("" for none).
func New(code, message string, status int, requestID string) map[string]any {
	p := map[string]any{"type": TypePrefix + code, "title": Title(code), "status": status, "detail": message,
		"error": code, "message": message}
	if requestID != "" {
		p["request_id"] = requestID
	}
	return p
}

// Title is a code's short, human summary: "seats_taken" is "Seats taken".
func Title(code string) string {
	t := strings.ReplaceAll(code, "_", " ")
	if t == "" {
		return "Error"
	}
	return strings.ToUpper(t[:1]) + t[1:]
}
