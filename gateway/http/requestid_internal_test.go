package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A request's id is the gateway's own, whatever the client sent, on the
// request (for the core) and on the answer alike; naming it again (after
// the answer was reset) keeps it.
func TestNameRequest(t *testing.T) {
	for _, sent := range []string{"lb-7f3a.42_x", "", "a\r\nSet-Cookie: x=1", "a b", strings.Repeat("a", 65)} {
		ctx := &fasthttp.RequestCtx{}
		if sent != "" {
			ctx.Request.Header.Set(RequestIDHeader, sent)
		}
		id := nameRequest(ctx)
		switch {
		case !strings.HasPrefix(id, ridPrefix) || !validRequestID([]byte(id)):
			t.Errorf("sent %q: id %q; want the gateway's own", sent, id)
		case string(ctx.Request.Header.Peek(RequestIDHeader)) != id || requestIDOf(ctx) != id:
			t.Errorf("sent %q: request carries %q, answer %q; want %q on both", sent, ctx.Request.Header.Peek(RequestIDHeader), requestIDOf(ctx), id)
		}
		ctx.Response.Reset()
		if again := nameRequest(ctx); again != id {
			t.Errorf("named again after a reset: %q; want %q kept", again, id)
		}
	}
	a, b := nameRequest(&fasthttp.RequestCtx{}), nameRequest(&fasthttp.RequestCtx{})
	if a == b {
		t.Errorf("two requests named %q alike", a)
	}
}
