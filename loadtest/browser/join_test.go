package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The join page after issue 13's items 5 and 6, in Chromium: a guest in
// the pre-queue who signs in ends with the account's place in the queue
// cookie (a join no longer replaces another identity's place, so the page
// gives the guest's back and joins again), and another site's page that
// posts a join for the fan is refused 403 cross_site while the fan's
// cookies, and so its place, stay as they were.
func TestJoinPage(t *testing.T) {
	s := newStack(t)
	ev := s.event(t, 10*time.Minute) // the pre-queue: signing in takes a place of the account's
	b := browser(t)
	fan := tab(t, b)
	page := fmt.Sprintf("%s/events/%d", s.gateway, ev)
	if err := chromedp.Do(fan, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the pre-queue", `document.body.dataset.state === "prequeue"`, 20*time.Second)
	queueName := fmt.Sprintf("onsale_q_%d", ev)
	if sub := subject(t, cookies(t, fan)[queueName]); !strings.HasPrefix(sub, "vis:") {
		t.Fatalf("the guest's queue cookie is for %q; want a visitor", sub)
	}
	look(t, fan, "join-guest")

	// Signing in: the account takes its place, the guest's goes back, and
	// the cookie names the account's.
	click(t, fan, "signin-open")
	s.signIn(t, fan, "+919812340013")
	until(t, fan, "the account's place in the cookie", `document.body.dataset.state === "prequeue"`, 20*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for sub := ""; !strings.HasPrefix(sub, "acct:"); sub = subject(t, cookies(t, fan)[queueName]) {
		if time.Now().After(deadline) {
			shot(t, fan, "cookie-not-the-account")
			t.Fatalf("the queue cookie after signing in is for %q; want the account's place", sub)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := chromedp.Do(fan, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the pre-queue after a reload, by the account's cookie", `document.body.dataset.state === "prequeue"`, 20*time.Second)
	look(t, fan, "join-signed-in")

	// Another site (localhost is not the site of 127.0.0.1) posts a join
	// for the fan in a hidden form.
	before := cookies(t, fan)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>win tickets</title><form id="f" method="post" action="%s/v1/events/%d/queue"></form>`+
			`<script>document.getElementById("f").submit()</script>`, s.gateway, ev)
	}))
	defer evil.Close()
	if !strings.Contains(s.gateway, "127.0.0.1") {
		t.Fatalf("the gateway %s is not on 127.0.0.1: the attacker's page needs another site", s.gateway)
	}
	attacker := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
	if err := chromedp.Do(fan, chromedp.Navigate(attacker)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the gateway's answer to the cross-site form", `!!document.body && document.body.innerText.includes("{")`, 20*time.Second)
	shot(t, fan, "cross-site-answer")
	if answer := text(t, fan, `document.body.innerText`); !strings.Contains(answer, `"cross_site"`) {
		t.Errorf("the cross-site join was answered %s; want 403 cross_site", answer)
	}
	after := cookies(t, fan)
	for _, name := range []string{"onsale_vid", queueName} {
		if after[name] != before[name] {
			t.Errorf("cookie %s changed by the cross-site join", name)
		}
	}
	if err := chromedp.Do(fan, chromedp.Navigate(page)); err != nil {
		t.Fatal(err)
	}
	until(t, fan, "the fan's place after the attack", `document.body.dataset.state === "prequeue"`, 20*time.Second)
}

// cookies are the tab's cookies by name (HttpOnly ones included: CDP).
func cookies(t *testing.T, c context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := chromedp.Do(c, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		r, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{})
		if err != nil {
			return err
		}
		for _, ck := range r.Cookies {
			out[ck.Name] = ck.Value
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// subject is a queue token's identity (its payload read, not verified:
// the gateway verifies).
func subject(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	json.Unmarshal(b, &claims)
	return claims.Sub
}
