// Command joinbench measures what a fan in line costs: it joins -fans fresh
// visitors through a running gateway's HTTP join route (many connections,
// fasthttp), then polls their queue status for -poll-duration, and reports
// joins a second, Redis used_memory per fan (INFO memory before and after),
// Redis commands per join and per poll, and the CPU time each watched
// process (the gateways, HAProxy, the Redis servers) spent per join and per
// poll, from /proc. From those an operator sizes gateways and Redis shards
// (deploy/README.md, "Machines and sizing"; `make scale` runs it).
//
// The event's dials are set through the operators' API first: -mode
// prequeue opens the pre-queue draw with onsale an hour away (every join is
// a draw entry: a sorted-set member and an ids field, the early crowd of
// seed 001), -mode line puts onsale in the past (a place at the back: an
// ids field). Admission runs at -per-minute (seed 001: 67 a second) and
// account_required is switched off so visitors join as guests.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/loadtest/procstat"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the benchmark's setup (shared/config); a tool run by a script
// (deploy/local/scale.sh): -h lists the settings.
type config struct {
	Gateway       string        `flag:"gateway" default:"127.0.0.1:18080" help:"the fans' address: a gateway, or HAProxy in front of several (host:port)"`
	Admin         string        `flag:"admin" help:"a gateway's operators' listener (host:port, its ONSALE_ADMIN_ADDR), where the dials are set (required)"`
	OperatorToken string        `env:"ONSALE_OPERATOR_TOKEN" flag:"operator-token" secret:"true" help:"an operator's session token, to set the dials through the gateway's operators' API (a stack's: STACK_OPERATOR_TOKEN; by env or ONSALE_OPERATOR_TOKEN_FILE: a flag is visible in ps)"`
	Event         int64         `flag:"event" default:"1" min:"1" help:"an event the core knows"`
	Fans          int           `flag:"fans" default:"100000" min:"1" max:"10000000" help:"fresh visitors who join"`
	Conns         int           `flag:"conns" default:"64" min:"1" max:"4096" help:"concurrent connections"`
	Mode          string        `flag:"mode" default:"prequeue" help:"prequeue (joins enter the draw, onsale an hour away) or line (onsale past: a place at the back)"`
	PerMinute     int           `flag:"per-minute" default:"4020" min:"0" help:"the new_users_per_minute dial (4020: seed 001's 67 a second)"`
	JoinTime      time.Duration `flag:"join-time" default:"10m" min:"1s" help:"stop joining after this long even if fewer than -fans joined (the figures are per fan joined; bounds the run)"`
	PollDuration  time.Duration `flag:"poll-duration" default:"10s" min:"0s" help:"how long the joined fans' status is polled afterwards (0s: no polls)"`
	Idle          time.Duration `flag:"idle" default:"3s" min:"0s" help:"first measure each process at rest this long (admission ticks, seat-map upkeep) and charge joins and polls only the CPU above that (0s: charge everything)"`
	PollFans      int           `flag:"poll-fans" default:"200000" min:"1" help:"queue tokens kept for the polls (the first ones joined; bounds the tool's memory)"`
	Redis         string        `flag:"redis" help:"the Redis servers holding the event, host:port,...: INFO memory, commands and (when local) the process's CPU"`
	Watch         string        `flag:"watch" help:"other processes to charge CPU to, name=pid,... (the gateways, HAProxy); a name's CPU counts its descendants"`
	PerAddress    int           `flag:"joins-per-address" default:"0" min:"0" help:"spread the joins over loopback source addresses 127.1.x.y, this many each, for a gateway whose per-address join limit was not raised (0: one address)"`
	Out           string        `flag:"out" help:"also write the results as JSON to this file"`
}

func main() {
	var c config
	if code := shconfig.Status("joinbench", &c); code >= 0 {
		os.Exit(code)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "joinbench:", err)
		os.Exit(1)
	}
}

// phase is what one phase (the joins, the polls) cost.
type phase struct {
	Requests     int64              `json:"requests"`
	Errors       int64              `json:"errors"`
	Seconds      float64            `json:"seconds"`
	PerSecond    float64            `json:"per_second"`
	CPUus        map[string]float64 `json:"cpu_us_per_request"` // above the idle rate
	RedisCmds    float64            `json:"redis_commands_per_request"`
	RedisMemDiff int64              `json:"redis_used_memory_delta_bytes,omitempty"`
}

func run(c config) error {
	if c.Admin == "" {
		return errors.New("-admin is required: a gateway's operators' listener (ONSALE_ADMIN_ADDR), where the dials are set")
	}
	if c.Mode != "prequeue" && c.Mode != "line" {
		return fmt.Errorf("-mode %q: want prequeue or line", c.Mode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	targets, err := procstat.Parse(c.Watch)
	if err != nil {
		return err
	}
	rs, err := redisServers(ctx, c.Redis)
	if err != nil {
		return err
	}
	defer func() {
		for _, r := range rs {
			r.c.Close()
		}
	}()
	for _, r := range rs {
		if r.pid > 0 {
			targets = append(targets, procstat.Target{Name: "redis " + r.addr, PID: r.pid})
		}
	}
	w, err := procstat.Watch(ctx, targets, time.Hour)
	if err != nil {
		return err
	}

	ops := &fasthttp.HostClient{Addr: c.Admin, MaxConns: 2}
	now := time.Now()
	onsale := now.Add(time.Hour)
	if c.Mode == "line" {
		onsale = now.Add(-time.Second)
	}
	dials := fmt.Sprintf(`{"prequeue_at":%q,"onsale_at":%q,"new_users_per_minute":%d,"account_required":false}`,
		now.Add(-time.Hour).Format(time.RFC3339), onsale.Format(time.RFC3339), c.PerMinute)
	admin := "/admin/v1/events/" + strconv.FormatInt(c.Event, 10)
	if code, body := call(ops, "PATCH", admin, dials, c.OperatorToken); code != 200 {
		return fmt.Errorf("PATCH %s: %d %s", admin, code, body)
	}
	time.Sleep(500 * time.Millisecond) // the dials reach every gateway's view

	// What each process spends with nobody joining or polling: ticking,
	// refreshing views. Joins and polls are charged only what is above it.
	idle := make([]float64, len(targets))
	if c.Idle > 0 {
		b := w.CPUSeconds()
		time.Sleep(c.Idle)
		a := w.CPUSeconds()
		fmt.Printf("at rest for %v (no joins, no polls):", c.Idle)
		for i, t := range targets {
			idle[i] = (a[i] - b[i]) / c.Idle.Seconds()
			fmt.Printf(" %s %.1f%%", t.Name, idle[i]*100)
		}
		fmt.Println(" of a core; charged to nobody below")
	}

	fmt.Printf("joinbench: %d fans join event %d (%s mode, %d admitted a minute) over %d connections\n",
		c.Fans, c.Event, c.Mode, c.PerMinute, c.Conns)
	memBefore, cmdsBefore := redisTotals(ctx, rs)
	cpuBefore := w.CPUSeconds()
	t0 := time.Now()
	tokens, joined, failed, firstErr := join(c)
	el := time.Since(t0).Seconds()
	time.Sleep(200 * time.Millisecond) // let the last writes land before INFO
	memAfter, cmdsAfter := redisTotals(ctx, rs)
	joins := perRequest(w, targets, idle, cpuBefore, joined, el, cmdsAfter-cmdsBefore)
	joins.Errors = failed
	joins.RedisMemDiff = memAfter - memBefore
	fmt.Printf("joins: %d in %.1f s = %.0f joins/s, %d failed%s\n", joined, el, joins.PerSecond, failed, firstErr)
	fmt.Printf("  Redis used_memory %+.1f MB: %.0f bytes a fan; %.1f Redis commands a join\n",
		float64(joins.RedisMemDiff)/1e6, float64(joins.RedisMemDiff)/float64(max(joined, 1)), joins.RedisCmds)
	printCPU(targets, joins.CPUus, "join")
	for _, r := range rs {
		fmt.Printf("  %s: used_memory %.1f MB after\n", r.addr, float64(r.usedMemory(ctx))/1e6)
	}

	var polls phase
	if c.PollDuration > 0 && len(tokens) > 0 {
		_, cmdsBefore = redisTotals(ctx, rs)
		cpuBefore = w.CPUSeconds()
		n, errs, secs := poll(c, tokens)
		_, cmdsAfter = redisTotals(ctx, rs)
		polls = perRequest(w, targets, idle, cpuBefore, n, secs, cmdsAfter-cmdsBefore)
		polls.Errors = errs
		fmt.Printf("polls: %d of %d fans' tokens for %.1f s = %.0f polls/s, %d errors; %.2f Redis commands a poll (ticks included)\n",
			n, len(tokens), secs, polls.PerSecond, errs, polls.RedisCmds)
		printCPU(targets, polls.CPUus, "poll")
	}
	if c.Out != "" {
		b, _ := json.MarshalIndent(map[string]any{"fans": c.Fans, "conns": c.Conns, "mode": c.Mode, "per_minute": c.PerMinute,
			"joins": joins, "polls": polls, "redis_used_memory_bytes_per_fan": float64(joins.RedisMemDiff) / float64(max(joined, 1))}, "", "  ")
		return os.WriteFile(c.Out, b, 0o644)
	}
	return nil
}

// perRequest charges the CPU each target spent since before, less its idle
// rate (cores) over secs, and the Redis commands, to n requests done in secs.
func perRequest(w *procstat.Watcher, targets []procstat.Target, idle, before []float64, n int64, secs float64, cmds int64) phase {
	after := w.CPUSeconds()
	p := phase{Requests: n, Seconds: secs, CPUus: map[string]float64{}}
	if secs > 0 {
		p.PerSecond = float64(n) / secs
	}
	if n > 0 {
		for i, t := range targets {
			p.CPUus[t.Name] = max(0, after[i]-before[i]-idle[i]*secs) / float64(n) * 1e6
		}
		p.RedisCmds = float64(cmds) / float64(n)
	}
	return p
}

func printCPU(targets []procstat.Target, us map[string]float64, what string) {
	var sum float64
	for _, t := range targets {
		fmt.Printf("  %-24s %7.1f µs CPU a %s\n", t.Name, us[t.Name], what)
		sum += us[t.Name]
	}
	if len(targets) > 1 {
		fmt.Printf("  %-24s %7.1f µs CPU a %s\n", "all watched", sum, what)
	}
}

// join puts c.Fans fresh visitors in line (no cookie: the gateway mints each
// a visitor identity) and returns the first c.PollFans queue tokens.
func join(c config) (tokens []string, ok, failed int64, firstErr string) {
	tokens = make([]string, min(c.Fans, c.PollFans))
	var next, good, bad atomic.Int64
	var mu sync.Mutex
	path := fmt.Sprintf("http://%s/v1/events/%d/queue", c.Gateway, c.Event)
	deadline := time.Now().Add(c.JoinTime)
	var wg sync.WaitGroup
	for i := range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &fasthttp.HostClient{Addr: c.Gateway, MaxConns: 1}
			used := 0
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				f := next.Add(1) - 1
				if f >= int64(c.Fans) || f%1024 == 0 && time.Now().After(deadline) {
					next.Store(int64(c.Fans)) // every worker stops at its next fan
					return
				}
				if c.PerAddress > 0 && used%c.PerAddress == 0 {
					// A fresh source address for the next joins: worker i's
					// k-th address, disjoint from every other worker's.
					hc.CloseIdleConnections()
					hc = &fasthttp.HostClient{Addr: c.Gateway, MaxConns: 1, Dial: dialFrom(sourceAddr(i, used/c.PerAddress, c.Conns))}
				}
				used++
				req.Reset()
				req.SetRequestURI(path)
				req.Header.SetMethod("POST")
				err := hc.DoTimeout(req, resp, 10*time.Second)
				var r struct {
					Token string `json:"queue_token"`
				}
				if err == nil && resp.StatusCode() == 200 && json.Unmarshal(resp.Body(), &r) == nil && r.Token != "" {
					good.Add(1)
					if f < int64(len(tokens)) {
						tokens[f] = r.Token
					}
					continue
				}
				if bad.Add(1) == 1 {
					mu.Lock()
					if err != nil {
						firstErr = "; first: " + err.Error()
					} else {
						firstErr = fmt.Sprintf("; first: %d %s", resp.StatusCode(), resp.Body())
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	kept := tokens[:0]
	for _, t := range tokens {
		if t != "" {
			kept = append(kept, t)
		}
	}
	return kept, good.Load(), bad.Load(), firstErr
}

// sourceAddr is worker w's k-th loopback source address, in 127.1.0.0/16
// and up: a gateway behind HAProxy sees it in the PROXY header.
func sourceAddr(w, k, workers int) string {
	n := 1<<16 + 1 + k*workers + w // from 127.1.0.1
	return fmt.Sprintf("127.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)
}

func dialFrom(ip string) fasthttp.DialFunc {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return func(addr string) (net.Conn, error) { return d.Dial("tcp", addr) }
}

// poll asks for the status of the tokens' fans in turn from c.Conns
// connections for c.PollDuration.
func poll(c config, tokens []string) (done, errs int64, secs float64) {
	hc := &fasthttp.HostClient{Addr: c.Gateway, MaxConns: c.Conns + 8}
	path := fmt.Sprintf("http://%s/v1/events/%d/queue/status", c.Gateway, c.Event)
	var n, bad, next atomic.Int64
	stop := time.Now().Add(c.PollDuration)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(path)
			for time.Now().Before(stop) {
				req.Header.Set("Authorization", "Bearer "+tokens[next.Add(1)%int64(len(tokens))])
				if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
					bad.Add(1)
					continue
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), bad.Load(), time.Since(t0).Seconds()
}

func call(hc *fasthttp.HostClient, method, path, body, admin string) (int, string) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + hc.Addr + path)
	req.Header.SetMethod(method)
	if admin != "" {
		req.Header.Set("Authorization", "Bearer "+admin)
	}
	if body != "" {
		req.SetBodyString(body)
		req.Header.SetContentType("application/json")
	}
	if err := hc.DoTimeout(req, resp, 10*time.Second); err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode(), string(resp.Body())
}

// redisServer is one Redis server the event's keys may live on; pid is its
// process when it runs on this machine (0: not watched).
type redisServer struct {
	addr string
	c    *goredis.Client
	pid  int
}

func redisServers(ctx context.Context, list string) ([]redisServer, error) {
	var out []redisServer
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		r := redisServer{addr: a, c: goredis.NewClient(&goredis.Options{Addr: a})}
		pid, _ := strconv.Atoi(infoField(ctx, r.c, "server", "process_id"))
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); pid > 0 && err == nil {
			r.pid = pid
		}
		if r.usedMemory(ctx) == 0 {
			return nil, fmt.Errorf("redis %s: no INFO memory", a)
		}
		out = append(out, r)
	}
	return out, nil
}

func (r redisServer) usedMemory(ctx context.Context) int64 {
	n, _ := strconv.ParseInt(infoField(ctx, r.c, "memory", "used_memory"), 10, 64)
	return n
}

// redisTotals is the servers' used_memory and commands processed, summed.
func redisTotals(ctx context.Context, rs []redisServer) (mem, cmds int64) {
	for _, r := range rs {
		mem += r.usedMemory(ctx)
		n, _ := strconv.ParseInt(infoField(ctx, r.c, "stats", "total_commands_processed"), 10, 64)
		cmds += n
	}
	return mem, cmds
}

// infoField is one field of INFO section ("" when absent).
func infoField(ctx context.Context, c *goredis.Client, section, field string) string {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
