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
// the gateway (or one per address they come from), the Stats and the
// event's layout. The fans are state machines (fan.go) that a scheduler
// per pool runs on a bounded set of workers (schedule.go): a crowd of any
// size sends at most as many requests at once as it has workers, and
// waits as a few bytes per fan.
type Crowd struct {
	gateway string
	event   int64
	bands   []string // the event's price bands, for best available
	st      *Stats
	pool    *fasthttp.HostClient
	pools   []*fasthttp.HostClient     // the fans' pools, one per address they come from (Spread)
	pipes   []*fasthttp.PipelineClient // the fans' polls, pipelined, one per address
	workers int                        // the fans' workers per pool: their requests in flight at most
	urls    urls
	layout  layoutCache
	sms     string     // the SMS sink's base URL when fans sign in (SignIn)
	smsCl   *Client    // its connections
	ahead   []signedIn // fans signed in ahead (SignInAhead), by fan
	fans    []fan      // the fans of the run under way (Fans, SignInAhead), by number

	mu   sync.Mutex
	told []check.Confirmation // the bookings the fans were told were confirmed
}

// urls are the event's routes the fans use.
type urls struct{ queue, status, seatmap, layout, holds, stats string }

// signedIn is a fan's account token and account id ("" when it could not
// sign in).
type signedIn struct{ token, account string }

// New is a crowd for the event at gateway (a base URL), whose fans send at
// most conns requests at once (on as many connections, and a few more for
// a card payer's second click and the bots; their polls pipelined on a
// few connections of their own), that asks for best available in bands
// (the event's price band codes) and counts in st.
func New(gateway string, event int64, bands []string, conns int, st *Stats) *Crowd {
	p := NewPool(gateway, poolConns(conns))
	c := &Crowd{gateway: gateway, event: event, bands: bands, st: st, pool: p, pools: []*fasthttp.HostClient{p}, workers: max(conns, 1)}
	c.pipes = []*fasthttp.PipelineClient{NewPipe(gateway, pipeConns(c.workers), nil)}
	ev := func(route string) string { return c.url("/v1/events/%d%s", event, route) }
	c.urls = urls{queue: ev("/queue"), status: ev("/queue/status"), seatmap: ev("/seatmap"), layout: ev("/layout"),
		holds: ev("/holds"), stats: ev("/stats")}
	return c
}

// poolConns is the connections of a pool for workers workers of each
// class: one each, and room for the card payers' second clicks (one an
// admitted fans' worker at most, for as long as the request) and the
// bots, so that a worker never waits for a connection (the wait would
// count as the service's latency).
func poolConns(workers int) int { return classes*workers + workers/4 + 8 }

// pipeConns is the pipelined connections for workers workers: a few
// dozen polls in flight on each at most.
func pipeConns(workers int) int { return max(workers/32, 2) }

// Spread makes the fans come from n loopback addresses, 127.0.0.1 to
// 127.0.0.n (fan i from the (i mod n)th), sharing conns workers: as a real
// crowd comes from many addresses, so the gateway's and the core's
// per-address limits see many. The bots and operators stay on 127.0.0.1.
func (c *Crowd) Spread(n, conns int) {
	c.pools, c.pipes, c.workers = nil, nil, max(conns/max(n, 1), 1)
	for i := range max(n, 1) {
		from := net.IPv4(127, 0, byte((i+1)>>8), byte((i+1)&0xff))
		c.pools = append(c.pools, NewPoolFrom(c.gateway, poolConns(c.workers), from))
		c.pipes = append(c.pipes, NewPipe(c.gateway, pipeConns(c.workers), from))
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
	c.fans = make([]fan, fans)
	defer func() { c.fans = nil }()
	lanes := c.lanes(classes)
	for i := range c.fans {
		f := &c.fans[i]
		f.trace.Fan = i
		if i < len(c.ahead) {
			f.account, f.trace.Account = c.ahead[i].token, c.ahead[i].account
		}
		lanes[i%len(lanes)].add(i, inLine, start.Add(arrival.Draw()))
	}
	run(ctx, lanes, []int{c.workers, c.workers}, task{step: func(n int, late time.Duration) (time.Time, bool) { return c.step(ctx, n, late) },
		class: c.classOf, stop: c.stop})
	var out []check.Admission
	for i := range c.fans {
		if c.fans[i].arrived {
			out = append(out, c.fans[i].trace)
		}
	}
	return out
}

// The fans' classes in a lane's scheduler: in line (signing in, joining,
// polling) and admitted (shopping, paying), each on workers of its own,
// so that a wall of fans joining, each worker waiting for a slow answer,
// makes no payer late for its hold.
const (
	inLine = iota
	admitted
	classes
)

// classOf is the class fan n waits in: admitted once it has a session.
func (c *Crowd) classOf(n int) int {
	if c.fans[n].shop != nil {
		return admitted
	}
	return inLine
}

// lanes are a scheduler of classes classes for each pool's fans (fan i in
// the (i mod pools)th), so that a worker only sends on its own pool's
// connections.
func (c *Crowd) lanes(classes int) []*scheduler {
	out := make([]*scheduler, len(c.pools))
	for i := range out {
		out[i] = newScheduler(classes)
	}
	return out
}

// run runs each lane's tasks on its own workers (workers[class] for each
// class) until all are finished.
func run(ctx context.Context, lanes []*scheduler, workers []int, t task) {
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx, workers, t)
		}()
	}
	wg.Wait()
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
