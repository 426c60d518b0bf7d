package http

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// A request's id: the client's when well-formed, else the gateway's own,
// on the request (for the core) and on the answer alike.
func TestNameRequest(t *testing.T) {
	for _, tc := range []struct{ name, sent string }{
		{"kept", "lb-7f3a.42_x"}, {"none", ""}, {"injection", "a\r\nSet-Cookie: x=1"}, {"space", "a b"}, {"long", strings.Repeat("a", 65)},
	} {
		ctx := &fasthttp.RequestCtx{}
		if tc.sent != "" {
			ctx.Request.Header.Set(RequestIDHeader, tc.sent)
		}
		id := nameRequest(ctx)
		want := tc.sent
		if tc.name != "kept" {
			want = ""
		}
		switch {
		case want != "" && id != want:
			t.Errorf("%s: id %q; want the client's %q", tc.name, id, want)
		case want == "" && (!strings.HasPrefix(id, ridPrefix) || !validRequestID([]byte(id))):
			t.Errorf("%s: id %q; want the gateway's own", tc.name, id)
		case string(ctx.Request.Header.Peek(RequestIDHeader)) != id || requestIDOf(ctx) != id:
			t.Errorf("%s: request carries %q, answer %q; want %q on both", tc.name, ctx.Request.Header.Peek(RequestIDHeader), requestIDOf(ctx), id)
		}
	}
	a, b := nameRequest(&fasthttp.RequestCtx{}), nameRequest(&fasthttp.RequestCtx{})
	if a == b {
		t.Errorf("two requests named %q alike", a)
	}
}
