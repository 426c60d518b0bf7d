package crowd

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"sync/atomic"
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
// sign in goes home at its arrival). SignIn must have been called. The
// fans signing in are state machines like the sale's (a fan waiting for
// its code is no goroutine): conc bounds the fans under way, the workers
// the requests in flight.
func (c *Crowd) SignInAhead(ctx context.Context, fans, conc int) {
	c.ahead = make([]signedIn, fans)
	c.fans = make([]fan, fans)
	defer func() { c.fans = nil }()
	lanes := c.lanes(1)
	// Each lane signs its own fans in, in order, a share of conc at a time:
	// as one finishes the lane's next starts.
	per := max((conc+len(lanes)-1)/len(lanes), 1)
	next := make([]atomic.Int64, len(lanes))
	start := func(l int) {
		if i := l + int(next[l].Add(1)-1)*len(lanes); i < fans && ctx.Err() == nil {
			c.fans[i] = fan{state: askingCode, arrived: true, sign: &signing{ahead: true}}
			c.fans[i].trace.Fan = i
			lanes[l].add(i, inLine, time.Now())
		}
	}
	for l := range lanes {
		for range per {
			start(l)
		}
	}
	step := func(n int, late time.Duration) (time.Time, bool) {
		at, more := c.step(ctx, n, late)
		if !more {
			start(n % len(lanes))
		}
		return at, more
	}
	run(ctx, lanes, []int{min(per, c.workers, signInFlight)}, task{step: step, stop: func(int) {}})
}

// signInFlight bounds a lane's sign-in requests in flight, whatever the
// crowd's workers: sign-in is the core's and PostgreSQL's work (a commit
// or more a step), and 4,000 requests at once (600,000 fans on 4,000
// workers) queued in the core's connection pool past the fans' 20 s
// timeout (6,185 fans of 600,000 never signed in), where 1,024 signed
// every fan in.
const signInFlight = 1024

// SignIn makes every fan sign in before it joins, as fans do when an event
// requires an account: ask for a code for its phone (through the gateway),
// read it from the SMS sink at sms (the payment simulator's base URL: GET
// /sms?to=), verify it and join with the account token. Without SignIn the
// fans are guests. conns bounds the connections to the sink.
func (c *Crowd) SignIn(sms string, conns int) {
	c.sms = sms
	c.smsCl = NewClient(NewPool(sms, conns), 10*time.Second, c.st, false)
}

// signing is a fan signing in: codes asked for, limits met and requests
// failed so far; the messages its phone had before its latest code was
// asked for; until when it looks for the code, and how long it waits
// before its next look. A fan signing in ahead of the sale (SignInAhead)
// is done once signed in; one signing in at its arrival joins the line.
type signing struct {
	codes, limits, busy int
	seen                int
	until               time.Time
	look                time.Duration
	ahead               bool
}

// askCode asks for a sign-in code for the fan's phone: at most
// maxSignInTry codes; a limit (429) is waited out when its Retry-After is
// short, at most maxSignInTry times; no answer or a 5xx is tapped again
// after a pause that doubles from busyPause, at most maxSignInTry times.
// A fan that cannot sign in goes home.
func (c *Crowd) askCode(ctx context.Context, f *fan) time.Duration {
	s := f.sign
	if s.codes >= maxSignInTry {
		return finished
	}
	phone := Phone(f.trace.Fan)
	s.seen = len(c.readSMS(ctx, phone)) // a retry's code is in a new message
	r := c.sendSignIn(ctx, f, "auth code", "POST", c.url("/v1/auth/code"), map[string]any{"phone": phone})
	switch r.Status {
	case 202:
		c.st.CodesRequested.Add(1)
		s.codes++
		s.until, s.look = time.Now().Add(codeWait), codeLookMin
		f.state = awaitingCode
		return 0
	case 429:
		return c.limited(f, r)
	}
	if wait, ok := s.again(r); ok {
		return wait
	}
	c.st.SignInFailed.Add(1)
	return finished
}

// awaitCode looks at the fan's SMS (past those seen before it asked) until
// one carries a code, for at most codeWait (the core may send it through
// its outbox), and verifies it: signed in, the fan joins the line (or,
// signing in ahead, is done); a wrong or expired code (401) starts over
// with a new code; a limit or a failure as askCode.
func (c *Crowd) awaitCode(ctx context.Context, f *fan) time.Duration {
	s, st := f.sign, c.st
	phone := Phone(f.trace.Fan)
	msgs := c.readSMS(ctx, phone)
	code := ""
	for i := len(msgs) - 1; i >= s.seen && i >= 0 && code == ""; i-- {
		if m := codeIn.FindStringSubmatch(msgs[i]); m != nil {
			code = m[1]
		}
	}
	if code == "" {
		if time.Now().Add(s.look).After(s.until) {
			st.SignInFailed.Add(1)
			if ctx.Err() == nil {
				st.Fail("no sign-in code by SMS")
			}
			return finished
		}
		look := s.look
		s.look = min(2*s.look, codeLookMax)
		return look
	}
	f.state = askingCode // unless signed in: a new code next
	v := c.sendSignIn(ctx, f, "auth verify", "POST", c.url("/v1/auth/verify"), map[string]any{"phone": phone, "code": code})
	switch v.Status {
	case 200:
		tok, _ := v.Body["token"].(string)
		acct, _ := v.Body["account"].(map[string]any)
		if tok == "" || acct == nil {
			st.SignInFailed.Add(1)
			st.Fail("auth verify: no token or account")
			return finished
		}
		st.SignedIn.Add(1)
		f.account = tok
		f.trace.Account = idString(acct["id"])
		if s.ahead {
			c.ahead[f.trace.Fan] = signedIn{f.account, f.trace.Account}
			return finished
		}
		f.sign, f.state = nil, joining
		return 0
	case 429:
		return c.limited(f, v)
	case 401: // code_invalid: ask for a new code
		st.SignInFailed.Add(1)
		return 0
	}
	if wait, ok := s.again(v); ok { // no answer or a 5xx: a new code after a pause
		return wait
	}
	st.SignInFailed.Add(1)
	return finished
}

// sendSignIn is send for the sign-in's requests: a fan signing in ahead
// keeps no cookies for the sale.
func (c *Crowd) sendSignIn(ctx context.Context, f *fan, route, method, target string, body any) Reply {
	if f.sign.ahead {
		return sender{hc: c.poolOf(f.trace.Fan), timeout: fanTimeout, st: c.st}.do(ctx, nil, route, method, target, body, nil)
	}
	return c.send(ctx, f, route, method, target, body)
}

// limited counts a limit (429) and says how long the fan sits it out
// before asking for a code again: its Retry-After when short, at most
// maxSignInTry times; else the fan gives up.
func (c *Crowd) limited(f *fan, r Reply) time.Duration {
	c.st.SignInLimited.Add(1)
	f.sign.limits++
	if f.sign.limits > maxSignInTry || r.Retry <= 0 || r.Retry > maxRetryWait {
		return finished
	}
	f.state = askingCode
	return r.Retry
}

// again says whether a fan whose request got no answer or a 5xx asks for a
// code again, and after what pause (false: it gives up).
func (s *signing) again(r Reply) (time.Duration, bool) {
	if (r.Status != 0 && r.Status < 500) || s.busy >= maxSignInTry {
		return 0, false
	}
	s.busy++
	return busyPause << (s.busy - 1), true
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
