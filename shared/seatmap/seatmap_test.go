package seatmap

import "testing"

func TestBits(t *testing.T) {
	b := New(10)
	if len(b) != 2 {
		t.Fatalf("New(10) has %d bytes; want 2", len(b))
	}
	for _, p := range []int{0, 7, 9, 10, 16, -1} {
		Set(b, p)
	}
	// Positions 0 and 7 are the first byte's top and bottom bits (as Redis
	// SETBIT numbers them), 9 the second byte's second bit; 16 and -1 are
	// outside and ignored.
	if b[0] != 0x81 || b[1] != 0x60 {
		t.Fatalf("bytes = %08b %08b; want 10000001 01100000", b[0], b[1])
	}
	for p, want := range map[int]bool{0: true, 1: false, 7: true, 8: false, 9: true, 10: true, 11: false, 16: false, -1: false} {
		if got := Available(b, p); got != want {
			t.Errorf("Available(%d) = %v; want %v", p, got, want)
		}
	}
	if got := Count(b); got != 4 {
		t.Fatalf("Count = %d; want 4", got)
	}
}

func TestKey(t *testing.T) {
	if got := Key(42); got != "{evt:42}:seatmap" {
		t.Fatalf("Key(42) = %q", got)
	}
}
