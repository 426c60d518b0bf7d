package seatmap

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzBitmap sets arbitrary positions (each pair of input bytes is one
// position, some negative or past the end) in a bitmap of any capacity.
// The properties: a set position inside the capacity reads back available,
// positions never set read back taken, positions outside the bitmap are
// ignored (no panic, no byte changed), and Count is the number of distinct
// positions set inside the bitmap.
func FuzzBitmap(f *testing.F) {
	f.Add(0, []byte{})
	f.Add(1, []byte{0, 0})
	f.Add(9, []byte{0, 8, 0, 9, 0xff, 0xff})
	f.Add(250, []byte{0, 0, 0, 249, 0, 250, 0x80, 0})
	f.Add(-3, []byte{0, 1})
	f.Fuzz(func(t *testing.T, capacity int, pos []byte) {
		capacity %= 1 << 16
		if capacity < 0 {
			capacity = -capacity
		}
		b := New(capacity)
		if len(b) != (capacity+7)/8 {
			t.Fatalf("New(%d) has %d bytes; want %d", capacity, len(b), (capacity+7)/8)
		}
		set := map[int]bool{}
		for i := 0; i+1 < len(pos); i += 2 {
			p := int(int16(uint16(pos[i])<<8 | uint16(pos[i+1])))
			Set(b, p)
			if p >= 0 && p < 8*len(b) {
				set[p] = true
			}
		}
		for p := -8; p < 8*len(b)+8; p++ {
			if got := Available(b, p); got != set[p] {
				t.Fatalf("Available(b, %d) = %v; want %v", p, got, set[p])
			}
		}
		if got := Count(b); got != len(set) {
			t.Fatalf("Count = %d; want %d", got, len(set))
		}
	})
}

// FuzzKey checks that an event's key names that event alone: the id is
// read back from between the hash tag's braces, and the key lands in the
// event's cluster slot (the tag is the whole {...}).
func FuzzKey(f *testing.F) {
	for _, id := range []int64{1, 42, -1, 0, 1<<63 - 1, -1 << 63} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id int64) {
		k := Key(id)
		tag, rest, ok := strings.Cut(strings.TrimPrefix(k, "{evt:"), "}")
		if !ok || rest != ":seatmap" || strings.ContainsAny(tag, "{}") {
			t.Fatalf("Key(%d) = %q; want {evt:<id>}:seatmap", id, k)
		}
		if got, err := strconv.ParseInt(tag, 10, 64); err != nil || got != id {
			t.Fatalf("Key(%d) = %q names event %d (%v)", id, k, got, err)
		}
	})
}
