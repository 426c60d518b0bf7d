package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"math"
	"math/big"
	"net/netip"
	"strings"
	"time"
)

// This file holds every rule of signing in: a fan proves a phone number
// with a one-time code sent by SMS, and the core signs an account token for
// the account of that number (created at the first verify). The store
// (core/postgres) enforces the counting rules exactly, across cores; the
// HTTP layer (core/http/auth.go) only reads requests and writes answers.

// Account is a fan's account: one per verified phone number.
type Account struct {
	ID        int64     `json:"id"`
	Phone     string    `json:"phone"`
	Email     string    `json:"email"`
	CreatedAt time.Time `json:"created_at"`
}

// The code rules.
const (
	// CodeDigits is the length of a sign-in code: 6 decimal digits from
	// crypto/rand, a one in a million guess.
	CodeDigits = 6
	// CodeTTL is how long a code may be used.
	CodeTTL = 5 * time.Minute
	// CodeWrongPerAddr is how many wrong codes one address may try on a
	// code: after them the code is dead for that address (even the right
	// code is refused from it) but still works for its owner elsewhere.
	CodeWrongPerAddr = 5
	// CodeAttempts is how many wrong codes kill a code outright, from
	// whatever addresses. See "Why codes count per address".
	CodeAttempts = 15
	// ResendAfter is how long a fan waits before another code is sent to
	// the same number (a second send sooner is rate_limited).
	ResendAfter = 30 * time.Second
	// AccountTokenTTL is the default life of an account token.
	AccountTokenTTL = 30 * 24 * time.Hour
	// LimitWindow is the window every sign-in limit counts over.
	LimitWindow = time.Hour
	// SignInRetention is how long codes and limit counters are kept: a
	// counter bucket stops counting one window after it ends, a code's
	// sends one window after it was sent (the purge deletes them).
	SignInRetention = 2 * LimitWindow
)

// SignInLimits are the per-hour limits of signing in (settings; zero
// fields take the defaults). Per-address limits use the client address the
// gateway reports.
type SignInLimits struct {
	SendsPerPhone     int // codes sent to one number, from any addresses
	SendsPerPhoneAddr int // codes sent to one number asked for from one address
	SendsPerAddr      int // codes requested from one address
	VerifiesPerAddr   int // verifies from one address, right or wrong
}

// DefaultSignInLimits are the limits when not configured.
var DefaultSignInLimits = SignInLimits{SendsPerPhone: 10, SendsPerPhoneAddr: 3, SendsPerAddr: 20, VerifiesPerAddr: 60}

// WithDefaults returns l with its zero fields set to the defaults.
func (l SignInLimits) WithDefaults() SignInLimits {
	d := DefaultSignInLimits
	if l.SendsPerPhone > 0 {
		d.SendsPerPhone = l.SendsPerPhone
	}
	if l.SendsPerPhoneAddr > 0 {
		d.SendsPerPhoneAddr = l.SendsPerPhoneAddr
	}
	if l.SendsPerAddr > 0 {
		d.SendsPerAddr = l.SendsPerAddr
	}
	if l.VerifiesPerAddr > 0 {
		d.VerifiesPerAddr = l.VerifiesPerAddr
	}
	return d
}

// How the limits count.
//
// Per phone (SendsPerPhone, SendsPerPhoneAddr, and ResendAfter): exact,
// over a sliding LimitWindow. A phone gets few codes, so the store keeps
// the times of its sends in the window, and the address key each was
// asked from, on the phone's code row, and checks and appends in the one
// statement that stores the code.
//
// Per address (SendsPerAddr, VerifiesPerAddr): a two-bucket sliding
// estimate. Many fans may share one address (a carrier's NAT, a campus), so
// an address is a hot key: the store keeps one counter per address and
// clock hour and counts with one conditional upsert, run first and
// committed on its own, so the counter's row is locked for that one
// statement only; the row is the arbiter, so concurrent requests from one
// address pass exactly up to the limit, across cores. A request the
// address passes but the phone then refuses gives its count back, so for
// an instant it holds a slot it will not use (it errs towards refusing).
// The estimate is
//
//	this hour's count + floor(last hour's count * the part of last hour still in the window)
//
// and a request passes while the estimate is below the limit. Why not fixed
// hourly buckets: they let a full limit through at 10:59 and another at
// 11:00 (2x within seconds). The estimate is never below this hour's count,
// so it refuses whatever a fixed bucket would (no clock hour ever passes
// more than the limit) and also damps the burst at the turn of the hour:
// after a full hour the next one opens gradually. It is an estimate: it
// assumes last hour's requests were spread evenly, so a window of 60
// minutes that straddles the hour can still see up to nearly 2x the limit
// if last hour's requests were all at its very end; it never lets more
// than the limit through per clock hour. Exact sliding counting per
// address (a log counted under a lock) is what made one busy address
// serialise every sign-in behind it.

// Why codes count per address: a targeted lockout. Anyone may ask for a
// code for any number, so if every send and every wrong guess counted
// only per phone, one client could send a victim's phone a code and burn
// it with wrong guesses, over and over, until the phone's sends run out:
// the victim would get only dead codes and rate_limited for the hour of
// the sale. So:
//
//   - one address may have at most SendsPerPhoneAddr codes an hour sent to
//     one number (3), under the number's total SendsPerPhone (10): one
//     address cannot use up a number's sends;
//   - a wrong guess counts against the code for the address it came from:
//     after CodeWrongPerAddr (5) from one address the code is dead for
//     that address only, and the owner, who has the SMS, still signs in
//     with it from their own address; after CodeAttempts (15) wrong
//     guesses in all, from any addresses, the code is dead outright, so
//     guessing stays bounded: at most CodeAttempts guesses per code and
//     SendsPerPhone codes an hour, 150 guesses an hour at one number (1 in
//     6,700), and a single address gets CodeWrongPerAddr per code within
//     VerifiesPerAddr an hour.
//
// What it cannot stop: an attacker with many addresses (a botnet; for
// IPv6, many /64s, see AddrKey) can still use up a number's SendsPerPhone
// sends (SendsPerPhone/SendsPerPhoneAddr addresses), and 3 of them can kill each code outright with 15
// wrong guesses, or replace the live code with a new one every
// ResendAfter (the owner gets each new code by SMS, and the newest one
// works). Stopping that needs a signal the core does not have (a proof of
// work or a CAPTCHA at the gateway, or the carrier's help).

// AddrKey is the key the per-address limits count a client address under:
// an IPv4 address as itself, an IPv6 address by its /64 (one subscriber's
// prefix: a client rotating addresses within it is still one client), an
// IPv4-mapped IPv6 address as the IPv4 address. ok is false if s is not an
// IP address.
func AddrKey(s string) (key string, ok bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return "", false
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String(), true
	}
	return netip.PrefixFrom(a, 64).Masked().String(), true
}

// AddrLimitWait says how long until a request refused by the per-address
// estimate would pass, given this hour's count cur, last hour's count prev,
// and elapsed, the time since this hour's bucket began: at least a second.
func AddrLimitWait(limit, cur, prev int, elapsed, window time.Duration) time.Duration {
	w, e := window.Seconds(), elapsed.Seconds()
	var at float64 // seconds from the start of this bucket
	switch {
	case cur >= limit: // wait for the next bucket, where cur is carried
		at = w + w*(1-float64(limit)/float64(cur))
	case prev > 0: // cur + floor(prev*(1-f)) < limit once f > 1-(limit-cur)/prev
		at = w * (1 - float64(limit-cur)/float64(prev))
	}
	return time.Duration(max(math.Floor(at-e)+1, 1)) * time.Second
}

// Limit scopes, as the store counts them.
const (
	ScopeSendPhone     = "send_phone"
	ScopeSendPhoneAddr = "send_phone_addr"
	ScopeSendAddr      = "send_addr"
	ScopeVerifyAddr    = "verify_addr"
)

// NormalizePhone returns the E.164 form of a phone number: a bare 10-digit
// Indian mobile (starting 6-9) gets +91; otherwise "+" and 8 to 15 digits.
// Spaces, dashes and dots between digits are dropped. Anything else is
// EInvalid.
func NormalizePhone(s string) (string, error) {
	s = strings.TrimSpace(s)
	var b strings.Builder
	for i, c := range s {
		switch {
		case c == '+' && i == 0:
			b.WriteRune(c)
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c == ' ' || c == '-' || c == '.':
		default:
			return "", Errorf(EInvalid, "phone must be a mobile number such as +919812345678")
		}
	}
	p := b.String()
	digits := strings.TrimPrefix(p, "+")
	switch {
	case !strings.HasPrefix(p, "+") && len(digits) == 10 && digits[0] >= '6':
		return "+91" + digits, nil
	case strings.HasPrefix(p, "+") && len(digits) >= 8 && len(digits) <= 15 && digits[0] != '0':
		return p, nil
	}
	return "", Errorf(EInvalid, "phone must be a mobile number such as +919812345678")
}

// NewCode returns a fresh sign-in code: CodeDigits digits from crypto/rand.
func NewCode() (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(1_000_000))
	if err != nil {
		return "", fmt.Errorf("sign-in code: %w", err)
	}
	return fmt.Sprintf("%0*d", CodeDigits, n.Int64()), nil
}

// ValidCodeShape reports whether code could be a code (CodeDigits digits):
// anything else is refused before the store counts an attempt on it.
func ValidCodeShape(code string) bool {
	if len(code) != CodeDigits {
		return false
	}
	for _, c := range code {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// CodeHash is what the store keeps of a code: HMAC-SHA256 under the core's
// code key, over the phone and the code, so a leaked table yields neither
// the codes nor a cheap way to brute-force them offline.
func CodeHash(key []byte, phone, code string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(phone + "\x00" + code))
	return m.Sum(nil)
}

// CodeSMS is the text of the sign-in SMS. The code is the only run of six
// digits in it.
func CodeSMS(code string) string {
	return fmt.Sprintf("onsale: your sign-in code is %s. It expires in %d minutes. Never share it.", code, int(CodeTTL/time.Minute))
}

// CodeRequest is one code to store for a phone, asked from an address.
type CodeRequest struct {
	Phone string
	Addr  string
	Hash  []byte
}

// AccountPatch is what a fan may change of an account.
type AccountPatch struct {
	Email *string // nil: unchanged; "": removed
}

// Normalize trims the patch's email ("" or blanks remove it) and checks it.
func (p *AccountPatch) Normalize() error {
	if p.Email == nil {
		return nil
	}
	e := strings.TrimSpace(*p.Email)
	p.Email = &e
	if e == "" {
		return nil
	}
	return ValidEmail(e)
}

// ValidEmail checks an address the way tickets are sent to it.
func ValidEmail(e string) error {
	at := strings.LastIndexByte(e, '@')
	if len(e) > 254 || at < 1 || at == len(e)-1 || strings.ContainsAny(e, " \t\r\n<>,;\"") {
		return Errorf(EInvalid, "email is not an address")
	}
	return nil
}

// Accounts is the account store. Every limit is counted in the store (see
// "How the limits count"), so it holds across several cores, and a refused
// request keeps no count (an address's count taken before a phone's
// refusal is given back, best effort).
type Accounts interface {
	// StoreCode records a send from r.Addr to r.Phone and keeps r.Hash as
	// the phone's one live code (replacing an earlier one), unless a limit
	// refuses: ERateLimited with Detail "retry_after_seconds".
	StoreCode(ctx context.Context, r CodeRequest, l SignInLimits) error
	// DropCode undoes a send whose SMS failed: if the phone's live code is
	// still hash (unused), it dies, and its send no longer counts against
	// the phone's limits or the resend wait, so a resend works at once.
	DropCode(ctx context.Context, phone string, hash []byte) error
	// VerifyCode counts a verify from addr and uses the phone's live code
	// if hash matches it: at most once, within CodeTTL, CodeAttempts, and
	// CodeWrongPerAddr from addr.
	// It returns the phone's account (created on first use), or
	// ECodeInvalid for a wrong, expired, used or exhausted code, or
	// ERateLimited.
	VerifyCode(ctx context.Context, phone, addr string, hash []byte, l SignInLimits) (*Account, error)
	Account(ctx context.Context, id int64) (*Account, error)
	UpdateAccount(ctx context.Context, id int64, p AccountPatch) (*Account, error)
	// AccountBookings lists an identity's bookings but FAILED ones:
	// upcoming shows first (soonest first), then past shows (latest first).
	AccountBookings(ctx context.Context, identity string) ([]Booking, error)
}
