package http

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/coreclient"
)

// Request ids: the gateway is the edge, so it names each request itself
// (a client's X-Request-Id is replaced: an id in the audit log is always
// the gateway's). The request carries it to the core (the proxied API, a
// dial's change), which logs it and writes it in its audit log; the
// answer returns it, error bodies name it, and the gateway's own error
// and audit logs carry it. A status poll, answered from the gateway's
// memory and never passed on, gets none: it costs the hot path nothing.

// RequestIDHeader carries a request's id, both ways.
const RequestIDHeader = coreclient.RequestIDHeader

// ridPrefix makes this process's ids unique without a random draw per
// request: a random prefix and a counter.
var (
	ridPrefix = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	ridSeq atomic.Uint64
)

// validRequestID reports whether id may be taken as it is: 1 to 64 of
// A-Z a-z 0-9 . _ - (no header or log injection).
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// nameRequest gives the request its id (on the request, for the core, and
// on the answer) and returns it; a request named already keeps its name
// (the answer's was lost to a reset).
func nameRequest(ctx *fasthttp.RequestCtx) string {
	id := ctx.Request.Header.Peek(RequestIDHeader)
	if ctx.UserValue(ridKey) == nil || !validRequestID(id) {
		id = strconv.AppendUint([]byte(ridPrefix), ridSeq.Add(1), 36)
		ctx.Request.Header.SetBytesV(RequestIDHeader, id)
		ctx.SetUserValue(ridKey, true)
	}
	ctx.Response.Header.SetBytesV(RequestIDHeader, id)
	return string(id)
}

// ridKey marks a request the gateway named.
const ridKey = "onsale.request_id"

// requestIDOf is the id nameRequest gave the request ("" for a poll).
func requestIDOf(ctx *fasthttp.RequestCtx) string {
	return string(ctx.Response.Header.Peek(RequestIDHeader))
}
