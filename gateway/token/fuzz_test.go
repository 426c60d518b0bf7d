package token

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzSecret is a fixed queue secret, so a finding replays identically.
var fuzzSecret = []byte("onsale queue token fuzz secret 0123456789")

// FuzzQueueVerify feeds the queue-token check (what every status poll
// runs on the fan's cookie or header) any string. A refusal is ErrInvalid
// or ErrExpired; an accepted token is for the event asked, names an
// identity and a place that is not negative. Where the fast path
// (fast.go) decides, the JWT library decides the same, with the same
// claims.
func FuzzQueueVerify(f *testing.F) {
	s, err := NewQueueSigner(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := s.Sign(42, "vis:AAAAAAAAAAAAAAAAAAAAAA", 17, 0, "ep1")
	other, _ := NewQueueSigner([]byte(strings.Repeat("x", 32)))
	forged, _ := other.Sign(42, "vis:AAAAAAAAAAAAAAAAAAAAAA", 1, 0, "ep1")
	for _, tok := range []string{good, forged, good + "x", strings.ToLower(good), "", "a.b.c",
		"eyJhbGciOiJub25lIn0.eyJldnQiOjQyfQ.", good[:len(good)/2]} {
		f.Add(tok, int64(42))
	}
	f.Add(good, int64(43))
	f.Fuzz(func(t *testing.T, tok string, event int64) {
		if fq, ferr := s.verifyFast(tok, time.Now()); !errors.Is(ferr, errNotFast) {
			lq, lerr := s.verifyJWT(tok)
			if (ferr == nil) != (lerr == nil) || errors.Is(ferr, ErrExpired) != errors.Is(lerr, ErrExpired) ||
				ferr == nil && !sameClaims(fq, lq) {
				t.Fatalf("%q: the fast path says %+v, %v; the library %+v, %v", tok, fq, ferr, lq, lerr)
			}
		}
		q, err := s.Verify(tok, event)
		if err != nil {
			if q != nil || !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrExpired) {
				t.Fatalf("Verify(%q) = %+v, %v; want ErrInvalid or ErrExpired", tok, q, err)
			}
			return
		}
		if q.Event != event || q.Subject == "" || q.Position < 0 || q.Issuer != "onsale-gateway" {
			t.Fatalf("Verify(%q, %d) accepted %+v", tok, event, q)
		}
	})
}

// FuzzQueueSign is the round trip and the tamper check: a token the
// gateway signs reads back with the same event, identity, place, session
// end and epoch (the claims the JWT library reads too), and for no other
// event; a token with one byte changed is
// refused, or (base64's unused bits) reads back as the very same place.
func FuzzQueueSign(f *testing.F) {
	f.Add(int64(42), "vis:AAAAAAAAAAAAAAAAAAAAAA", int64(17), int64(0), "ep1", uint(5), byte('x'))
	f.Add(int64(1), "acct:9", int64(0), int64(1_767_225_600_000), "", uint(200), byte('A'))
	f.Add(int64(-1), "", int64(-1), int64(-1), "\u2028", uint(0), byte('.'))
	s, err := NewQueueSigner(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, event int64, identity string, pos, adm int64, epoch string, i uint, b byte) {
		if !utf8.ValidString(identity) || !utf8.ValidString(epoch) {
			return // JSON carries valid UTF-8 only; identities and epochs are ASCII
		}
		tok, err := s.Sign(event, identity, pos, adm, epoch)
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.Verify(tok, event)
		valid := identity != "" && pos >= 0
		switch {
		case valid && err != nil:
			t.Fatalf("Verify(Sign(%d, %q, %d)) = %v", event, identity, pos, err)
		case !valid && err == nil:
			t.Fatalf("Verify(Sign(%d, %q, %d)) accepted %+v", event, identity, pos, q)
		case !valid:
			return
		case q.Event != event || q.Subject != identity || q.Position != pos || q.Admitted != adm || q.Epoch != epoch:
			t.Fatalf("Verify(Sign(%d, %q, %d, %d, %q)) = %+v", event, identity, pos, adm, epoch, q)
		}
		if lq, err := s.verifyJWT(tok); err != nil || !sameClaims(q, lq) {
			t.Fatalf("Verify(Sign(%d, %q, %d, %d, %q)) = %+v; the library reads %+v, %v", event, identity, pos, adm, epoch, q, lq, err)
		}
		if _, err := s.Verify(tok, event+1); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Verify(token of %d, %d) = %v; want ErrInvalid", event, event+1, err)
		}
		bs := []byte(tok)
		bs[i%uint(len(bs))] = b
		if t2, err := s.Verify(string(bs), event); err == nil &&
			(t2.Subject != identity || t2.Position != pos || t2.Admitted != adm || t2.Epoch != epoch || t2.ID != q.ID) {
			t.Fatalf("tampered token %q verified as %+v", bs, t2)
		}
	})
}

// FuzzVisitor feeds the visitor cookie check any value: a cookie is
// accepted only with the MAC of its own id under the gateway's secret, and
// every cookie the gateway mints is accepted with its id.
func FuzzVisitor(f *testing.F) {
	s, err := NewQueueSigner(fuzzSecret)
	if err != nil {
		f.Fatal(err)
	}
	_, cookie := s.NewVisitor()
	f.Add(cookie)
	f.Add(cookie + "x")
	f.Add(strings.Replace(cookie, ".", "..", 1))
	f.Add("." + cookie)
	f.Add("")
	f.Add("AAAAAAAAAAAAAAAAAAAAAA.")
	f.Fuzz(func(t *testing.T, c string) {
		id, ok := s.Visitor(c)
		if ok && (c != id+"."+s.visitorMAC(id) || len(id) != visitorIDLen) {
			t.Fatalf("Visitor(%q) accepted id %q", c, id)
		}
		if !ok && id != "" {
			t.Fatalf("Visitor(%q) = %q with false", c, id)
		}
		id2, c2 := s.NewVisitor()
		if got, ok := s.Visitor(c2); !ok || got != id2 {
			t.Fatalf("Visitor(NewVisitor's %q) = %q, %v", c2, got, ok)
		}
	})
}
