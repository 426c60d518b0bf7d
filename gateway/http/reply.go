package http

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// The queue reply is the answer to every status poll, so it is written
// here by hand, field by field, instead of by encoding/json's reflection:
// the same bytes json.Marshal writes (TestQueueReplyJSON compares them),
// without its allocations. A string that JSON would escape (none of the
// gateway's own do) sends the whole reply to json.Marshal.

// writeReply answers with r as JSON, as writeJSON would.
func writeReply(ctx *fasthttp.RequestCtx, code int, r *queueReply) {
	var buf [512]byte
	b, ok := appendReply(buf[:0], r)
	if !ok {
		writeJSON(ctx, code, *r) // (a copy: r itself stays off the heap)
		return
	}
	ctx.SetStatusCode(code)
	ctx.Response.Header.SetContentTypeBytes(jsonType)
	ctx.SetBody(append(b, '\n'))
}

// noStore says the answer is this fan's, for no cache to keep.
func noStore(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetCanonical(cacheControl, privateNoStore)
}

var (
	jsonType       = []byte("application/json")
	cacheControl   = []byte(fasthttp.HeaderCacheControl)
	privateNoStore = []byte("private, no-store")
)

// appendReply appends r as json.Marshal writes it; false when a string
// needs escaping.
func appendReply(b []byte, r *queueReply) ([]byte, bool) {
	ok := true
	str := func(b []byte, key, v string) []byte {
		if !plain(v) {
			ok = false
		}
		b = append(append(append(b, key...), '"'), v...)
		return append(b, '"')
	}
	num := func(b []byte, key string, v int64) []byte {
		return strconv.AppendInt(append(b, key...), v, 10)
	}
	date := func(b []byte, key string, t time.Time) []byte {
		if y := t.Year(); y < 0 || y > 9999 {
			ok = false // json.Marshal refuses it: writeJSON says so
		}
		b = t.AppendFormat(append(append(b, key...), '"'), time.RFC3339Nano)
		return append(b, '"')
	}
	b = str(b, `{"state":`, r.State)
	if r.QueueToken != "" {
		b = str(b, `,"queue_token":`, r.QueueToken)
	}
	if r.Position != 0 {
		b = num(b, `,"position":`, r.Position)
	}
	b = num(b, `,"ahead":`, r.Ahead)
	b = num(b, `,"eta_seconds":`, r.EtaSeconds)
	if r.BoundBy != "" {
		b = str(b, `,"bound_by":`, r.BoundBy)
	}
	b = num(b, `,"poll_after_ms":`, r.PollAfterMs)
	if r.OnsaleAt != nil {
		b = date(b, `,"onsale_at":`, *r.OnsaleAt)
	}
	if r.AdmitToken != "" {
		b = str(b, `,"admit_token":`, r.AdmitToken)
	}
	if r.AdmitExpiresAt != nil {
		b = date(b, `,"admit_expires_at":`, *r.AdmitExpiresAt)
	}
	if r.Message != "" {
		b = str(b, `,"message":`, r.Message)
	}
	return append(b, '}'), ok
}

// plain reports whether json.Marshal writes s as it is: printable ASCII
// without quotes, backslashes or the characters it escapes for HTML.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
