package token_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

func keys(t *testing.T) (*token.Keys, *account.Signer) {
	t.Helper()
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return token.New(priv), account.NewSigner(priv)
}

func TestPrincipal(t *testing.T) {
	k, raw := keys(t)
	other, _ := keys(t)
	soon := time.Now().Add(time.Hour)
	hold := &core.Hold{ID: "6f1c8f5e-0000-4000-8000-000000000001", Account: "vis:a", EventID: 4, EventStartsAt: soon}
	grant, _ := k.HoldGrant(hold)
	link, _ := k.TicketLink(&core.Booking{ID: 9, Account: "acct:7"}, soon)
	acct, _, _ := k.Account(7, time.Hour)
	foreignGrant, _ := other.HoldGrant(hold)
	oldGrant, _ := k.HoldGrant(&core.Hold{ID: hold.ID, Account: "vis:a", EventID: 4, EventStartsAt: time.Now().Add(-13 * time.Hour)})
	unverified, _, _ := raw.Account("7", false, time.Hour)
	// A grant's claims under the account audience: never an account.
	crossed, _ := raw.Sign(token.HoldClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: account.Issuer,
		Audience: jwt.ClaimStrings{account.Audience}, Subject: "vis:a", ExpiresAt: jwt.NewNumericDate(soon)}, Hold: hold.ID, Event: 4})
	adm, _ := admission.NewSigner(mustKey(t)).Admit("vis:a", 4, 0, time.Hour)
	// A grant as cores signed them before grants were MACed: still valid.
	grantClaims := token.HoldClaims{RegisteredClaims: jwt.RegisteredClaims{Issuer: account.Issuer,
		Audience: jwt.ClaimStrings{token.HoldAudience}, Subject: "vis:a", ExpiresAt: jwt.NewNumericDate(soon)}, Hold: hold.ID, Event: 4}
	signedGrant, _ := raw.Sign(grantClaims)
	_, otherRaw := keys(t)
	foreignSigned, _ := otherRaw.Sign(grantClaims)
	// HS256 keyed with what an attacker knows (the public key, its kid)
	// or under the account audience: never accepted.
	pub := raw.PublicKey()
	hsPub := jwt.NewWithClaims(jwt.SigningMethodHS256, grantClaims)
	hsPub.Header["kid"] = "hs-" + admission.KeyID(pub)
	pubKeyed, _ := hsPub.SignedString([]byte(pub))
	hsKid := jwt.NewWithClaims(jwt.SigningMethodHS256, grantClaims)
	hsKid.Header["kid"] = admission.KeyID(pub)
	kidKeyed, _ := hsKid.SignedString([]byte(pub))
	hsAcct := jwt.NewWithClaims(jwt.SigningMethodHS256, account.Claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: account.Issuer,
		Audience: jwt.ClaimStrings{account.Audience}, Subject: "7", ExpiresAt: jwt.NewNumericDate(soon)}, PhoneVerified: true})
	hsAcct.Header["kid"] = admission.KeyID(pub)
	hsAccount, _ := hsAcct.SignedString([]byte(pub))
	if alg := jwtAlg(t, grant); alg != "HS256" {
		t.Errorf("HoldGrant alg = %q; want HS256 (a MAC, not a signature)", alg)
	}

	for _, tc := range []struct {
		name string
		tok  string
		want *core.Principal
		err  error
	}{
		{"account", acct, &core.Principal{Kind: core.PrincipalAccount, Identity: "acct:7", AccountID: "7"}, nil},
		{"grant", grant, &core.Principal{Kind: core.PrincipalHoldGrant, Identity: "vis:a", HoldID: hold.ID, EventID: 4}, nil},
		{"grant signed with Ed25519 (before grants were MACed)", signedGrant,
			&core.Principal{Kind: core.PrincipalHoldGrant, Identity: "vis:a", HoldID: hold.ID, EventID: 4}, nil},
		{"Ed25519 grant of another core's key", foreignSigned, nil, token.ErrInvalid},
		{"HS256 grant keyed with the public key", pubKeyed, nil, token.ErrInvalid},
		{"HS256 grant under the Ed25519 kid", kidKeyed, nil, token.ErrInvalid},
		{"HS256 account token", hsAccount, nil, token.ErrInvalid},
		{"link", link, &core.Principal{Kind: core.PrincipalTicketLink, Identity: "acct:7", Booking: 9}, nil},
		{"another core's key", foreignGrant, nil, token.ErrInvalid},
		{"grant past show + 12 h", oldGrant, nil, token.ErrExpired},
		{"phone not verified", unverified, nil, token.ErrInvalid},
		{"grant claims as an account token", crossed, nil, token.ErrInvalid},
		{"admit token", adm, nil, token.ErrNotOurs},
		{"garbage", "a.b.c", nil, token.ErrNotOurs},
	} {
		p, err := k.Principal(tc.tok)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: Principal = %+v, %v; want %v", tc.name, p, err, tc.err)
			}
			continue
		}
		if err != nil || *p != *tc.want {
			t.Errorf("%s: Principal = %+v, %v; want %+v", tc.name, p, err, tc.want)
		}
	}
}

// jwtAlg reads a token's alg header, unverified.
func jwtAlg(t *testing.T, tok string) string {
	t.Helper()
	p, _, err := jwt.NewParser().ParseUnverified(tok, &jwt.RegisteredClaims{})
	if err != nil {
		t.Fatalf("ParseUnverified(%q): %v", tok, err)
	}
	return p.Method.Alg()
}

func mustKey(t *testing.T) []byte {
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return priv
}
