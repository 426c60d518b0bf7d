package core_test

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
)

func TestNormalizePhone(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"9812345678", "+919812345678"},
		{"98123 45678", "+919812345678"},
		{"98123-45678", "+919812345678"},
		{" +919812345678 ", "+919812345678"},
		{"+14155550123", "+14155550123"},
		{"+4930123456", "+4930123456"},
		{"+12345678", "+12345678"},
		{"+123456789012345", "+123456789012345"},
		{"", ""},
		{"5812345678", ""},        // not an Indian mobile (starts 6-9)
		{"919812345678", ""},      // country code without +
		{"+1234567", ""},          // 7 digits
		{"+1234567890123456", ""}, // 16 digits
		{"+0812345678", ""},       // no country code starts with 0
		{"++919812345678", ""},
		{"+91 98123 4567a", ""},
		{"+91(981)2345678", ""},
		{"98123456789", ""},
	} {
		got, err := core.NormalizePhone(tc.in)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("NormalizePhone(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if err != nil && core.ErrorCode(err) != core.EInvalid {
			t.Errorf("NormalizePhone(%q) error %v; want %s", tc.in, err, core.EInvalid)
		}
	}
}

func TestCode(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c, err := core.NewCode()
		if err != nil || !core.ValidCodeShape(c) {
			t.Fatalf("NewCode() = %q, %v", c, err)
		}
		seen[c] = true
		sms := core.CodeSMS(c)
		if runs := regexp.MustCompile(`[0-9]{6}`).FindAllString(sms, -1); len(runs) != 1 || runs[0] != c {
			t.Fatalf("CodeSMS(%q) = %q: the code must be its only six-digit run", c, sms)
		}
	}
	if len(seen) < 190 {
		t.Errorf("200 codes, %d distinct", len(seen))
	}
	for _, bad := range []string{"", "12345", "1234567", "12a456", " 12345", "١٢٣٤٥٦"} {
		if core.ValidCodeShape(bad) {
			t.Errorf("ValidCodeShape(%q) = true", bad)
		}
	}
	k := []byte("k")
	if bytes.Equal(core.CodeHash(k, "+919812345678", "123456"), core.CodeHash(k, "+919812345679", "123456")) ||
		bytes.Equal(core.CodeHash(k, "+919812345678", "123456"), core.CodeHash([]byte("other"), "+919812345678", "123456")) {
		t.Error("a code's hash must depend on the phone and the key")
	}
}

func TestSignInLimitsDefaults(t *testing.T) {
	if got := (core.SignInLimits{SendsPerAddr: 7}).WithDefaults(); got != (core.SignInLimits{SendsPerPhone: 10, SendsPerPhoneAddr: 3, SendsPerAddr: 7, VerifiesPerAddr: 60}) {
		t.Errorf("WithDefaults = %+v", got)
	}
}

// Per-address limits key IPv4 by address and IPv6 by /64, so a client
// rotating addresses within its prefix is one client.
func TestAddrKey(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"203.0.113.7", "203.0.113.7", true},
		{" 203.0.113.7 ", "203.0.113.7", true},
		{"::ffff:203.0.113.7", "203.0.113.7", true},
		{"2001:db8:1:2::1", "2001:db8:1:2::/64", true},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64", true},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64", true},
		{"fe80::1%eth0", "fe80::/64", true},
		{"::1", "::/64", true},
		{"", "", false},
		{"junk", "", false},
		{"203.0.113.7:443", "", false},
		{"[2001:db8::1]", "", false},
		{"2001:db8::/64", "", false},
	} {
		got, ok := core.AddrKey(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("AddrKey(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// An email is trimmed whatever it is: blanks remove it, like "".
func TestAccountPatchNormalize(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"a@b.in", "a@b.in", true},
		{"  a@b.in\t", "a@b.in", true},
		{"", "", true},
		{"   ", "", true},
		{"\t\n", "", true},
		{"not an address", "", false},
	} {
		in := c.in
		p := core.AccountPatch{Email: &in}
		err := p.Normalize()
		if (err == nil) != c.ok || (c.ok && *p.Email != c.want) {
			t.Errorf("Normalize(%q) = %q, %v; want %q, ok %v", c.in, *p.Email, err, c.want, c.ok)
		}
	}
	var none core.AccountPatch
	if err := none.Normalize(); err != nil || none.Email != nil {
		t.Errorf("an empty patch = %v, %v", none.Email, err)
	}
}

// The wait after a per-address refusal is when the estimate first drops
// below the limit again.
func TestAddrLimitWait(t *testing.T) {
	const h = time.Hour
	for _, c := range []struct {
		name             string
		limit, cur, prev int
		elapsed, want    time.Duration
	}{
		{"full hour, no history: the next bucket", 20, 20, 0, 15 * time.Minute, 45*time.Minute + time.Second},
		{"full hour carried: the next bucket opens at once", 20, 20, 20, 59 * time.Minute, time.Minute + time.Second},
		{"half full, 40 carried: until 10 of them are left (3/4 in)", 20, 10, 40, 0, 45*time.Minute + time.Second},
		{"half full, 40 carried, a minute before that", 20, 10, 40, 44 * time.Minute, time.Minute + time.Second},
		{"half full, 40 carried, past that: at least a second", 20, 10, 40, 46 * time.Minute, time.Second},
		{"limit lowered below this hour's count", 10, 20, 0, 30 * time.Minute, h + time.Second},
	} {
		if got := core.AddrLimitWait(c.limit, c.cur, c.prev, c.elapsed, h); got != c.want {
			t.Errorf("%s: AddrLimitWait(%d, %d, %d, %v) = %v; want %v", c.name, c.limit, c.cur, c.prev, c.elapsed, got, c.want)
		}
	}
}

// The principal rules, one row per (principal, action, target).
func TestPrincipalRules(t *testing.T) {
	admit := &core.Principal{Kind: core.PrincipalAdmit, Identity: "vis:a", EventID: 1}
	acct := &core.Principal{Kind: core.PrincipalAccount, Identity: "acct:7", AccountID: "7"}
	grant := &core.Principal{Kind: core.PrincipalHoldGrant, Identity: "vis:a", HoldID: "H", EventID: 1}
	link := &core.Principal{Kind: core.PrincipalTicketLink, Identity: "vis:a", Booking: 9}

	hold := func(id, owner string, ev int64) *core.Hold { return &core.Hold{ID: id, Account: owner, EventID: ev} }
	booking := func(id int64, hold, owner string, ev int64) *core.Booking {
		return &core.Booking{ID: id, HoldID: hold, Account: owner, EventID: ev}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // "" allowed
	}{
		{"admit creates on its event", admit.MayCreateHold(1), ""},
		{"admit creates on another event", admit.MayCreateHold(2), core.EWrongEvent},
		{"account creates", acct.MayCreateHold(1), core.EForbidden},
		{"grant creates", grant.MayCreateHold(1), core.EForbidden},
		{"link creates", link.MayCreateHold(1), core.EForbidden},

		{"admit reads own hold", admit.MayReadHold(hold("H", "vis:a", 1)), ""},
		{"admit reads own hold of another event", admit.MayReadHold(hold("H", "vis:a", 2)), core.EWrongEvent},
		{"admit reads another's hold", admit.MayReadHold(hold("H", "vis:b", 1)), core.EForbidden},
		{"account reads own hold of any event", acct.MayReadHold(hold("H", "acct:7", 5)), ""},
		{"account reads another's hold", acct.MayReadHold(hold("H", "acct:8", 5)), core.EForbidden},
		{"grant reads its hold", grant.MayReadHold(hold("H", "vis:a", 1)), ""},
		{"grant reads another hold of its owner", grant.MayReadHold(hold("H2", "vis:a", 1)), core.EForbidden},
		{"link reads a hold", link.MayReadHold(hold("H", "vis:a", 1)), core.EForbidden},

		{"admit reads own booking", admit.MayReadBooking(booking(9, "H", "vis:a", 1)), ""},
		{"admit reads own booking of another event", admit.MayReadBooking(booking(9, "H", "vis:a", 2)), core.EForbidden},
		{"account reads own booking", acct.MayReadBooking(booking(9, "H", "acct:7", 3)), ""},
		{"account reads another's booking", acct.MayReadBooking(booking(9, "H", "acct:8", 3)), core.EForbidden},
		{"grant reads its hold's booking", grant.MayReadBooking(booking(9, "H", "vis:a", 1)), ""},
		{"grant reads another hold's booking", grant.MayReadBooking(booking(10, "H2", "vis:a", 1)), core.EForbidden},
		{"link reads its booking", link.MayReadBooking(booking(9, "H", "vis:a", 1)), ""},
		{"link reads another booking", link.MayReadBooking(booking(10, "H", "vis:a", 1)), core.EForbidden},

		{"account uses /v1/me", acct.MayUseAccount(), ""},
		{"admit uses /v1/me", admit.MayUseAccount(), core.EForbidden},
		{"grant uses /v1/me", grant.MayUseAccount(), core.EForbidden},
	} {
		got := ""
		if tc.err != nil {
			got = core.ErrorCode(tc.err)
		}
		if got != tc.want {
			t.Errorf("%s: %v; want %q", tc.name, tc.err, tc.want)
		}
	}

	for _, tc := range []struct {
		name  string
		p     *core.Principal
		hold  string
		want  core.HoldRef
		error string
	}{
		{"admit", admit, "H", core.HoldRef{ID: "H", Account: "vis:a", EventID: 1, Version: 3}, ""},
		{"account", acct, "H", core.HoldRef{ID: "H", Account: "acct:7", Version: 3}, ""},
		{"grant, its hold", grant, "H", core.HoldRef{ID: "H", Account: "vis:a", EventID: 1, Version: 3}, ""},
		{"grant, another hold", grant, "H2", core.HoldRef{}, core.EForbidden},
		{"link", link, "H", core.HoldRef{}, core.EForbidden},
	} {
		ref, err := tc.p.HoldRef(tc.hold, 3)
		if tc.error != "" {
			if core.ErrorCode(err) != tc.error {
				t.Errorf("%s: HoldRef(%q) error %v; want %s", tc.name, tc.hold, err, tc.error)
			}
			continue
		}
		if err != nil || ref != tc.want {
			t.Errorf("%s: HoldRef(%q) = %+v, %v; want %+v", tc.name, tc.hold, ref, err, tc.want)
		}
	}
}
