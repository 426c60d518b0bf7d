package crowd

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Phone is fan n's mobile number: +91 98 and n in eight digits, so every
// fan of a crowd (up to 100 million) has its own.
func Phone(n int) string { return fmt.Sprintf("+9198%08d", n) }

// codeIn finds the sign-in code in an SMS: the text's only run of exactly
// six digits.
var codeIn = regexp.MustCompile(`(?:^|\D)(\d{6})(?:\D|$)`)

// Sign-in pacing: how long a fan waits for its code to arrive, how often it
// looks, and the longest Retry-After it sits out before giving up.
const (
	codeWait     = 30 * time.Second
	codeLookMin  = 200 * time.Millisecond
	codeLookMax  = time.Second
	maxSignInTry = 3
	maxRetryWait = 30 * time.Second
	// A fan whose sign-in gets no answer or a 5xx taps again after a
	// pause that doubles from busyPause, at most maxSignInTry times.
	busyPause = time.Second
)

// SignInAhead signs fans 0 to fans-1 in before the sale, at most conc at a
// time: fans urged to sign in before onsale do so over the hours before
// it, not in the wall. It returns when every fan has signed in or given up,
// or ctx ends; each fan then joins with its token (a fan who could not
// sign in goes home at its arrival). SignIn must have been called.
func (c *Crowd) SignInAhead(ctx context.Context, fans, conc int) {
	c.ahead = make([]signedIn, fans)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(conc, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f := &fan{crowd: c, n: i, cl: NewClient(c.poolOf(i), 20*time.Second, c.st, false)}
				if f.signIn(ctx) {
					c.ahead[i] = signedIn{f.account, f.trace.Account}
				}
			}
		}()
	}
	for i := range fans {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
}

// SignIn makes every fan sign in before it joins, as fans do when an event
// requires an account: ask for a code for its phone (through the gateway),
// read it from the SMS sink at sms (the payment simulator's base URL: GET
// /sms?to=), verify it and join with the account token. Without SignIn the
// fans are guests. conns bounds the connections to the sink.
func (c *Crowd) SignIn(sms string, conns int) {
	c.sms = sms
	c.smsCl = NewClient(NewPool(sms, conns), 10*time.Second, c.st, false)
}

// signIn signs the fan in; false when it could not (every sign-in refused,
// limited, or no code came), and the fan goes home. A wrong or expired code
// (401) starts over with a new code, at most maxSignInTry codes; a limit
// (429) is waited out when its Retry-After is short, at most maxSignInTry
// times, and the fan asks again.
func (f *fan) signIn(ctx context.Context) bool {
	st := f.crowd.st
	phone := Phone(f.n)
	limits, busy := 0, 0
	limited := func(r Reply) bool {
		st.SignInLimited.Add(1)
		limits++
		return limits <= maxSignInTry && f.sitOut(ctx, r)
	}
	// again says whether a fan whose request got no answer or a 5xx taps
	// again (after a pause), or gives up.
	again := func(r Reply) bool {
		if (r.Status != 0 && r.Status < 500) || busy >= maxSignInTry {
			return false
		}
		busy++
		select {
		case <-ctx.Done():
			return false
		case <-time.After(busyPause << (busy - 1)):
			return true
		}
	}
	for codes := 0; codes < maxSignInTry; {
		seen := len(f.crowd.readSMS(ctx, phone)) // a retry's code is in a new message
		r := f.cl.Do(ctx, "auth code", "POST", f.crowd.url("/v1/auth/code"), map[string]any{"phone": phone})
		switch r.Status {
		case 202:
			st.CodesRequested.Add(1)
			codes++
		case 429:
			if !limited(r) {
				return false
			}
			continue
		default:
			if again(r) {
				continue
			}
			st.SignInFailed.Add(1)
			return false
		}
		code, ok := f.awaitCode(ctx, phone, seen)
		if !ok {
			st.SignInFailed.Add(1)
			if ctx.Err() == nil {
				st.Fail("no sign-in code by SMS")
			}
			return false
		}
		v := f.cl.Do(ctx, "auth verify", "POST", f.crowd.url("/v1/auth/verify"), map[string]any{"phone": phone, "code": code})
		switch v.Status {
		case 200:
			tok, _ := v.Body["token"].(string)
			acct, _ := v.Body["account"].(map[string]any)
			if tok == "" || acct == nil {
				st.SignInFailed.Add(1)
				st.Fail("auth verify: no token or account")
				return false
			}
			st.SignedIn.Add(1)
			f.account = tok
			f.trace.Account = idString(acct["id"])
			return true
		case 429:
			if !limited(v) {
				return false
			}
		case 401: // code_invalid: ask for a new code
			st.SignInFailed.Add(1)
		default: // no answer or a 5xx: ask for a new code after a pause
			if !again(v) {
				st.SignInFailed.Add(1)
				return false
			}
		}
	}
	return false
}

// sitOut waits out a limit's Retry-After when it is short (false when it is
// long, absent or the sale ends first: the fan gives up).
func (f *fan) sitOut(ctx context.Context, r Reply) bool {
	if r.Retry <= 0 || r.Retry > maxRetryWait {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(r.Retry):
		return true
	}
}

// awaitCode looks at the fan's SMS (past the first seen) until one carries
// a code, for at most codeWait: the core may send it through its outbox.
func (f *fan) awaitCode(ctx context.Context, phone string, seen int) (string, bool) {
	deadline := time.Now().Add(codeWait)
	wait := codeLookMin
	for {
		msgs := f.crowd.readSMS(ctx, phone)
		for i := len(msgs) - 1; i >= seen && i >= 0; i-- {
			if m := codeIn.FindStringSubmatch(msgs[i]); m != nil {
				return m[1], true
			}
		}
		if time.Now().Add(wait).After(deadline) {
			return "", false
		}
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(wait):
		}
		wait = min(2*wait, codeLookMax)
	}
}

// idString is a JSON id as text: a number without an exponent, or a string.
func idString(v any) string {
	if n, ok := v.(float64); ok {
		return strconv.FormatFloat(n, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// readSMS is the bodies of the messages the sink has for phone, oldest
// first (none when it does not answer).
func (c *Crowd) readSMS(ctx context.Context, phone string) []string {
	r := c.smsCl.Do(ctx, "sms (sink)", "GET", c.sms+"/sms?to="+url.QueryEscape(phone), nil)
	msgs, _ := r.Body["messages"].([]any)
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m, ok := m.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["body"]))
		}
	}
	return out
}
