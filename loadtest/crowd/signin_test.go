package crowd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/crowd"
)

// TestCrowdSignsIn runs a crowd against a fake gateway that requires an
// account: every fan asks for a code, reads it from the SMS sink, verifies
// it (a refused code or a limit: it asks again) and joins with the account
// token; everything it holds it pays for, confirms, releases and reads with
// the account token. The fake counts any request that came without one.
func TestCrowdSignsIn(t *testing.T) {
	g := newFakeGateway(t)
	g.requireAccount = true
	const fans = 300
	st := crowd.NewStats(time.Now(), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := crowd.New(g.addr, 1, []string{"A", "B"}, 64, st)
	c.SignIn(g.addr, 16)
	admissions := c.Fans(ctx, fans, crowd.Arrival{OnsaleIn: time.Second, Wall: 100 * time.Millisecond, Tail: 500 * time.Millisecond}, time.Now())
	if ctx.Err() != nil {
		t.Fatal("the crowd took longer than a minute")
	}
	got := g.Counts()
	t.Logf("the gateway saw %v", got)

	// Every fan signed in and joined once; the fans whose phone ends in 3
	// (a tenth) had their first code refused and asked again; every
	// limited ask (every twentieth) was waited out and asked again.
	refused, limited := fans/10, got["auth code limited"]
	if got["auth verify"] != fans || int(st.SignedIn.Load()) != fans || got["join"] != fans {
		t.Errorf("verified %d (Stats.SignedIn %d), joined %d; want %d each", got["auth verify"], st.SignedIn.Load(), got["join"], fans)
	}
	if got["auth verify refused"] != refused || int(st.SignInFailed.Load()) != refused {
		t.Errorf("verifies refused %d (Stats.SignInFailed %d); want %d (one each phone ending in 3)", got["auth verify refused"], st.SignInFailed.Load(), refused)
	}
	if got["auth code"] != fans+refused || int(st.CodesRequested.Load()) != fans+refused {
		t.Errorf("codes sent %d (Stats.CodesRequested %d); want %d", got["auth code"], st.CodesRequested.Load(), fans+refused)
	}
	if limited == 0 || int(st.SignInLimited.Load()) != limited {
		t.Errorf("codes limited %d, Stats.SignInLimited %d; want the same, more than none", limited, st.SignInLimited.Load())
	}
	// Each fan's own phone, and the account it gave: no two fans share one.
	accounts := map[string]bool{}
	for _, a := range admissions {
		if a.Account == "" || accounts[a.Account] {
			t.Fatalf("trace %+v: no account, or another fan's", a)
		}
		accounts[a.Account] = true
	}
	if len(accounts) != fans {
		t.Errorf("%d accounts among %d fans", len(accounts), fans)
	}
	if got["pay"]+got["confirm"] == 0 || got["release"] == 0 || got["booking"] == 0 {
		t.Errorf("pays %d, confirms %d, releases %d, booking reads %d: want some of each", got["pay"], got["confirm"], got["release"], got["booking"])
	}
	for k := range got {
		if strings.HasPrefix(k, "owner not the account") || strings.HasPrefix(k, "unknown") || k == "join without an account" || k == "hold without admission" {
			t.Errorf("the gateway saw %q %d times", k, got[k])
		}
	}
	if n := st.Errors.Load(); n != 0 {
		t.Errorf("%d errors: %v", n, st.ErrorsByKind())
	}
}

// TestBotsRefused: bots never sign in, so where the event requires an
// account every join they try is refused identity_required, and counted.
func TestBotsRefused(t *testing.T) {
	g := newFakeGateway(t)
	g.requireAccount = true
	st := crowd.NewStats(time.Now(), time.Minute)
	c := crowd.New(g.addr, 1, []string{"A"}, 16, st)
	c.Bots(context.Background(), 3, time.Now(), 300*time.Millisecond)()
	got := g.Counts()
	if got["join"] != 0 || got["join without an account"] == 0 || st.BotsNoIdentity.Load() != int64(got["join without an account"]) {
		t.Errorf("joins %d, refused %d, Stats.BotsNoIdentity %d; want none let in, every refusal counted",
			got["join"], got["join without an account"], st.BotsNoIdentity.Load())
	}
	if st.BotRefused.Load() < st.BotsNoIdentity.Load() {
		t.Errorf("Stats.BotRefused %d < BotsNoIdentity %d", st.BotRefused.Load(), st.BotsNoIdentity.Load())
	}
}

// TestSignInAhead signs the crowd in before the sale, from several
// loopback addresses: every fan then joins with its own account token and
// signs in no more at its arrival.
func TestSignInAhead(t *testing.T) {
	g := newFakeGateway(t)
	g.requireAccount = true
	const fans = 100
	st := crowd.NewStats(time.Now(), time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := crowd.New(g.addr, 1, []string{"A"}, 32, st)
	c.Spread(4, 32)
	c.SignIn(g.addr, 8)
	c.SignInAhead(ctx, fans, 8)
	before := g.Counts()
	if before["auth verify"] != fans || before["join"] != 0 {
		t.Fatalf("ahead of the sale the gateway saw %v; want %d verified, no join", before, fans)
	}
	admissions := c.Fans(ctx, fans, crowd.Arrival{OnsaleIn: time.Second, Wall: 100 * time.Millisecond, Tail: 200 * time.Millisecond}, time.Now())
	got := g.Counts()
	if got["join"] != fans || got["auth verify"] != fans || got["join without an account"] != 0 {
		t.Errorf("the gateway saw %v; want %d joins with an account, no sign-in at arrival", got, fans)
	}
	seen := map[string]bool{}
	for _, a := range admissions {
		if a.Account == "" || seen[a.Account] {
			t.Fatalf("trace %+v: no account, or another fan's", a)
		}
		seen[a.Account] = true
	}
	if addrs := g.Addrs(); len(addrs) != 4 {
		t.Errorf("the fans came from %v; want 4 loopback addresses", addrs)
	}
}
