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

	for _, tc := range []struct {
		name string
		tok  string
		want *core.Principal
		err  error
	}{
		{"account", acct, &core.Principal{Kind: core.PrincipalAccount, Identity: "acct:7", AccountID: "7"}, nil},
		{"grant", grant, &core.Principal{Kind: core.PrincipalHoldGrant, Identity: "vis:a", HoldID: hold.ID, EventID: 4}, nil},
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

func mustKey(t *testing.T) []byte {
	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return priv
}
