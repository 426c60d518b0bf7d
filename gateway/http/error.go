package http

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
	"github.com/onsale/onsale/shared/problem"
)

// status maps each error code to its one HTTP status.
var status = map[string]int{
	gateway.EInvalid:         fasthttp.StatusBadRequest,
	gateway.ETooLarge:        fasthttp.StatusRequestEntityTooLarge,
	gateway.EHeadersTooLarge: fasthttp.StatusRequestHeaderFieldsTooLarge,
	gateway.ENotFound:        fasthttp.StatusNotFound,
	gateway.EMethod:          fasthttp.StatusMethodNotAllowed,
	gateway.EUnauthorized:    fasthttp.StatusUnauthorized,
	gateway.EForbidden:       fasthttp.StatusForbidden,
	gateway.EQueueToken:      fasthttp.StatusUnauthorized,
	gateway.EIdentity:        fasthttp.StatusUnauthorized,
	gateway.EPhoneUnverified: fasthttp.StatusForbidden,
	gateway.ECrossSite:       fasthttp.StatusForbidden,
	gateway.ERateLimited:     fasthttp.StatusTooManyRequests,
	gateway.ENotOpen:         fasthttp.StatusConflict,
	gateway.EClosed:          fasthttp.StatusGone,
	gateway.ESessionEnded:    fasthttp.StatusGone,
	gateway.ERejoin:          fasthttp.StatusConflict,
	gateway.EOnsalePassed:    fasthttp.StatusConflict,
	gateway.EUnavailable:     fasthttp.StatusServiceUnavailable,
	gateway.EBusy:            fasthttp.StatusServiceUnavailable,
	gateway.ECoreUnavailable: fasthttp.StatusBadGateway,
	gateway.EInternal:        fasthttp.StatusInternalServerError,
}

// defaultRetryAfter is what a 429 or 503 tells a client when the error
// does not say: long enough not to hammer, short enough not to lose a turn.
const defaultRetryAfter = 2 * time.Second

// plainMessage is what a client is told of an error that is not a
// *gateway.Error (a store's sentinel, or a bug, whose text is not for it).
var plainMessage = map[string]string{
	gateway.ENotFound:    "no such event",
	gateway.EUnavailable: "the waiting room cannot answer right now; try again",
	gateway.EInternal:    "internal error",
}

// adminRealm is the challenge of the operators' API.
const adminRealm = `Bearer realm="onsale-admin"`

// writeError answers with err, the one writer of error responses: the
// status from the table, the JSON body {"error":code,"message":...,<detail>},
// Retry-After on 429 and 503, WWW-Authenticate on the operators' 401. An
// error that is not a *gateway.Error is mapped by gateway.ErrorCode (an
// internal one is logged, and its text kept from the client).
func (s *Server) writeError(ctx *fasthttp.RequestCtx, err error) {
	var e *gateway.Error
	if !errors.As(err, &e) {
		code := gateway.ErrorCode(err)
		e = &gateway.Error{Code: code, Message: plainMessage[code]}
	}
	code, ok := status[e.Code]
	if !ok {
		code = fasthttp.StatusInternalServerError
	}
	if code == fasthttp.StatusInternalServerError {
		s.log.Error("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "request_id", requestIDOf(ctx), "err", err)
	}
	switch {
	case code == fasthttp.StatusTooManyRequests || code == fasthttp.StatusServiceUnavailable:
		wait := e.RetryAfter
		if wait <= 0 {
			wait = defaultRetryAfter
		}
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	case e.Code == gateway.EUnauthorized:
		ctx.Response.Header.Set("WWW-Authenticate", adminRealm)
	}
	id := requestIDOf(ctx)
	if id == "" { // a poll's error, or an answer reset after a failed proxy
		id = nameRequest(ctx)
	}
	body := problem.New(e.Code, e.Message, code, id)
	for k, v := range e.Detail {
		body[k] = v
	}
	writeJSON(ctx, code, body)
	ctx.SetContentType(problem.ContentType)
}

// writeJSON answers with v as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = fasthttp.StatusInternalServerError, []byte(`{"error":"internal","message":"encode response"}`)
	}
	ctx.SetStatusCode(code)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

// ErrorHandler answers requests fasthttp refuses before any handler (too
// large, malformed) with the same JSON errors. Headers over the read
// buffer (ReadBufferSize) are nearly always a browser's cookies for the
// site: the fan is told what clears them.
func (s *Server) ErrorHandler(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.writeError(ctx, gateway.Errorf(gateway.ETooLarge, "the request body is too large"))
		return
	}
	if small := (*fasthttp.ErrSmallBuffer)(nil); errors.As(err, &small) {
		s.writeError(ctx, gateway.Errorf(gateway.EHeadersTooLarge,
			"the request's headers are too large: clear this site's cookies in the browser's settings and try again"))
		return
	}
	s.writeError(ctx, gateway.Errorf(gateway.EInvalid, "the request could not be read"))
}
