package crowd

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/loadtest/check"
)

// Crowd is the fans and bots of one sale: they share one connection pool to
// the gateway, the Stats and the event's layout.
type Crowd struct {
	gateway string
	event   int64
	bands   []string // the event's price bands, for best available
	st      *Stats
	pool    *fasthttp.HostClient
	pools   []*fasthttp.HostClient // the fans' pools, one per address they come from (Spread)
	layout  layoutCache
	sms     string     // the SMS sink's base URL when fans sign in (SignIn)
	smsCl   *Client    // its connections
	ahead   []signedIn // fans signed in ahead (SignInAhead), by fan

	mu   sync.Mutex
	told []check.Confirmation // the bookings the fans were told were confirmed
}

// signedIn is a fan's account token and account id ("" when it could not
// sign in).
type signedIn struct{ token, account string }

// New is a crowd for the event at gateway (a base URL), on at most conns
// connections, that asks for best available in bands (the event's price
// band codes) and counts in st.
func New(gateway string, event int64, bands []string, conns int, st *Stats) *Crowd {
	p := NewPool(gateway, conns)
	return &Crowd{gateway: gateway, event: event, bands: bands, st: st, pool: p, pools: []*fasthttp.HostClient{p}}
}

// Spread makes the fans come from n loopback addresses, 127.0.0.1 to
// 127.0.0.n (fan i from the (i mod n)th), sharing conns connections: as a
// real crowd comes from many addresses, so the gateway's and the core's
// per-address limits see many. The bots and operators stay on 127.0.0.1.
func (c *Crowd) Spread(n, conns int) {
	c.pools = nil
	for i := range max(n, 1) {
		c.pools = append(c.pools, NewPoolFrom(c.gateway, max(conns/n, 1), net.IPv4(127, 0, byte((i+1)>>8), byte((i+1)&0xff))))
	}
}

// poolOf is fan n's connections.
func (c *Crowd) poolOf(n int) *fasthttp.HostClient { return c.pools[n%len(c.pools)] }

// url is target on the gateway, the event's id filled in by the caller.
func (c *Crowd) url(format string, args ...any) string {
	return c.gateway + fmt.Sprintf(format, args...)
}

// Fans runs fans fans, each arriving arrival.Draw() after start and
// shopping until done or ctx ends; it returns when every fan is done, with
// the line as each admitted-or-not fan saw it (in fan order; fans that
// never arrived are left out).
func (c *Crowd) Fans(ctx context.Context, fans int, arrival Arrival, start time.Time) []check.Admission {
	var wg sync.WaitGroup
	traces := make([]*check.Admission, fans)
	for i := range fans {
		at := arrival.Draw()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				return
			case <-time.After(at - time.Since(start)):
			}
			f := &fan{crowd: c, n: i, cl: NewClient(c.poolOf(i), 20*time.Second, c.st, true)}
			f.trace.Fan = i
			if c.ahead != nil {
				f.account, f.trace.Account = c.ahead[i].token, c.ahead[i].account
			}
			f.shop(ctx)
			traces[i] = &f.trace
		}()
	}
	wg.Wait()
	var out []check.Admission
	for _, tr := range traces {
		if tr != nil {
			out = append(out, *tr)
		}
	}
	return out
}

// confirmed adds a booking a fan was told is confirmed to the crowd's list.
func (c *Crowd) confirmed(b check.Confirmation) {
	c.mu.Lock()
	c.told = append(c.told, b)
	c.mu.Unlock()
}

// Confirmations are the bookings the fans were told were confirmed so far
// (the crowd's own list, for the checker to compare with the database).
func (c *Crowd) Confirmations() []check.Confirmation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]check.Confirmation(nil), c.told...)
}
