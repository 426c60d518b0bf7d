package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
)

// The gateways' settings behind HAProxy: they believe the balancer on
// loopback about the fan's address, which it sends as a PROXY v2 header
// at the start of every connection.
var gatewayProxyEnv = []string{"ONSALE_TRUSTED_PROXIES=127.0.0.1/32", "ONSALE_PROXY_PROTOCOL=on"}

// FanAddr is the loopback address FanClient's connections come from: not a
// trusted proxy, so a gateway serves it directly (without a PROXY header)
// and HAProxy passes it on as the fan's address.
const FanAddr = "127.0.0.2"

// FanClient is an HTTP client whose connections come from from (a
// loopback address other than 127.0.0.1, e.g. FanAddr): a fan at that
// address, through HAProxy or straight to one gateway.
func FanClient(from string) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}
}

func (t *Topology) app(name, binary string, port int, env []string, ready string) stack.App {
	a := stack.App{Name: name, Binary: binary, Bin: t.o.Bin, Env: env, Addr: addr(port), Dir: filepath.Join(t.dir, "apps"),
		Wait: t.o.Ready}
	if ready != "" {
		a.Ready = "http://" + a.Addr + ready
	}
	return a
}

// startPaysim starts the payment simulator; its webhooks go to the fans'
// frontend, as a real provider's do: a gateway passes them to the cores'
// frontend (any core takes any webhook), so the cores face no one but the
// gateways. (Until the gateways are up, paysim retries.)
func (t *Topology) startPaysim(ctx context.Context) error {
	port := t.base + 70
	env := append(stack.PaysimEnv(addr(port), t.GatewayURL), t.o.PaysimEnv...)
	var err error
	t.Paysim, err = stack.StartApp(ctx, t.app("paysim", stack.Paysim, port, env, "/healthz"))
	return err
}

// startCores starts every core side by side (the first migrations run
// under goose's session lock, so concurrent starts are safe). Each uses the
// multi-host DSN, the Redis Cluster, and names the fans' frontend in its
// ticket links.
func (t *Topology) startCores(ctx context.Context) error {
	apps := make([]stack.App, t.o.Cores)
	for i := range apps {
		port := t.base + 61 + i
		env := stack.CoreEnv(t.Keys, addr(port), t.DatabaseURL, t.Redis.Addrs(), t.GatewayURL, t.PaysimURL)
		env = append(env, "ONSALE_ADMIN_TOKEN="+t.AdminToken, // the gateways read saved dials from the core with it
			"ONSALE_CORE_ADMIN_ADDR="+addr(t.base+90+i))
		env = append(env, stack.OperatorEnv(t.OperatorName, t.OperatorPassword)...)
		apps[i] = t.app(fmt.Sprintf("core%d", i+1), stack.Core, port, append(env, t.o.CoreEnv...), "/readyz")
	}
	ps, err := startAll(ctx, apps)
	t.mu.Lock()
	t.Cores = ps
	t.mu.Unlock()
	return err
}

// startGateways starts every gateway side by side, behind HAProxy's fans'
// frontend and in front of its cores' frontend, sharing one queue secret,
// admit key and admin token.
func (t *Topology) startGateways(ctx context.Context) error {
	apps := make([]stack.App, t.o.Gateways)
	for i := range apps {
		port := t.base + 51 + i
		env := stack.GatewayEnv(t.Keys, addr(port), t.Redis.Addrs(), t.CoreURL, t.QueueSecret, t.AdminToken, t.PaysimURL)
		env = append(env, "ONSALE_ADMIN_ADDR="+addr(t.base+71+i))
		env = append(append(env, gatewayProxyEnv...), t.o.GatewayEnv...)
		a := t.app(fmt.Sprintf("gw%d", i+1), stack.Gateway, port, env, "/readyz")
		a.ReadyClient = FanClient(FanAddr)
		apps[i] = a
	}
	ps, err := startAll(ctx, apps)
	t.mu.Lock()
	t.Gateways = ps
	t.mu.Unlock()
	return err
}

// startAll starts the apps side by side and returns every handle that was
// made (started or not), so that Stop finds them.
func startAll(ctx context.Context, apps []stack.App) ([]*stack.Proc, error) {
	ps := make([]*stack.Proc, len(apps))
	errs := make([]error, len(apps))
	for i, a := range apps {
		p, err := stack.NewProc(a)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Start(ctx) }()
	}
	wg.Wait()
	return ps, errors.Join(errs...)
}

// RestartGateways is a deploy gone wrong: every gateway gets SIGTERM at
// once, and once all have exited all are started again (same addresses,
// keys and secrets). It returns when HAProxy counts them all UP again.
func (t *Topology) RestartGateways(ctx context.Context) error {
	if err := stopAll(t.Gateways); err != nil {
		return err
	}
	errs := make([]error, len(t.Gateways))
	var wg sync.WaitGroup
	for i, p := range t.Gateways {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Start(ctx) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return t.WaitServers(ctx, BackendGateways, len(t.Gateways), 30*time.Second)
}
