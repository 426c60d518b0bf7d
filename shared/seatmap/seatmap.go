// Package seatmap is the contract between the core, which writes each live
// event's seat availability to Redis, and the gateway, which serves it to
// fans: the key it lives under and what its bits mean. Browsing may be a
// second or two stale; PostgreSQL alone decides who gets a seat.
//
// The format: one Redis string per event, at Key(event), with one bit per
// seat position of the event's layout (positions 0..capacity-1, as the core
// numbers seats). Bit i is bit (7 - i%8) of byte i/8, most significant bit
// first, which is how Redis SETBIT and GETBIT number bits, so the core may
// flip single seats with SETBIT and the gateway read the whole map with GET.
// A set bit means the seat can be held now (free, or held by a hold that has
// expired); a clear bit means held or sold. The key expires after TTL unless
// the core rewrites it, so the map of an event nobody maintains disappears.
package seatmap

import (
	"math/bits"
	"strconv"
	"time"
)

// Key is the Redis key of an event's availability bitmap. The {evt:<id>}
// hash tag keeps it in the cluster slot of the event's other keys.
func Key(event int64) string { return "{evt:" + strconv.FormatInt(event, 10) + "}:seatmap" }

// TTL is how long a bitmap outlives its last rebuild.
const TTL = time.Minute

// Encoding describes the format to API clients (the gateway puts it in its
// seat-map answer).
const Encoding = "bit i (most significant first) of the base64 bytes is seat position i of the layout; 1 = can be held"

// New returns an all-taken bitmap for capacity seats.
func New(capacity int) []byte { return make([]byte, (capacity+7)/8) }

// Set marks position pos available in b; positions outside b are ignored.
func Set(b []byte, pos int) {
	if pos >= 0 && pos/8 < len(b) {
		b[pos/8] |= 0x80 >> (pos % 8)
	}
}

// Available reports whether position pos is marked available in b.
func Available(b []byte, pos int) bool {
	return pos >= 0 && pos/8 < len(b) && b[pos/8]&(0x80>>(pos%8)) != 0
}

// Count returns how many positions of b are marked available.
func Count(b []byte) int {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}
