// Command pollbench measures the waiting room's hot path: queue-status polls
// answered by a running gateway, beside a fasthttp hello-world answering the
// same requests (the status path, the fans' bearer tokens) with a reply of
// the same size on the same machine, measured by the same client in the
// same run (rounds alternate). The polls are steady-state ones (fans in
// line, nobody being let in): answered from the queue token and the
// gateway's cached view, with no Redis round trip. The hello-world runs in
// a process of its own (pollbench itself, -serve-hello), so that with
// -gateway-pid it reports the server's CPU time a request on both sides:
// the gateway's per poll, the hello-world's per answer.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/loadtest/procstat"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the benchmark's setup (shared/config); deploy/local/bench.sh
// passes it as flags. A tool run by a script: no variables, no table in
// docs/configuration.md; -h lists the settings.
type config struct {
	Gateway       string        `flag:"gateway" default:"127.0.0.1:18080" help:"the running gateway (host:port)"`
	Admin         string        `flag:"admin" help:"the gateway's operators' listener (host:port, its ONSALE_ADMIN_ADDR), where the dials are set (required)"`
	OperatorToken string        `env:"ONSALE_OPERATOR_TOKEN" flag:"operator-token" secret:"true" help:"an operator's session token, to set the dials through the gateway's operators' API (a stack's: STACK_OPERATOR_TOKEN; by env or ONSALE_OPERATOR_TOKEN_FILE: a flag is visible in ps)"`
	Event         int64         `flag:"event" default:"1" min:"1" help:"a seated event the core knows"`
	Fans          int           `flag:"fans" default:"20000" min:"1" help:"fans who join (their queue tokens are polled in turn)"`
	Conns         int           `flag:"conns" default:"64" min:"1" help:"concurrent connections"`
	Rounds        int           `flag:"rounds" default:"3" min:"1" help:"rounds of each, alternating"`
	Duration      time.Duration `flag:"duration" default:"5s" min:"100ms" help:"length of a round"`
	GatewayPID    int           `flag:"gateway-pid" default:"0" min:"0" help:"the gateway's process, for CPU time per poll (0: not measured)"`
	Out           string        `flag:"out" help:"also write the results as JSON to this file"`
	ServeHello    bool          `flag:"serve-hello" help:"serve the hello-world only (pollbench starts itself so, as its baseline's process): print its address, serve until stdin closes"`
}

func main() {
	var c config
	if code := shconfig.Status("pollbench", &c); code >= 0 {
		os.Exit(code)
	}
	if c.ServeHello {
		if err := serveHello(); err != nil {
			fmt.Fprintln(os.Stderr, "pollbench -serve-hello:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "pollbench:", err)
		os.Exit(1)
	}
}

type result struct {
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	Errors    int64   `json:"errors"`
	CPUus     float64 `json:"server_cpu_us_per_request,omitempty"`
}

func run(c config) error {
	if c.Admin == "" {
		return errors.New("-admin is required: the gateway's operators' listener (ONSALE_ADMIN_ADDR), where the dials are set")
	}
	hc := &fasthttp.HostClient{Addr: c.Gateway, MaxConns: c.Conns + 8}
	ops := &fasthttp.HostClient{Addr: c.Admin, MaxConns: 2}
	// Nobody is let in, so every fan stays in line and every poll is the
	// steady-state kind.
	dials := fmt.Sprintf(`{"prequeue_at":%q,"onsale_at":%q,"new_users_per_minute":0,"claim_seconds":90}`,
		time.Now().Add(-time.Hour).Format(time.RFC3339), time.Now().Add(-time.Second).Format(time.RFC3339))
	admin := "/admin/v1/events/" + fmt.Sprint(c.Event)
	if code, body := call(ops, "GET", admin, "", c.OperatorToken); code != 200 {
		return fmt.Errorf("GET %s: %d %s", admin, code, body)
	}
	if code, body := call(ops, "PATCH", admin, dials, c.OperatorToken); code != 200 {
		return fmt.Errorf("PATCH %s: %d %s", admin, code, body)
	}
	time.Sleep(300 * time.Millisecond) // the dials reach the gateway's view
	tokens, err := join(hc, c)
	if err != nil {
		return err
	}
	fmt.Printf("pollbench: %d fans in line, %d connections, %d rounds of %v each\n", len(tokens), c.Conns, c.Rounds, c.Duration)

	// The baseline: fasthttp answering a status-sized JSON reply, in a
	// process of its own.
	helloAddr, helloPID, stop, err := startHello()
	if err != nil {
		return err
	}
	defer stop()
	hello := &fasthttp.HostClient{Addr: helloAddr, MaxConns: c.Conns + 8}
	path := fmt.Sprintf("/v1/events/%d/queue/status", c.Event)

	var gw, hw *procstat.Watcher
	if c.GatewayPID > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if gw, err = procstat.Watch(ctx, []procstat.Target{{Name: "gateway", PID: c.GatewayPID}}, time.Hour); err != nil {
			return err
		}
		if hw, err = procstat.Watch(ctx, []procstat.Target{{Name: "hello-world", PID: helloPID}}, time.Hour); err != nil {
			return err
		}
	}
	var helloRuns, gwRuns []result
	for r := range c.Rounds {
		// The same requests on both sides: the hello-world is sent the
		// status path and the fans' bearer tokens too (and ignores them),
		// so both servers read and parse the same bytes a request.
		h := load(hello, path, tokens, c, hw)
		g := load(hc, path, tokens, c, gw)
		helloRuns, gwRuns = append(helloRuns, h), append(gwRuns, g)
		fmt.Printf("  round %d: hello-world %8.0f/s (p50 %.2f ms, p99 %.2f ms, %.1f µs server CPU a request) | gateway status %8.0f/s (p50 %.2f ms, p99 %.2f ms, %d errors, %.1f µs gateway CPU a poll)\n",
			r+1, h.PerSecond, h.P50Ms, h.P99Ms, h.CPUus, g.PerSecond, g.P50Ms, g.P99Ms, g.Errors, g.CPUus)
	}
	med := func(rs []result, by func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = by(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	rate, cpu := func(r result) float64 { return r.PerSecond }, func(r result) float64 { return r.CPUus }
	s := summary{Gateway: med(gwRuns, rate), Hello: med(helloRuns, rate)}
	s.Ratio = s.Gateway / s.Hello
	fmt.Printf("median: gateway status polls %.0f/s, fasthttp hello-world %.0f/s on the same machine and client: ratio %.2f (issue 14's target: 0.85)\n",
		s.Gateway, s.Hello, s.Ratio)
	if gw != nil {
		s.GatewayCPUus, s.HelloCPUus = med(gwRuns, cpu), med(helloRuns, cpu)
		s.CPURatio = s.HelloCPUus / s.GatewayCPUus
		fmt.Printf("median server CPU a request: gateway %.1f µs a poll, hello-world %.1f µs an answer: ratio %.2f (hello-world / gateway)\n",
			s.GatewayCPUus, s.HelloCPUus, s.CPURatio)
	}
	if c.Out != "" {
		b, _ := json.MarshalIndent(map[string]any{"gateway_status": gwRuns, "hello_world": helloRuns, "median": s,
			"ratio": s.Ratio, "fans": len(tokens), "conns": c.Conns}, "", "  ")
		return os.WriteFile(c.Out, b, 0o644)
	}
	return nil
}

// summary is the medians of the rounds, and their ratios.
type summary struct {
	Gateway      float64 `json:"gateway_per_second"`
	Hello        float64 `json:"hello_world_per_second"`
	Ratio        float64 `json:"ratio"` // gateway / hello-world
	GatewayCPUus float64 `json:"gateway_cpu_us_per_poll,omitempty"`
	HelloCPUus   float64 `json:"hello_world_cpu_us_per_request,omitempty"`
	CPURatio     float64 `json:"cpu_ratio,omitempty"` // hello-world / gateway
}

// helloReply is the hello-world's answer: a status reply's size and shape.
var helloReply = []byte(`{"state":"waiting","position":14022,"ahead":14021,"eta_seconds":8413,"bound_by":"rate","poll_after_ms":29114}` + "\n")

// serveHello is the -serve-hello process: fasthttp answering helloReply
// with the headers the gateway's status answer has, on a free port that it
// prints, until its stdin closes (its parent exited).
func serveHello() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	err = fasthttp.Serve(ln, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("Cache-Control", "private, no-store")
		ctx.SetBody(helloReply)
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// startHello starts the hello-world process (this binary, -serve-hello)
// and returns its address, its pid and how to stop it.
func startHello() (string, int, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(exe, "-serve-hello")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", 0, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop := func() {
		in.Close()
		cmd.Wait()
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", 0, nil, fmt.Errorf("the hello-world process: %w", err)
	}
	return strings.TrimSpace(addr), cmd.Process.Pid, stop, nil
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

// join puts c.Fans fresh visitors in line and returns their queue tokens.
func join(hc *fasthttp.HostClient, c config) ([]string, error) {
	tokens := make([]string, c.Fans)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(c.Fans) {
					return
				}
				code, body := call(hc, "POST", fmt.Sprintf("/v1/events/%d/queue", c.Event), "", "")
				var r struct {
					Token string `json:"queue_token"`
				}
				if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Token == "" {
					failed.Add(1)
					continue
				}
				tokens[i] = r.Token
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return nil, fmt.Errorf("%d of %d joins failed", n, c.Fans)
	}
	return tokens, nil
}

// load polls path from c.Conns connections for c.Duration; tokens, when
// given, are used in turn as bearer tokens. The client's own work is the
// same on both sides: the header's values are made before the clock
// starts, and each connection walks its own share of the tokens (no
// counter shared by the connections), so the client spends on a poll only
// what sending the header costs.
func load(hc *fasthttp.HostClient, path string, tokens []string, c config, cpu *procstat.Watcher) result {
	var done, errs atomic.Int64
	lat := make([][]time.Duration, c.Conns)
	bearers := make([]string, len(tokens))
	for i, t := range tokens {
		bearers[i] = "Bearer " + t
	}
	stop := time.Now().Add(c.Duration)
	before := cpuOf(cpu)
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := range c.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + hc.Addr + path)
			next := w
			for time.Now().Before(stop) {
				if len(bearers) > 0 {
					req.Header.Set("Authorization", bearers[next%len(bearers)])
					next += c.Conns
				}
				s := time.Now()
				err := hc.DoTimeout(req, resp, 5*time.Second)
				lat[w] = append(lat[w], time.Since(s))
				if err != nil || resp.StatusCode() != 200 {
					errs.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	r := result{PerSecond: float64(done.Load()) / el.Seconds(), Errors: errs.Load()}
	if len(all) > 0 {
		r.P50Ms, r.P99Ms = ms(all[len(all)/2]), ms(all[len(all)*99/100])
	}
	if cpu != nil && done.Load() > 0 {
		r.CPUus = (cpuOf(cpu) - before) / float64(done.Load()) * 1e6
	}
	return r
}

// cpuOf samples the watched process now and returns its CPU seconds so far.
func cpuOf(w *procstat.Watcher) float64 {
	if w == nil {
		return 0
	}
	return w.CPUSeconds()[0]
}
