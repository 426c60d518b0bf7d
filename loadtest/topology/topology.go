package topology

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
)

// Options says how big a topology to start and where.
type Options struct {
	Dir                string // every file of the topology (required)
	Base               int    // first port of its block (ports.go); 0 = DefaultBase
	Gateways, Cores    int    // how many of each; 0 = 3 and 2 (at most 9 each)
	Bin                string // directory of the binaries; "" = stack.BinDir()
	AdminToken         string // the gateways' admin token; "" = a random one
	PG                 PGOptions
	Redis              RedisOptions
	GatewayEnv         []string // KEY=VALUE over what Start gives every gateway
	CoreEnv, PaysimEnv []string
	Ready              time.Duration // how long each app may take to become ready; 0 = 60 s
}

// Topology is onsale's highly available topology, running: PostgreSQL
// under Patroni, a Redis Cluster with replicas, the payment simulator, the
// cores and the gateways, and HAProxy in front of the gateways and the
// cores. Its handles are what a fault runner kills, freezes and restarts.
type Topology struct {
	PG      *PG
	Redis   *RedisCluster
	HAProxy *stack.Proc // haproxy -db
	Paysim  *stack.Proc
	// Cores[i] listens on Base+61+i, Gateways[i] on Base+51+i. A gateway
	// requires a PROXY header from 127.0.0.1: reach it through GatewayURL,
	// or directly from another loopback address (FanClient).
	Cores, Gateways []*stack.Proc
	// The operators' listeners (plain, no PROXY header): GatewayAdminURLs[i]
	// is Gateways[i]'s (Base+71+i: the console /admin/, its API and
	// /metrics), CoreAdminURLs[i] Cores[i]'s (Base+90+i: /metrics). HAProxy
	// does not reach them.
	GatewayAdminURLs, CoreAdminURLs []string

	GatewayURL  string // HAProxy's fans' frontend: what fans use
	CoreURL     string // HAProxy's cores' frontend: the gateways use it (paysim's webhooks come through them)
	StatsURL    string // HAProxy's statistics page (StatsURL + "/;csv" for scripts)
	PaysimURL   string
	DatabaseURL string // the cores' multi-host DSN (target_session_attrs=read-write)
	AdminToken  string
	// The topology's first operator (stack.StackOperator): the console's
	// sign-in and the load tools' session token.
	OperatorName, OperatorPassword, OperatorToken string
	QueueSecret                                   string // the gateways' shared HMAC secret (queue tokens, visitor cookies)
	stack.Keys                                           // key files under Dir/keys, shared by every gateway (admit) and core (ticket, signing)

	o    Options
	dir  string
	base int

	mu      sync.Mutex
	stopped bool
}

// The database the cores use.
const Database = "onsale"

// Start starts the whole topology and returns once HAProxy counts every
// gateway and every core UP. On error whatever it started is stopped
// again. Engines that are not installed give an error wrapping
// ErrNoPGEngine.
func Start(ctx context.Context, o Options) (_ *Topology, err error) {
	if o.Dir == "" {
		return nil, errors.New("topology: Options.Dir is required")
	}
	if o.Base == 0 {
		o.Base = DefaultBase
	}
	if o.Gateways == 0 {
		o.Gateways = 3
	}
	if o.Cores == 0 {
		o.Cores = 2
	}
	if o.Gateways < 1 || o.Gateways > 9 || o.Cores < 1 || o.Cores > 9 {
		return nil, fmt.Errorf("topology: %d gateways and %d cores; 1 to 9 of each", o.Gateways, o.Cores)
	}
	if o.Ready == 0 {
		o.Ready = 60 * time.Second
	}
	// the binaries before the engines: a missing one is known in an instant
	for _, b := range []string{stack.Paysim, stack.Core, stack.Gateway} {
		if _, err := stack.Binary(o.Bin, b); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if !BlockFree(o.Base, BlockSize) {
		return nil, fmt.Errorf("topology: something listens on 127.0.0.1 in %d-%d (another topology? `make cluster-down` stops make cluster-up's)",
			o.Base, o.Base+BlockSize-1)
	}
	b := o.Base
	t := &Topology{o: o, dir: dir, base: b, AdminToken: o.AdminToken,
		GatewayURL: fmt.Sprintf("http://127.0.0.1:%d", b+80), CoreURL: fmt.Sprintf("http://127.0.0.1:%d", b+81),
		StatsURL: fmt.Sprintf("http://127.0.0.1:%d", b+89), PaysimURL: fmt.Sprintf("http://127.0.0.1:%d", b+70)}
	for i := range o.Gateways {
		t.GatewayAdminURLs = append(t.GatewayAdminURLs, "http://"+addr(b+71+i))
	}
	for i := range o.Cores {
		t.CoreAdminURLs = append(t.CoreAdminURLs, "http://"+addr(b+90+i))
	}
	defer func() {
		if err != nil {
			t.Stop()
		}
	}()
	if err := os.MkdirAll(filepath.Join(dir, "apps"), 0o755); err != nil {
		return nil, err
	}
	if err := t.secrets(); err != nil {
		return nil, err
	}
	if err := t.startEngines(ctx); err != nil {
		return nil, err
	}
	if err := t.PG.CreateDatabase(ctx, Database); err != nil {
		return nil, err
	}
	t.DatabaseURL = t.PG.DSN(Database)
	if err := t.startPaysim(ctx); err != nil {
		return nil, err
	}
	if err := t.startHAProxy(ctx); err != nil {
		return nil, err
	}
	// The cores before the gateways: a gateway reads the cores' account
	// keys (JWKS) through HAProxy once at start-up, then only every second
	// or so.
	if err := t.startCores(ctx); err != nil {
		return nil, err
	}
	if err := t.WaitServers(ctx, BackendCores, o.Cores, 30*time.Second); err != nil {
		return nil, err
	}
	if err := t.startGateways(ctx); err != nil {
		return nil, err
	}
	if err := t.WaitServers(ctx, BackendGateways, o.Gateways, 30*time.Second); err != nil {
		return nil, err
	}
	return t, nil
}

// secrets writes the key files (stack.WriteKeys), the queue secret and the
// admin token under Dir/keys: one of each for the whole topology.
func (t *Topology) secrets() error {
	var err error
	if t.Keys, err = stack.WriteKeys(t.dir); err != nil {
		return err
	}
	if t.AdminToken == "" {
		t.AdminToken = "admin-" + stack.RandomHex(16) // over the gateway's minimum (gwhttp.MinAdminToken)
	}
	if t.OperatorName, t.OperatorPassword, t.OperatorToken, err = stack.StackOperator(t.dir, t.Keys, ""); err != nil {
		return err
	}
	t.QueueSecret = stack.RandomHex(32)
	for name, v := range map[string]string{"admin.token": t.AdminToken, "queue.secret": t.QueueSecret, "operator.token": t.OperatorToken} {
		if err := os.WriteFile(filepath.Join(t.dir, "keys", name), []byte(v+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startEngines starts PostgreSQL (with etcd) and the Redis Cluster side
// by side: both take several seconds, mostly waiting.
func (t *Topology) startEngines(ctx context.Context) error {
	po := t.o.PG
	po.Dir, po.Base, po.inTopology = t.dir, t.base, true
	ro := t.o.Redis
	ro.Dir, ro.Base, ro.inTopology = t.dir, t.base, true
	var wg sync.WaitGroup
	var pgErr, redisErr error
	var pg *PG
	var rc *RedisCluster
	wg.Add(2)
	go func() { defer wg.Done(); pg, pgErr = StartPG(ctx, po) }()
	go func() { defer wg.Done(); rc, redisErr = StartRedis(ctx, ro) }()
	wg.Wait()
	t.mu.Lock()
	t.PG, t.Redis = pg, rc
	t.mu.Unlock()
	if pgErr != nil {
		return fmt.Errorf("postgresql: %w", pgErr)
	}
	if redisErr != nil {
		return fmt.Errorf("redis: %w", redisErr)
	}
	return nil
}

// Dir is the topology's directory.
func (t *Topology) Dir() string { return t.dir }

// Base is the first port of its block.
func (t *Topology) Base() int { return t.base }

// Stop stops everything, in the reverse order of Start: the gateways, the
// cores, HAProxy, the payment simulator, Redis, then PostgreSQL and etcd.
// It is idempotent, and safe on a topology whose Start failed half-way.
func (t *Topology) Stop() error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return nil
	}
	t.stopped = true
	t.mu.Unlock()
	var errs []error
	errs = append(errs, stopAll(t.Gateways), stopAll(t.Cores))
	for _, p := range []*stack.Proc{t.HAProxy, t.Paysim} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	if t.Redis != nil {
		errs = append(errs, t.Redis.Stop())
	}
	if t.PG != nil {
		errs = append(errs, t.PG.Stop())
	}
	ReleaseBlock(t.base) // FreeBlock's reservation, if it was ours
	return errors.Join(errs...)
}

// stopAll stops the processes side by side (SIGTERM, SIGKILL after 30 s).
func stopAll(ps []*stack.Proc) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Stop() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
