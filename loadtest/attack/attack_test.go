package attack

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/onsale/onsale/shared/admission"
)

// attack is one row of the suite. run makes the attack, asserts the
// refusal and that nothing changed, and returns what it saw.
type attack struct {
	name, expected string
	run            func(t *testing.T, s *attackStack) string
}

// TestAttacks runs every attack against one stack, in order, and logs the
// table of refusals.
func TestAttacks(t *testing.T) {
	s := newStack(t)
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			seen := "did not finish"
			defer func() {
				if t.Failed() {
					seen = "FAILED: " + seen
				}
				s.table.add(a.name, a.expected, seen)
			}()
			seen = a.run(t, s)
		})
	}
	t.Logf("attack table:\n%s", s.table)
}

var attacks = []attack{
	{name: "alg_none", expected: "401 unauthorized", run: algNone},
	{name: "hs256_with_public_key", expected: "401 unauthorized", run: hsConfusion},
	{name: "admit_foreign_key", expected: "401 unauthorized", run: admitForeign},
	{name: "admit_signed_with_core_key", expected: "401 unauthorized", run: admitCoreKey},
	{name: "admit_expired", expected: "401 token_expired", run: admitExpired},
	{name: "admit_other_event", expected: "403 wrong_event", run: admitOtherEvent},
	{name: "account_foreign_key", expected: "401 unauthorized (core), 401 identity_required (join)", run: accountForeign},
	{name: "account_expired", expected: "401 token_expired (core), 401 identity_required (join)", run: accountExpired},
	{name: "account_token_takes_seats", expected: "403 forbidden", run: accountTakesSeats},
	{name: "webhook_forged", expected: "400 invalid_signature", run: webhookForged},
	{name: "webhook_unsigned", expected: "400 invalid_signature", run: webhookUnsigned},
	{name: "webhook_replayed_stale", expected: "400 invalid_signature", run: webhookStale},
	{name: "webhook_replayed_fresh", expected: "200, applied once", run: webhookReplayed},
	{name: "second_payment_on_settled_booking", expected: "200 STRAY_REFUND, booking stays CONFIRMED, second payment refunded", run: secondPaymentOnSettled},
	{name: "foreign_payment_failure", expected: "200 OTHER_PAYMENT (or FAILURE_PARKED), booking stays PAYMENT_PENDING", run: foreignPaymentFailure},
	{name: "idor_hold", expected: "403 forbidden", run: idorHold},
	{name: "idor_booking_and_tickets", expected: "403 forbidden", run: idorBooking},
	{name: "oversized_body", expected: "413 body_too_large (gateway), 413 body_too_large (core)", run: oversizedBody},
	{name: "oversized_header", expected: "431 or 400 invalid_request (gateway), 431 (core)", run: oversizedHeader},
	{name: "slowloris_gateway", expected: "connection closed by the read timeout", run: slowlorisGateway},
	{name: "slowloris_core", expected: "connection closed by the read header timeout", run: slowlorisCore},
	{name: "forged_x_forwarded_for", expected: "429 rate_limited (one bucket whatever it claims)", run: forgedXFF},
	{name: "random_event_ids", expected: "gateway heap and Redis bounded", run: randomEventIDs},
	{name: "catalog_flood_during_holds", expected: "every hold succeeds", run: catalogFlood},
	{name: "cookie_pileup", expected: "no 400 however many queues", run: cookiePileup},
	{name: "cross_site_join", expected: "403, no cookie replaced", run: crossSiteJoin},
	{name: "admin_on_fans_listener", expected: "404 (the operators' API, console and metrics exist only on their listener)", run: adminOnFansListener},
	{name: "admin_token_guessing", expected: "401, then 429 rate_limited for the address, the right token included", run: adminTokenGuessing},
}

// --- tokens

// jwtOf builds a compact JWT from a header and claims, signed by sign over
// the signing input (nil: no signature, as alg none has).
func jwtOf(header, claims map[string]any, sign func([]byte) []byte) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(header) + "." + enc(claims)
	var sig []byte
	if sign != nil {
		sig = sign([]byte(in))
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// admitClaims are an admit token's claims for account and event, expiring
// at exp.
func admitClaims(account string, event int64, exp time.Time) map[string]any {
	return map[string]any{"iss": admission.Issuer, "aud": []string{admission.Audience}, "sub": account,
		"jti": stackJTI(), "iat": time.Now().Unix(), "exp": exp.Unix(), "evt": strconv.FormatInt(event, 10)}
}

func accountClaims(id string, exp time.Time) map[string]any {
	return map[string]any{"iss": "onsale-core", "aud": []string{"onsale"}, "sub": id,
		"iat": time.Now().Unix(), "exp": exp.Unix(), "phone_verified": true}
}

func stackJTI() string {
	var b [12]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func edSign(key ed25519.PrivateKey) func([]byte) []byte {
	return func(in []byte) []byte { return ed25519.Sign(key, in) }
}

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// tryHold attempts a hold of one seat through the gateway with tok and
// asserts the refusal and that nothing changed.
func (s *attackStack) tryHold(t *testing.T, tok string, status int, code string) string {
	t.Helper()
	c := client(2)
	before := s.snap(t, s.event)
	r := do(t, c, "POST", fmt.Sprintf("%s/v1/events/%d/holds", s.gateway, s.event), map[string]any{"seats": s.seats(t, 1)}, bearer(tok)...)
	s.want(t, r, status, code)
	s.unchanged(t, before, s.event)
	return r.seen()
}

func algNone(t *testing.T, s *attackStack) string {
	tok := jwtOf(map[string]any{"alg": "none", "typ": "JWT", "kid": s.admit.KeyID()},
		admitClaims("mallory", s.event, time.Now().Add(time.Hour)), nil)
	return s.tryHold(t, tok, 401, "unauthorized")
}

// hsConfusion signs HS256 with the gateway's public key as the HMAC secret
// (raw and as the PEM a verifier might read), the classic confusion of a
// verifier that takes the algorithm from the token.
func hsConfusion(t *testing.T, s *attackStack) string {
	pem, err := os.ReadFile(s.apps.AdmitPub)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	for _, secret := range [][]byte{s.admit.PublicKey(), pem} {
		tok := jwtOf(map[string]any{"alg": "HS256", "typ": "JWT", "kid": s.admit.KeyID()},
			admitClaims("mallory", s.event, time.Now().Add(time.Hour)),
			func(in []byte) []byte { m := hmac.New(sha256.New, secret); m.Write(in); return m.Sum(nil) })
		seen = s.tryHold(t, tok, 401, "unauthorized")
	}
	return seen
}

// admitForeign signs with a key of the attacker's, under the gateway's kid.
func admitForeign(t *testing.T, s *attackStack) string {
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": s.admit.KeyID()},
		admitClaims("mallory", s.event, time.Now().Add(time.Hour)), edSign(newKey(t)))
	return s.tryHold(t, tok, 401, "unauthorized")
}

// admitCoreKey: an admit token signed by the core's own key (a key the core
// trusts, for other tokens) under that key's kid.
func admitCoreKey(t *testing.T, s *attackStack) string {
	kid := admission.KeyID(s.signing.Public().(ed25519.PublicKey))
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid},
		admitClaims("mallory", s.event, time.Now().Add(time.Hour)), edSign(s.signing))
	return s.tryHold(t, tok, 401, "unauthorized")
}

func admitExpired(t *testing.T, s *attackStack) string {
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": s.admit.KeyID()},
		admitClaims("mallory", s.event, time.Now().Add(-time.Minute)), edSign(s.admitKey))
	return s.tryHold(t, tok, 401, "token_expired")
}

func admitOtherEvent(t *testing.T, s *attackStack) string {
	return s.tryHold(t, s.admitToken(t, "mallory", s.event+1), 403, "wrong_event")
}

// accountAttack sends an account token to the core's /v1/me (through the
// gateway) and to the gateway's join, which verifies it itself.
func (s *attackStack) accountAttack(t *testing.T, tok, coreCode string) string {
	c := client(3)
	before := s.snap(t, s.event)
	me := do(t, c, "GET", s.gateway+"/v1/me", nil, bearer(tok)...)
	s.want(t, me, 401, coreCode)
	join := do(t, c, "POST", fmt.Sprintf("%s/v1/events/%d/queue", s.gateway, s.event), nil, bearer(tok)...)
	s.want(t, join, 401, "identity_required")
	if len(join.header.Values("Set-Cookie")) > 0 {
		t.Errorf("a refused join set cookies: %v", join.header.Values("Set-Cookie"))
	}
	s.unchanged(t, before, s.event)
	return me.seen() + " (core), " + join.seen() + " (join)"
}

func accountForeign(t *testing.T, s *attackStack) string {
	kid := admission.KeyID(s.signing.Public().(ed25519.PublicKey))
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid}, accountClaims("1", time.Now().Add(time.Hour)), edSign(newKey(t)))
	return s.accountAttack(t, tok, "unauthorized")
}

func accountExpired(t *testing.T, s *attackStack) string {
	kid := admission.KeyID(s.signing.Public().(ed25519.PublicKey))
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid}, accountClaims("1", time.Now().Add(-time.Minute)), edSign(s.signing))
	return s.accountAttack(t, tok, "token_expired")
}

// accountTakesSeats: a genuine account token is not an admit token: it may
// not skip the waiting room.
func accountTakesSeats(t *testing.T, s *attackStack) string {
	kid := admission.KeyID(s.signing.Public().(ed25519.PublicKey))
	tok := jwtOf(map[string]any{"alg": "EdDSA", "typ": "JWT", "kid": kid}, accountClaims("1", time.Now().Add(time.Hour)), edSign(s.signing))
	return s.tryHold(t, tok, 403, "forbidden")
}
