package crowd

import (
	"context"
	"fmt"
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
	layout  layoutCache
	sms     string  // the SMS sink's base URL when fans sign in (SignIn)
	smsCl   *Client // its connections
}

// New is a crowd for the event at gateway (a base URL), on at most conns
// connections, that asks for best available in bands (the event's price
// band codes) and counts in st.
func New(gateway string, event int64, bands []string, conns int, st *Stats) *Crowd {
	return &Crowd{gateway: gateway, event: event, bands: bands, st: st, pool: NewPool(gateway, conns)}
}

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
			f := &fan{crowd: c, n: i, cl: NewClient(c.pool, 20*time.Second, c.st, true)}
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
