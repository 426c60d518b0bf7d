package http_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// smsSink records the text messages the core sends.
type smsSink struct {
	mu   sync.Mutex
	msgs map[string][]string
	fail bool
}

func (s *smsSink) Send(_ context.Context, to, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("sms gateway down")
	}
	if s.msgs == nil {
		s.msgs = map[string][]string{}
	}
	s.msgs[to] = append(s.msgs[to], text)
	return nil
}

var codeRe = regexp.MustCompile(`\b[0-9]{6}\b`)

// code returns the code of the newest SMS to phone.
func (s *smsSink) code(t *testing.T, phone string) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.msgs[phone]
	if len(m) == 0 {
		t.Fatalf("no SMS to %s", phone)
	}
	codes := codeRe.FindAllString(m[len(m)-1], -1)
	if len(codes) != 1 {
		t.Fatalf("SMS %q has %d six-digit runs; want exactly the code", m[len(m)-1], len(codes))
	}
	return codes[0]
}

func (s *smsSink) count(phone string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs[phone])
}

// withAccounts wires the core's own tokens and sign-in, with limits l.
func withAccounts(l core.SignInLimits) func(*fixture, *corehttp.Server) {
	return func(f *fixture, s *corehttp.Server) {
		priv, err := admission.GenerateKey()
		if err != nil {
			panic(err)
		}
		f.keys, f.sms = token.New(priv), &smsSink{}
		s.Tokens = f.keys
		s.Accounts = &corehttp.Accounts{Store: f.db, SMS: f.sms, Limits: l}
	}
}

// addr sets the gateway's client address header.
func addr(a string) []string { return []string{corehttp.ClientAddrHeader, a} }

// signIn runs code and verify for phone and returns the account token and id.
func (f *fixture) signIn(t *testing.T, phone string) (string, int64) {
	t.Helper()
	if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.0.0.1")...); r.status != http.StatusAccepted {
		t.Fatalf("code for %s = %d %v", phone, r.status, r.body)
	}
	norm, _ := core.NormalizePhone(phone)
	r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": phone, "code": f.sms.code(t, norm)}, addr("10.0.0.1")...)
	if r.status != http.StatusOK {
		t.Fatalf("verify %s = %d %v", phone, r.status, r.body)
	}
	acct := r.body["account"].(map[string]any)
	return r.body["token"].(string), int64(acct["id"].(float64))
}

// ageCodes moves the phone's code back in time, past the resend wait.
func (f *fixture) ageCodes(t *testing.T, phone string, by time.Duration) {
	t.Helper()
	if _, err := f.db.Pool().Exec(ctx, `UPDATE signin_codes SET created_at = created_at - make_interval(secs => $2) WHERE phone = $1`,
		phone, by.Seconds()); err != nil {
		t.Fatal(err)
	}
}

func TestSignIn(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}))

	// The answer to a code request is the same for a new number and for one
	// with an account.
	first := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "98123 45678"}, addr("10.0.0.1")...)
	if first.status != http.StatusAccepted || first.body["sent"] != true || first.body["expires_in_seconds"] != 300.0 ||
		first.body["resend_after_seconds"] != 30.0 {
		t.Fatalf("code = %d %v", first.status, first.body)
	}
	code := f.sms.code(t, "+919812345678")
	if msg := f.sms.msgs["+919812345678"][0]; msg != "onsale: your sign-in code is "+code+". It expires in 5 minutes. Never share it." {
		t.Errorf("SMS = %q", msg)
	}
	r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": "+919812345678", "code": code}, addr("10.0.0.1")...)
	if r.status != http.StatusOK {
		t.Fatalf("verify = %d %v", r.status, r.body)
	}
	tok := r.body["token"].(string)
	acct := r.body["account"].(map[string]any)
	if acct["phone"] != "+919812345678" || acct["email"] != "" || r.body["expires_at"] == nil {
		t.Errorf("verify body = %v", r.body)
	}
	// The token verifies with the published key, as the gateway does.
	jwks := f.do(t, "GET", "/.well-known/jwks.json", "", nil)
	keys := jwks.body["keys"].([]any)
	if jwks.status != 200 || len(keys) != 1 {
		t.Fatalf("jwks = %d %v", jwks.status, jwks.body)
	}
	c, err := account.NewVerifier(map[string]ed25519.PublicKey{admission.KeyID(f.keys.PublicKey()): f.keys.PublicKey()}).Verify(tok)
	if err != nil || !c.PhoneVerified || c.Identity() != "acct:"+jsonString(acct["id"]) {
		t.Fatalf("account token: %+v, %v", c, err)
	}

	f.ageCodes(t, "+919812345678", time.Minute)
	again := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919812345678"}, addr("10.0.0.1")...)
	if again.status != first.status || jsonString(again.body) != jsonString(first.body) {
		t.Errorf("code for a number with an account = %d %v; want the same answer as for a new one, %d %v",
			again.status, again.body, first.status, first.body)
	}
	r = f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": "+919812345678", "code": f.sms.code(t, "+919812345678")}, addr("10.0.0.1")...)
	if r.status != 200 || jsonString(r.body["account"].(map[string]any)["id"]) != jsonString(acct["id"]) {
		t.Fatalf("second sign-in = %d %v; want the same account", r.status, r.body)
	}

	// /v1/me: read, add an email, remove it.
	if r := f.do(t, "GET", "/v1/me", tok, nil); r.status != 200 || r.body["phone"] != "+919812345678" {
		t.Fatalf("GET /v1/me = %d %v", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/v1/me", tok, map[string]string{"email": " fan@example.in "}); r.status != 200 || r.body["email"] != "fan@example.in" {
		t.Fatalf("PATCH /v1/me = %d %v", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/me", tok, nil); r.body["email"] != "fan@example.in" {
		t.Fatalf("email not kept: %v", r.body)
	}
	for _, blank := range []string{"   ", "\t", ""} {
		if r := f.do(t, "PATCH", "/v1/me", tok, map[string]string{"email": blank}); r.status != 200 || r.body["email"] != "" {
			t.Fatalf("PATCH /v1/me email %q = %d %v; want 200 and no email", blank, r.status, r.body)
		}
		f.do(t, "PATCH", "/v1/me", tok, map[string]string{"email": "fan@example.in"})
	}
	if r := f.do(t, "GET", "/v1/me/bookings", tok, nil); r.status != 200 || len(r.body["bookings"].([]any)) != 0 {
		t.Fatalf("GET /v1/me/bookings = %d %v", r.status, r.body)
	}
	resp, err := http.Get(f.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`onsale_core_signins_total{outcome="sent",step="code"} 2`, `onsale_core_signins_total{outcome="verified",step="verify"} 2`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestSignInBadInput(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}))
	admitTok := f.token(t, "vis:x", f.event)
	acctTok, _ := f.signIn(t, "+919800000001")

	expired := "+919800000002"
	f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": expired}, addr("10.0.0.2")...)
	expiredCode := f.sms.code(t, expired)
	if _, err := f.db.Pool().Exec(ctx, `UPDATE signin_codes SET expires_at = now() - interval '1 s' WHERE phone = $1`, expired); err != nil {
		t.Fatal(err)
	}
	used := "+919800000001" // signed in above: its code is used
	usedCode := f.sms.code(t, used)

	wrong := "+919800000003"
	f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": wrong}, addr("10.0.0.2")...)
	wrongCode := f.sms.code(t, wrong)
	otherCode := "000000"
	if wrongCode == otherCode {
		otherCode = "000001"
	}

	for _, tc := range []struct {
		name, method, path, token string
		body                      any
		status                    int
		code                      string
	}{
		{"code: malformed JSON", "POST", "/v1/auth/code", "", `{"phone":`, 400, core.EInvalid},
		{"code: empty body", "POST", "/v1/auth/code", "", ``, 400, core.EInvalid},
		{"code: unknown field", "POST", "/v1/auth/code", "", `{"phone":"+919812345678","name":"x"}`, 400, core.EInvalid},
		{"code: phone a number", "POST", "/v1/auth/code", "", `{"phone":9812345678}`, 400, core.EInvalid},
		{"code: no phone", "POST", "/v1/auth/code", "", `{}`, 400, core.EInvalid},
		{"code: letters", "POST", "/v1/auth/code", "", `{"phone":"+91abc45678"}`, 400, core.EInvalid},
		{"code: too short", "POST", "/v1/auth/code", "", `{"phone":"+9112345"}`, 400, core.EInvalid},
		{"code: too long", "POST", "/v1/auth/code", "", `{"phone":"+9112345678901234"}`, 400, core.EInvalid},
		{"code: bare 10 digits not a mobile", "POST", "/v1/auth/code", "", `{"phone":"0812345678"}`, 400, core.EInvalid},
		{"code: plus inside", "POST", "/v1/auth/code", "", `{"phone":"91+9812345678"}`, 400, core.EInvalid},
		{"verify: malformed JSON", "POST", "/v1/auth/verify", "", `{"phone":"+919800000003","code":`, 400, core.EInvalid},
		{"verify: bad phone", "POST", "/v1/auth/verify", "", map[string]string{"phone": "12", "code": wrongCode}, 400, core.EInvalid},
		{"verify: code not six digits", "POST", "/v1/auth/verify", "", map[string]string{"phone": wrong, "code": "12345"}, 400, core.EInvalid},
		{"verify: code with letters", "POST", "/v1/auth/verify", "", map[string]string{"phone": wrong, "code": "12a456"}, 400, core.EInvalid},
		{"verify: wrong code", "POST", "/v1/auth/verify", "", map[string]string{"phone": wrong, "code": otherCode}, 401, core.ECodeInvalid},
		{"verify: no code sent", "POST", "/v1/auth/verify", "", map[string]string{"phone": "+919800000009", "code": "123456"}, 401, core.ECodeInvalid},
		{"verify: expired code", "POST", "/v1/auth/verify", "", map[string]string{"phone": expired, "code": expiredCode}, 401, core.ECodeInvalid},
		{"verify: used code", "POST", "/v1/auth/verify", "", map[string]string{"phone": used, "code": usedCode}, 401, core.ECodeInvalid},
		{"me: no token", "GET", "/v1/me", "", nil, 401, core.EUnauthorized},
		{"me: garbage token", "GET", "/v1/me", "not.a.token", nil, 401, core.EUnauthorized},
		{"me: admit token", "GET", "/v1/me", admitTok, nil, 403, core.EForbidden},
		{"me: bad email", "PATCH", "/v1/me", acctTok, map[string]string{"email": "not an address"}, 400, core.EInvalid},
		{"me: no at", "PATCH", "/v1/me", acctTok, map[string]string{"email": "fan.example.in"}, 400, core.EInvalid},
		{"me: unknown field", "PATCH", "/v1/me", acctTok, map[string]string{"phone": "+919812345678"}, 400, core.EInvalid},
		{"me: nothing to change", "PATCH", "/v1/me", acctTok, `{}`, 400, core.EInvalid},
		{"me: malformed JSON", "PATCH", "/v1/me", acctTok, `{"email":`, 400, core.EInvalid},
		{"me/bookings: admit token", "GET", "/v1/me/bookings", admitTok, nil, 403, core.EForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, tc.method, tc.path, tc.token, tc.body, addr("10.0.0.3")...)
			if r.status != tc.status || r.body["error"] != tc.code || r.body["message"] == "" {
				t.Errorf("%s %s = %d %v; want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.code)
			}
		})
	}
	// None of it changed anything: the wrong code's attempt is counted, and
	// the right code still signs in (one attempt of five used).
	if r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": wrong, "code": wrongCode}, addr("10.0.0.3")...); r.status != 200 {
		t.Errorf("the right code after one wrong one = %d %v; want 200", r.status, r.body)
	}
	if r := f.do(t, "GET", "/v1/me", acctTok, nil); r.body["email"] != "" {
		t.Errorf("a refused PATCH changed the account: %v", r.body)
	}
}

// Wrong codes kill a code for the address that guessed, not for its
// owner: after CodeWrongPerAddr wrong ones from an address the right code
// is refused from there (with a wrong one's answer) and still signs in
// from another; after CodeAttempts wrong ones in all it is dead.
func TestCodeAttempts(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}))
	send := func(t *testing.T, phone string) (code, wrong string) {
		t.Helper()
		f.ageCodes(t, phone, time.Minute)
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.0.0.1")...); r.status != 202 {
			t.Fatalf("code = %d %v", r.status, r.body)
		}
		code, wrong = f.sms.code(t, phone), "111111"
		if code == wrong {
			wrong = "222222"
		}
		return code, wrong
	}
	verify := func(phone, code, from string) response {
		return f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": phone, "code": code}, addr(from)...)
	}
	guess := func(t *testing.T, phone, wrong, from string) {
		t.Helper()
		for i := range core.CodeWrongPerAddr {
			if r := verify(phone, wrong, from); r.status != 401 || r.body["error"] != core.ECodeInvalid {
				t.Fatalf("wrong code %d from %s = %d %v", i+1, from, r.status, r.body)
			}
		}
	}
	t.Run("per address", func(t *testing.T) {
		phone := "+919800000010"
		code, wrong := send(t, phone)
		guess(t, phone, wrong, "198.51.100.7")
		if r := verify(phone, code, "198.51.100.7"); r.status != 401 || r.body["error"] != core.ECodeInvalid {
			t.Fatalf("the right code from the guessing address = %d %v; want 401 code_invalid", r.status, r.body)
		}
		if r := verify(phone, code, "10.0.0.1"); r.status != 200 {
			t.Fatalf("the owner's right code = %d %v; want 200", r.status, r.body)
		}
	})
	t.Run("in all", func(t *testing.T) {
		phone := "+919800000011"
		code, wrong := send(t, phone)
		for i := range core.CodeAttempts / core.CodeWrongPerAddr {
			guess(t, phone, wrong, "198.51.100."+strconv.Itoa(i))
		}
		if r := verify(phone, code, "10.0.0.1"); r.status != 401 || r.body["error"] != core.ECodeInvalid {
			t.Fatalf("the right code after %d wrong ones = %d %v; want 401 code_invalid", core.CodeAttempts, r.status, r.body)
		}
		// A new code starts afresh.
		code, _ = send(t, phone)
		if r := verify(phone, code, "10.0.0.1"); r.status != 200 {
			t.Fatalf("a new code = %d %v", r.status, r.body)
		}
	})
}

// The limits per phone and per address answer 429 rate_limited with
// Retry-After, and a refused request changes nothing (no SMS, the live code
// stays).
func TestSignInLimits(t *testing.T) {
	l := core.SignInLimits{SendsPerPhone: 3, SendsPerAddr: 4, VerifiesPerAddr: 3}
	limited := func(t *testing.T, r response, what string) {
		t.Helper()
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != http.StatusTooManyRequests || r.body["error"] != core.ERateLimited || ra < 1 || ra > 3600 {
			t.Fatalf("%s = %d %v (Retry-After %q); want 429 rate_limited with Retry-After", what, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	t.Run("resend too soon", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(l))
		phone := "+919800000020"
		f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.1.0.1")...)
		r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.1.0.2")...)
		limited(t, r, "a second code within 30 s")
		if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra > 30 {
			t.Errorf("Retry-After %d; want at most 30", ra)
		}
		if n := f.sms.count(phone); n != 1 {
			t.Errorf("%d SMS; want 1", n)
		}
	})
	t.Run("sends per phone", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(l))
		phone := "+919800000021"
		for i := range l.SendsPerPhone {
			if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.2.0."+strconv.Itoa(i))...); r.status != 202 {
				t.Fatalf("send %d = %d %v", i+1, r.status, r.body)
			}
			f.ageCodes(t, phone, time.Minute)
		}
		code := f.sms.code(t, phone)
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.2.1.1")...), "a send past the phone's limit")
		if n := f.sms.count(phone); n != l.SendsPerPhone {
			t.Errorf("%d SMS; want %d", n, l.SendsPerPhone)
		}
		if r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": phone, "code": code}, addr("10.2.1.1")...); r.status != 200 {
			t.Errorf("the live code after a refused send = %d %v; want 200", r.status, r.body)
		}
	})
	t.Run("sends per address", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(l))
		for i := range l.SendsPerAddr {
			if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+91980000010" + strconv.Itoa(i)}, addr("10.3.0.1")...); r.status != 202 {
				t.Fatalf("send %d = %d %v", i+1, r.status, r.body)
			}
		}
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000199"}, addr("10.3.0.1")...), "a send past the address's limit")
		if n := f.sms.count("+919800000199"); n != 0 {
			t.Errorf("a refused send sent %d SMS", n)
		}
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000199"}, addr("10.3.0.2")...); r.status != 202 {
			t.Errorf("another address = %d %v; want 202", r.status, r.body)
		}
	})
	t.Run("verifies per address", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(l))
		phone := "+919800000030"
		f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr("10.4.0.1")...)
		code := f.sms.code(t, phone)
		for i := range l.VerifiesPerAddr {
			r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": "+91980000004" + strconv.Itoa(i), "code": "123456"}, addr("10.4.0.9")...)
			if r.status != 401 {
				t.Fatalf("verify %d = %d %v", i+1, r.status, r.body)
			}
		}
		limited(t, f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": phone, "code": code}, addr("10.4.0.9")...), "a verify past the address's limit")
		// The refused verify used nothing: the code still works elsewhere.
		if r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": phone, "code": code}, addr("10.4.0.10")...); r.status != 200 {
			t.Errorf("the code from another address = %d %v; want 200", r.status, r.body)
		}
	})
	t.Run("sends per phone from one address", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(core.SignInLimits{SendsPerPhone: 3, SendsPerPhoneAddr: 2}))
		phone := "+919800000022"
		for i, from := range []string{"198.51.100.1", "198.51.100.1", "198.51.100.1", "10.2.0.1", "10.2.0.2"} {
			r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": phone}, addr(from)...)
			f.ageCodes(t, phone, time.Minute)
			switch i {
			case 2:
				limited(t, r, "a third code to one number from one address")
			case 4:
				limited(t, r, "a send past the number's total")
			default:
				if r.status != 202 {
					t.Fatalf("send %d from %s = %d %v", i+1, from, r.status, r.body)
				}
			}
		}
	})
	t.Run("IPv6 by /64", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(core.SignInLimits{SendsPerAddr: 1}))
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000060"}, addr("2001:db8:1:2::1")...); r.status != 202 {
			t.Fatalf("first from a /64 = %d %v", r.status, r.body)
		}
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000061"}, addr("2001:db8:1:2:aaaa::9")...),
			"another address in the same /64")
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000061"}, addr("2001:db8:1:3::1")...); r.status != 202 {
			t.Fatalf("another /64 = %d %v", r.status, r.body)
		}
	})
	t.Run("the gateway's address, else the peer", func(t *testing.T) {
		f := newFixture(t, "", withAccounts(core.SignInLimits{SendsPerAddr: 1}))
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000050"}); r.status != 202 {
			t.Fatalf("first from the peer = %d", r.status)
		}
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000051"}), "second from the peer")
		if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000051"}, addr("10.5.0.1")...); r.status != 202 {
			t.Fatalf("from a gateway-reported address = %d", r.status)
		}
		// A header that is not an address counts as the peer, not as a
		// fresh key per value.
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000052"}, addr("not-an-address-1")...), "an unparsable header")
		limited(t, f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000052"}, addr("10.5.0.1:1234")...), "an address with a port")
	})
}

// Without an SMS gateway sign-in is refused (503), unless the development
// flag logs the codes; a failed send is a 503 too.
func TestSignInWithoutSMS(t *testing.T) {
	f := newFixture(t, "", withAccounts(core.SignInLimits{}), func(f *fixture, s *corehttp.Server) { s.Accounts.SMS = nil })
	if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000060"}); r.status != 503 || r.body["error"] != core.EUnavailable {
		t.Fatalf("no SMS gateway = %d %v; want 503", r.status, r.body)
	}
	// A failed send leaves no live code and uses up neither the resend
	// wait nor the phone's sends: the fan presses resend and gets a code.
	f = newFixture(t, "", withAccounts(core.SignInLimits{SendsPerPhone: 1}), func(f *fixture, s *corehttp.Server) { f.sms.fail = true })
	r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000060"})
	if msg, _ := r.body["message"].(string); r.status != 503 || r.body["error"] != core.EUnavailable || !strings.Contains(msg, "resend") {
		t.Fatalf("SMS gateway down = %d %v; want 503 saying press resend", r.status, r.body)
	}
	var live int
	if err := f.db.Pool().QueryRow(ctx, `SELECT count(*) FROM signin_codes WHERE expires_at > now()`).Scan(&live); err != nil || live != 0 {
		t.Fatalf("%d live codes after a failed send (%v); want 0", live, err)
	}
	f.sms.mu.Lock()
	f.sms.fail = false
	f.sms.mu.Unlock()
	if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000060"}); r.status != 202 {
		t.Fatalf("resend after a failed send = %d %v; want 202", r.status, r.body)
	}
	if r := f.do(t, "POST", "/v1/auth/verify", "", map[string]string{"phone": "+919800000060", "code": f.sms.code(t, "+919800000060")}); r.status != 200 {
		t.Fatalf("the resent code = %d %v", r.status, r.body)
	}
	f = newFixture(t, "", withAccounts(core.SignInLimits{}), func(f *fixture, s *corehttp.Server) { s.Accounts.SMS, s.Accounts.LogCodes = nil, true })
	if r := f.do(t, "POST", "/v1/auth/code", "", map[string]string{"phone": "+919800000060"}); r.status != 202 {
		t.Fatalf("development flag = %d %v; want 202", r.status, r.body)
	}
}
