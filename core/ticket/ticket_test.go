package ticket

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/account"
)

// signV1 makes a payload in the first format ("t1.", JSON claims), which
// tickets shown before the compact format still carry.
func signV1(key ed25519.PrivateKey, c Claims) string {
	b, _ := json.Marshal(c)
	msg := prefixV1 + base64.RawURLEncoding.EncodeToString(b)
	return msg + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, []byte(msg)))
}

func TestSignVerify(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	s := NewSigner(key)
	c := Claims{Event: 12, Booking: 104217, N: 3}
	p := s.Sign(c)
	want := c
	want.Version = 2
	v1 := Claims{Ticket: "7b0c1f2e-9d3a-4c5b-8e6f-0a1b2c3d4e5f", Booking: 17, Event: 1, Seat: "NL1-J-14", N: 1, Issued: 1_800_000_000}
	wantV1 := v1
	wantV1.Version = 1
	for _, tc := range []struct {
		name, payload string
		want          Claims
	}{
		{"v2", p, want},
		{"v2 lower case", strings.ToLower(p), want},
		{"v2 with a newline", p + "\n", want},
		{"v1", signV1(key, v1), wantV1},
	} {
		got, err := Verify(s.PublicKey(), tc.payload)
		if err != nil || *got != tc.want {
			t.Errorf("%s: Verify = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if got, _ := Verify(s.PublicKey(), p); got.Ref() != "104217-3" {
		t.Errorf("Ref = %q; want 104217-3", got.Ref())
	}
	tampered := []byte(p)
	tampered[5] ^= 'A' ^ 'B'
	if tampered[5] == p[5] {
		tampered[5] = 'C'
	}
	tests := []struct {
		name, payload string
		want          error
	}{
		{"other key", NewSigner(other).Sign(c), ErrSignature},
		{"tampered", string(tampered), ErrSignature},
		{"v1 other key", signV1(other, v1), ErrSignature},
		{"no prefix", p[3:], ErrMalformed},
		{"other version", "T3." + p[3:], ErrMalformed},
		{"empty", "", ErrMalformed},
		{"not base32", p[:10] + "!" + p[11:], ErrMalformed},
		{"signature only", Prefix + b32.EncodeToString(make([]byte, 64)), ErrMalformed},
		{"bad v1 signature encoding", "t1.abc.!!", ErrMalformed},
	}
	for _, tc := range tests {
		if _, err := Verify(s.PublicKey(), tc.payload); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v; want %v", tc.name, err, tc.want)
		}
	}
	// Claims the format cannot carry are refused even when signed.
	for _, bad := range []Claims{{Event: 0, Booking: 1, N: 1}, {Event: 1, Booking: 1, N: 0}} {
		if _, err := Verify(s.PublicKey(), s.Sign(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Verify(%+v) = %v; want ErrMalformed", bad, err)
		}
	}
}

// The QR code of a ticket is large, square, with whole pixels per module
// and the quiet zone, and of a low version: the payload is compact.
func TestQR(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	s := NewSigner(key)
	for _, tc := range []struct {
		name        string
		c           Claims
		maxVersion  int
		size, minPx int
	}{
		{"cinema", Claims{Event: 12, Booking: 1042, N: 2}, 5, 320, 512},
		{"stadium, ids in the millions", Claims{Event: 4_000_000, Booking: 90_000_000, N: 6}, 6, 640, 640},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := s.Sign(tc.c)
			v, err := Version(p)
			if err != nil || v > tc.maxVersion {
				t.Fatalf("Version(%d chars) = %d, %v; want at most %d", len(p), v, err, tc.maxVersion)
			}
			t.Logf("payload %d characters: QR version %d (%d modules)", len(p), v, 17+4*v)
			img, err := s.QR(p, tc.size)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(img))
			modules := 17 + 4*v + 8 // the four-module quiet zone on each side
			if err != nil || cfg.Width != cfg.Height || cfg.Width < tc.minPx || cfg.Width%modules != 0 {
				t.Fatalf("QR PNG = %dx%d, %v; want square, >= %d px, a multiple of %d modules", cfg.Width, cfg.Height, err, tc.minPx, modules)
			}
			pic, _ := png.Decode(bytes.NewReader(img))
			px := cfg.Width / modules
			for _, at := range [][2]int{{0, 0}, {4*px - 1, 4*px - 1}, {cfg.Width - 1, cfg.Width / 2}} {
				if r, _, _, _ := pic.At(at[0], at[1]).RGBA(); r != 0xffff {
					t.Errorf("pixel %v is dark; want the quiet zone white", at)
				}
			}
			if r, _, _, _ := pic.At(4*px, 4*px).RGBA(); r != 0 {
				t.Error("the finder pattern's corner is light")
			}
		})
	}
}

func TestStaffToken(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	signer := account.NewSigner(key)
	v := NewStaffVerifier(signer.PublicKey())
	asha := core.Staff{Name: "asha", Venue: 1, Gate: "3"}
	good, exp, err := StaffToken(signer, asha, 12*time.Hour)
	if err != nil || time.Until(exp) < 11*time.Hour {
		t.Fatalf("StaffToken = %v, %v", exp, err)
	}
	expired, _, _ := StaffToken(signer, asha, -time.Minute)
	foreign, _, _ := StaffToken(account.NewSigner(other), asha, time.Hour)
	fan, _, _ := signer.Account("42", true, time.Hour)
	if _, _, err := StaffToken(signer, core.Staff{Name: "asha", Gate: "3"}, time.Hour); err == nil {
		t.Error("StaffToken without a venue succeeded")
	}
	for _, tc := range []struct {
		name, token string
		want        error
	}{
		{"good", good, nil},
		{"expired", expired, account.ErrExpired},
		{"another key", foreign, ErrStaffInvalid},
		{"a fan's account token", fan, ErrStaffInvalid},
		{"garbage", "x.y.z", ErrStaffInvalid},
	} {
		got, err := v.Verify(tc.token)
		if !errors.Is(err, tc.want) || (err == nil && got != asha) {
			t.Errorf("%s: Verify = %+v, %v; want %+v, %v", tc.name, got, err, asha, tc.want)
		}
	}
}
