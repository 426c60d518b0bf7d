package core

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Cursor is where a catalog listing stopped: the last show's start and id
// (shows are listed by start, then id). The zero Cursor is the start.
type Cursor struct {
	StartsAt time.Time
	ID       int64
}

// IsZero reports whether c is the start of a listing.
func (c Cursor) IsZero() bool { return c.ID == 0 }

// Encode is the cursor as clients pass it back: opaque, URL-safe.
func (c Cursor) Encode() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.StartsAt.UnixMicro(), 10) + "." + strconv.FormatInt(c.ID, 10)))
}

// ParseCursor reads an encoded cursor ("": the zero Cursor), or EInvalid.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := Errorf(EInvalid, "cursor %q is not one this API gave: pass next_cursor back unchanged", s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	us, ids, ok := strings.Cut(string(b), ".")
	micros, err1 := strconv.ParseInt(us, 10, 64)
	id, err2 := strconv.ParseInt(ids, 10, 64)
	if !ok || err1 != nil || err2 != nil || id <= 0 {
		return Cursor{}, bad
	}
	return Cursor{StartsAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}
