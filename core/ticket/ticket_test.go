package ticket

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"image/png"
	"strings"
	"testing"
)

func TestSignVerify(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	s := NewSigner(key)
	c := Claims{Ticket: "7b0c", Booking: 17, Event: 1, Seat: "NL1-J-14", N: 1, Issued: 1_800_000_000}
	p := s.Sign(c)
	got, err := Verify(s.PublicKey(), p)
	if err != nil || *got != c {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, c)
	}
	forged := strings.Replace(p, p[3:10], "AAAAAAA", 1)
	tests := []struct {
		name, payload string
		want          error
	}{
		{"other key", NewSigner(other).Sign(c), ErrSignature},
		{"tampered", forged, ErrSignature},
		{"no prefix", p[3:], ErrMalformed},
		{"empty", "", ErrMalformed},
		{"bad signature encoding", p[:strings.LastIndexByte(p, '.')] + ".!!", ErrMalformed},
	}
	for _, tc := range tests {
		if _, err := Verify(s.PublicKey(), tc.payload); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v; want %v", tc.name, err, tc.want)
		}
	}
	img, err := QR(p, 256)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width != 256 {
		t.Fatalf("QR PNG = %v, %v", cfg, err)
	}
}
