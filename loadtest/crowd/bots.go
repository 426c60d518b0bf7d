package crowd

import (
	"context"
	"sync"
	"time"
)

// forged is a queue token no gateway signed; forgedAccount an account
// token no core signed (sub 1, phone_verified true, alg EdDSA).
const (
	forged        = "eyJhbGciOiJIUzI1NiJ9.eyJldnQiOjEsInBvcyI6MX0.forged"
	forgedAccount = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiIxIiwiYXVkIjoib25zYWxlIiwicGhvbmVfdmVyaWZpZWQiOnRydWV9.forged"
)

// botPause is the time between a bot's requests.
const botPause = 20 * time.Millisecond

// Bots starts n bots and returns a wait for them. Each hammers the queue
// until ctx ends or until has passed since start: a third poll the status
// with no token, a third with a forged one, a third join, never signed in
// (without an account token, or with a forged one, in turn). Every 401 or
// 429 they get counts as refused; an identity_required (a join where the
// event requires an account) counts as well in BotsNoIdentity.
func (c *Crowd) Bots(ctx context.Context, n int, start time.Time, until time.Duration) (wait func()) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.bot(ctx, i, start, until)
		}()
	}
	return wg.Wait
}

func (c *Crowd) bot(ctx context.Context, i int, start time.Time, until time.Duration) {
	bot := NewClient(c.pool, 5*time.Second, c.st, false)
	n := 0
	for ctx.Err() == nil && time.Since(start) < until {
		var r Reply
		switch i % 3 {
		case 0:
			r = bot.Do(ctx, "bot", "GET", c.url("/v1/events/%d/queue/status", c.event), nil)
		case 1:
			r = bot.Do(ctx, "bot", "GET", c.url("/v1/events/%d/queue/status", c.event), nil, "Authorization", "Bearer "+forged)
		case 2:
			var hdr []string
			if n%2 == 1 {
				hdr = []string{"Authorization", "Bearer " + forgedAccount}
			}
			r = bot.Do(ctx, "bot", "POST", c.url("/v1/events/%d/queue", c.event), nil, hdr...)
		}
		n++
		if r.Status == 401 || r.Status == 429 {
			c.st.BotRefused.Add(1)
		}
		if r.Body["error"] == "identity_required" {
			c.st.BotsNoIdentity.Add(1)
		}
		time.Sleep(botPause) // the bot's pace, not a wait for anything
	}
}
