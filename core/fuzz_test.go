package core_test

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/onsale/onsale/core"
)

// The parsers of the core's vocabulary that read what a client or a
// provider writes: booking references (webhooks), ticket references (gate
// lists), phone numbers and emails (sign-in), client addresses (the
// per-address limits), UUIDs (hold and scan ids) and hold requests. Each
// refusal is EInvalid (or a false ok); each acceptance round-trips.

// FuzzParseBookingReference: a reference the core reads back is the one
// BookingReference writes for that id, so two spellings never name one
// booking ("booking-01", "booking-+1").
func FuzzParseBookingReference(f *testing.F) {
	for _, s := range []string{"booking-1", "booking-01", "booking-+1", "booking--1", "booking-0", "booking-", "Booking-1",
		"booking-9223372036854775807", "booking-9223372036854775808", "booking-1 ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		id, ok := core.ParseBookingReference(ref)
		if !ok {
			return
		}
		if id <= 0 || core.BookingReference(id) != ref {
			t.Fatalf("ParseBookingReference(%q) = %d; BookingReference(%d) = %q", ref, id, id, core.BookingReference(id))
		}
	})
}

// FuzzParseTicketRef: the same for "<booking>-<n>".
func FuzzParseTicketRef(f *testing.F) {
	for _, s := range []string{"1-1", "01-1", "+1-1", "1-+1", "1--1", "0-1", "1-0", "1-2-3", "-", "",
		"9223372036854775807-2147483647"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		b, n, ok := core.ParseTicketRef(ref)
		if !ok {
			return
		}
		if b <= 0 || n <= 0 || core.TicketRef(b, n) != ref {
			t.Fatalf("ParseTicketRef(%q) = %d, %d; TicketRef writes %q", ref, b, n, core.TicketRef(b, n))
		}
	})
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{7,14}$`)

// FuzzNormalizePhone: an accepted number is E.164 and normalizing it again
// changes nothing (one phone, one account); a refusal is EInvalid.
func FuzzNormalizePhone(f *testing.F) {
	for _, s := range []string{"+919812345678", "9812345678", "98123 45678", "+91-98123-45678", "+0123456789",
		"5812345678", "+1234567", "+1234567890123456", "++91981", "٩٨١٢٣٤٥٦٧٨", "+91\x009812345678", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := core.NormalizePhone(s)
		if err != nil {
			if core.ErrorCode(err) != core.EInvalid {
				t.Fatalf("NormalizePhone(%q) = %v; want EInvalid", s, err)
			}
			return
		}
		if !e164.MatchString(p) {
			t.Fatalf("NormalizePhone(%q) = %q; not E.164", s, p)
		}
		if again, err := core.NormalizePhone(p); err != nil || again != p {
			t.Fatalf("NormalizePhone(%q) = %q, %v; want it unchanged", p, again, err)
		}
	})
}

// FuzzAccountPatch: an accepted email is trimmed, at most 254 bytes, with
// a local part and a domain and none of the characters that would break a
// mail header; normalizing it again changes nothing.
func FuzzAccountPatch(f *testing.F) {
	for _, s := range []string{"fan@example.com", " fan@example.com ", "", "   ", "@example.com", "fan@", "a@b@c",
		"fan @example.com", "fan@example.com\r\nBcc: x@y", "\"fan\"@example.com", "fan@exa\x00mple.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := core.AccountPatch{Email: &s}
		if err := p.Normalize(); err != nil {
			if core.ErrorCode(err) != core.EInvalid {
				t.Fatalf("Normalize(%q) = %v; want EInvalid", s, err)
			}
			return
		}
		e := *p.Email
		if e != strings.TrimSpace(e) {
			t.Fatalf("Normalize(%q) = %q; not trimmed", s, e)
		}
		if e == "" {
			return
		}
		at := strings.LastIndexByte(e, '@')
		if len(e) > 254 || at < 1 || at == len(e)-1 || strings.ContainsAny(e, "\r\n<>,;\"") {
			t.Fatalf("Normalize(%q) accepted %q", s, e)
		}
		q := core.AccountPatch{Email: &e}
		if err := q.Normalize(); err != nil || *q.Email != e {
			t.Fatalf("Normalize(%q) again = %q, %v", e, *q.Email, err)
		}
	})
}

// FuzzAddrKey: the key of an address is canonical (keying it again
// changes nothing), an IPv4 address (mapped or not) is itself, and every
// IPv6 address of one /64 shares one key.
func FuzzAddrKey(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "2001:db8::1%eth0", " 10.0.0.1 ", "fe80::1",
		"2001:db8:0:0:ffff:ffff:ffff:ffff", "1.2.3", "", "10.0.0.1:80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, ok := core.AddrKey(s)
		if !ok {
			if _, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				t.Fatalf("AddrKey(%q) refused an address", s)
			}
			return
		}
		a := netip.MustParseAddr(strings.TrimSpace(s)).Unmap().WithZone("")
		if a.Is4() {
			if key != a.String() {
				t.Fatalf("AddrKey(%q) = %q; want %q", s, key, a)
			}
			return
		}
		p, err := netip.ParsePrefix(key)
		if err != nil || p.Bits() != 64 || !p.Contains(a) || p != p.Masked() {
			t.Fatalf("AddrKey(%q) = %q; want the address's /64", s, key)
		}
		// the last address of the /64 has the same key
		last := a.As16()
		for i := 8; i < 16; i++ {
			last[i] = 0xff
		}
		if k2, _ := core.AddrKey(netip.AddrFrom16(last).String()); k2 != key {
			t.Fatalf("AddrKey(%q) = %q but %v in its /64 = %q", s, key, netip.AddrFrom16(last), k2)
		}
	})
}

// FuzzValidUUID: what it accepts is exactly the 8-4-4-4-12 hex form.
func FuzzValidUUID(f *testing.F) {
	for _, s := range []string{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000",
		"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g", "", "{123e4567-e89b-12d3-a456-426614174000}"} {
		f.Add(s)
	}
	uuid := regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := core.ValidUUID(s), uuid.MatchString(s); got != want {
			t.Fatalf("ValidUUID(%q) = %v; want %v", s, got, want)
		}
	})
}
