// Command gateway is the waiting room in front of the core: fans join,
// poll, and are admitted at the operators' rate with signed admit tokens.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // on DefaultServeMux, served only on -debug-addr
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/coreclient"
	"github.com/onsale/onsale/gateway/health"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
	"github.com/onsale/onsale/shared/redisconn"
	"github.com/onsale/onsale/shared/startup"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if config.IsHelp(err) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	err := m.Run(ctx)
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		m.Log.Error("gateway stopped", "err", err)
		os.Exit(1)
	}
}

// Config is the gateway's configuration: defaults, then the environment,
// then flags (shared/config). The gateway table of docs/configuration.md is
// generated from it (TestConfigDoc).
type Config struct {
	Addr            string        `env:"ONSALE_GATEWAY_ADDR" flag:"addr" default:"127.0.0.1:8080" help:"listen address (host:port)"`
	Redis           string        `env:"ONSALE_REDIS,REDIS_URL" flag:"redis" secret:"url" help:"Redis: redis://host:port/db for one server (rediss:// for TLS), or a cluster: rediss://user:password@host:port,host:port,... or host:port,host:port,... (required)"`
	CoreURL         string        `env:"ONSALE_CORE_URL" flag:"core-url" default:"http://127.0.0.1:8081" secret:"url" help:"the core's base URL: event times, seat layouts and counts, and the booking API passed through"`
	CheckoutURL     string        `env:"ONSALE_CHECKOUT_URL" flag:"checkout-url" default:"http://127.0.0.1:18090/checkout" secret:"url" help:"the payment provider's hosted checkout, linked from the booking page"`
	PaymentMethods  []string      `env:"ONSALE_PAYMENT_METHODS" flag:"payment-methods" default:"upi,card" help:"the ways the booking page offers to pay, comma-separated, of upi and card: what the core's payment provider takes (paysim: both; stripe: card; razorpay: upi)"`
	AdmitKeys       []string      `env:"ONSALE_ADMIT_KEYS" flag:"admit-keys" help:"Ed25519 PEM key files, comma-separated: the first signs admit tokens, all are published (required)"`
	QueueSecret     string        `env:"ONSALE_QUEUE_SECRET" flag:"queue-secret" secret:"true" help:"HMAC secret of queue tokens, 32 bytes or more, the same on every gateway (required)"`
	AdminToken      string        `env:"ONSALE_ADMIN_TOKEN" flag:"admin-token" secret:"true" help:"the gateways' service token (at least 32 bytes), the same as the core's: the gateway reads each event's saved dials from the core with it, to set a room up again after Redis lost it; empty: no operators' API (operators sign in with their own accounts: the console and /admin/v1 take their session tokens)"`
	AdminAddr       string        `env:"ONSALE_ADMIN_ADDR" flag:"admin-addr" help:"the operators' listener (host:port): the console /admin/, its API /admin/v1/* and /metrics, never served on the fans' address; empty: off. No default port: several gateways share a machine (give each its own, e.g. 127.0.0.1:9080); keep it off the fans' network"`
	AccountJWKSURL  string        `env:"ONSALE_ACCOUNT_JWKS_URL" flag:"account-jwks-url" secret:"url" help:"the core's JWKS, the keys of account tokens (signed-in fans): https (plain http only to a loopback address); empty: the core URL with /.well-known/jwks.json. Until it is read, an account token is answered 503 (guests still join)"`
	JWKSRefresh     time.Duration `env:"ONSALE_JWKS_REFRESH" flag:"jwks-refresh" default:"1m" min:"10ms" max:"24h" help:"how often to re-read the account JWKS once read (duration); until the first read works it is retried every second or so"`
	Tick            time.Duration `env:"ONSALE_TICK" flag:"tick" default:"100ms" min:"1ms" max:"1s" help:"admission tick and cache refresh interval: a dial change reaches every gateway within one"`
	IPRate          float64       `env:"ONSALE_IP_RATE" flag:"ip-rate" default:"5" min:"0.001" help:"requests per second per client address, an IPv6 /64 (joins; polls without a valid token apart), burst 4x; the other routes' per-address limits are multiples: 20x public reads, pages and the proxied API, 100x webhooks"`
	TokenRate       float64       `env:"ONSALE_TOKEN_RATE" flag:"token-rate" default:"2" min:"0.001" help:"status polls per second per queue token, burst 5x"`
	TrustedProxies  []string      `env:"ONSALE_TRUSTED_PROXIES" flag:"trusted-proxies" help:"load balancers the gateway believes about the client address: CIDRs or addresses, comma-separated; empty: no one (X-Forwarded-For is ignored)"`
	ProxyProtocol   string        `env:"ONSALE_PROXY_PROTOCOL" flag:"proxy-protocol" default:"off" oneof:"off|on" help:"on: a connection from a trusted proxy must open with a PROXY protocol v1/v2 header (HAProxy send-proxy-v2), whose source is the client; anyone else is served as-is and a PROXY header from them is refused"`
	Health          HealthConfig
	ShutdownTimeout time.Duration `env:"ONSALE_SHUTDOWN_TIMEOUT" flag:"shutdown-timeout" default:"10s" min:"0s" max:"10m" help:"how long requests in flight may finish at shutdown"`
	LogLevel        slog.Level    `env:"ONSALE_LOG_LEVEL" flag:"log-level" default:"info" help:"debug, info, warn or error"`
	DebugAddr       string        `env:"ONSALE_DEBUG_ADDR,ONSALE_PPROF_ADDR" flag:"debug-addr" help:"serve Go's profiler (/debug/pprof) on this address, e.g. 127.0.0.1:6060; empty: off (ONSALE_PPROF_ADDR is its old name)"`
}

// HealthConfig is how admission follows the core's health: the rule of
// gateway/health/rule.go (its reasoning is there), the same on every
// gateway. The defaults are health.DefaultRule's.
type HealthConfig struct {
	Mode      string        `env:"ONSALE_HEALTH" flag:"health" default:"on" oneof:"on|off" help:"on: the line is let in at the rate dial times a factor every gateway in front of the same core shares in Redis, lowered when the core's holds slow down or it fails (503s, 5xx, no answer) and raised again gently when it recovers; off: at the dial, whatever the core's state"`
	Window    time.Duration `env:"ONSALE_HEALTH_WINDOW" flag:"health-window" default:"1s" min:"10ms" max:"1m" help:"the core's health is judged per window of this length (duration); the factor moves at most once per window across gateways"`
	HoldP90   time.Duration `env:"ONSALE_HEALTH_HOLD_P90" flag:"health-hold-p90" default:"1s" min:"1ms" max:"1m" help:"a window whose holds' 90th percentile latency reaches this (at least 5 holds) is bad (duration)"`
	FailShare float64       `env:"ONSALE_HEALTH_FAIL_SHARE" flag:"health-fail-share" default:"0.1" min:"0.001" max:"1" help:"a window where this share of the booking calls and probes (at least 5) failed (503, other 5xx, no answer) is bad"`
	Decrease  float64       `env:"ONSALE_HEALTH_DECREASE" flag:"health-decrease" default:"0.5" min:"0.01" max:"0.99" help:"a bad window multiplies the factor by this"`
	Increase  float64       `env:"ONSALE_HEALTH_INCREASE" flag:"health-increase" default:"0.05" min:"0.001" max:"1" help:"a good window adds this to the factor (a share of the dial), up to 1"`
	Floor     float64       `env:"ONSALE_HEALTH_FLOOR" flag:"health-floor" default:"0.1" min:"0" max:"0.99" help:"the factor never goes below this: admission keeps a trickle of the dial while the core is unwell (0: it stops)"`
}

// Rule is the configured rule.
func (h HealthConfig) Rule() health.Rule {
	r := health.DefaultRule()
	r.Window, r.HoldP90, r.FailShare, r.Decrease, r.Increase, r.Floor = h.Window, h.HoldP90, h.FailShare, h.Decrease, h.Increase, h.Floor
	return r
}

// Validate checks the rules across settings, and what a setting must have.
func (c *Config) Validate() error {
	switch {
	case c.Redis == "":
		return errors.New("ONSALE_REDIS (or REDIS_URL, -redis) is required")
	case len(c.AdmitKeys) == 0:
		return errors.New("ONSALE_ADMIT_KEYS (-admit-keys) is required")
	case len(c.PaymentMethods) == 0 || slices.ContainsFunc(c.PaymentMethods, func(m string) bool { return m != "upi" && m != "card" }):
		return fmt.Errorf("ONSALE_PAYMENT_METHODS %q: one or both of upi and card, comma-separated", strings.Join(c.PaymentMethods, ","))
	case len(c.QueueSecret) < 32:
		return errors.New("ONSALE_QUEUE_SECRET (-queue-secret) of at least 32 bytes is required")
	case c.AdminToken != "" && len(c.AdminToken) < gwhttp.MinAdminToken:
		return fmt.Errorf("ONSALE_ADMIN_TOKEN (-admin-token) is %d bytes; at least %d are required", len(c.AdminToken), gwhttp.MinAdminToken)
	}
	if _, _, err := coreclient.ParseURL(c.CoreURL); err != nil {
		return fmt.Errorf("ONSALE_CORE_URL (-core-url): %w", err)
	}
	// An explicit JWKS URL must be https (or loopback). The default, the
	// core URL's own /.well-known/jwks.json, is read over the connection
	// that already carries every fan's token and booking to the core: it
	// is as protected as they are, and no more (an https core URL for both).
	if c.AccountJWKSURL != "" {
		if err := admission.CheckJWKSURL(c.AccountJWKSURL); err != nil {
			return fmt.Errorf("ONSALE_ACCOUNT_JWKS_URL (-account-jwks-url): %w", err)
		}
	}
	trusted, err := gwhttp.ParseTrustedProxies(c.TrustedProxies)
	switch {
	case err != nil:
		return fmt.Errorf("ONSALE_TRUSTED_PROXIES (-trusted-proxies): %w", err)
	case c.ProxyProtocol == "on" && trusted.Empty():
		return errors.New("ONSALE_PROXY_PROTOCOL=on needs ONSALE_TRUSTED_PROXIES: the proxies whose PROXY headers are believed")
	}
	if c.AdminAddr != "" {
		if _, port, err := net.SplitHostPort(c.AdminAddr); err != nil {
			return fmt.Errorf("ONSALE_ADMIN_ADDR (-admin-addr) %q: %w", c.AdminAddr, err)
		} else if c.AdminAddr == c.Addr && port != "0" { // port 0: each listener gets a free one
			return errors.New("ONSALE_ADMIN_ADDR (-admin-addr) is the fans' address: the operators' listener must be another")
		}
	}
	if err := c.Health.Rule().Validate(); err != nil {
		return fmt.Errorf("ONSALE_HEALTH_*: %w", err)
	}
	if c.Health.Mode == "on" && c.Health.Window < 3*c.Tick {
		// A verdict counts only while its window is the one just closed
		// (health.lua), and a gateway sees a window close at its next tick.
		return fmt.Errorf("ONSALE_HEALTH_WINDOW (%v) must be at least three ONSALE_TICKs (%v): a window's verdict is sent a tick after it closes and must land in the next window", c.Health.Window, c.Tick)
	}
	return nil
}

// Main is the gateway program: ParseFlags, then Run until its context
// ends, then Close.
type Main struct {
	Config Config
	Log    *slog.Logger
	// Getenv looks the environment up (os.LookupEnv; tests replace it).
	Getenv func(string) (string, bool)

	ready     chan net.Addr
	addr      net.Addr
	adminAddr net.Addr
	store     *redis.Store
	debug     *http.Server
}

// NewMain returns a Main reading the process environment.
func NewMain() *Main {
	return &Main{Getenv: os.LookupEnv, ready: make(chan net.Addr, 1)}
}

// ParseFlags loads the configuration: defaults, the environment, then
// args. It refuses an unparsable or out-of-range value, naming it.
func (m *Main) ParseFlags(args []string) error {
	for name, instead := range removedSettings {
		if _, ok := m.Getenv(name); ok {
			return fmt.Errorf("%s is no longer a setting: %s", name, instead)
		}
	}
	return config.Load(&m.Config, args, m.Getenv)
}

// removedSettings are settings the gateway had and dropped: a deploy that
// still sets one meant something the gateway no longer does, so it stops
// and says what replaced it rather than ignore it.
var removedSettings = map[string]string{
	"ONSALE_ACCOUNT_SECRET":   "account tokens are the core's (EdDSA), verified with its JWKS (ONSALE_ACCOUNT_JWKS_URL)",
	"ONSALE_REQUIRE_IDENTITY": "whether joining needs an account is each event's account_required dial (the operators' console)",
}

// Addr waits until the gateway listens and returns its address.
func (m *Main) Addr() net.Addr {
	if m.addr == nil {
		m.addr = <-m.ready
	}
	return m.addr
}

// AdminAddr is the operators' listener's address once Addr has returned;
// nil when ONSALE_ADMIN_ADDR is off.
func (m *Main) AdminAddr() net.Addr {
	m.Addr()
	return m.adminAddr
}

// Run serves until ctx ends, then shuts down gracefully: the listener
// first, then the room's ticker. Close releases what Run opened.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	if m.Log == nil {
		m.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	log := m.Log.With("service", "gateway")
	config.Log(log, &m.Config)
	var keys []ed25519.PrivateKey
	for _, f := range c.AdmitKeys {
		k, err := admission.ReadPrivateKeyFile(f)
		if err != nil {
			return fmt.Errorf("admit key: %w", err)
		}
		keys = append(keys, k)
	}
	ring, err := token.NewRing(keys...)
	if err != nil {
		return err
	}
	queue, err := token.NewQueueSigner([]byte(c.QueueSecret))
	if err != nil {
		return err
	}
	// A gateway started before Redis answers (a master failing over, a
	// whole-fleet restart) waits for it instead of exiting; a malformed
	// address is refused at once.
	if _, err := redisconn.Options(c.Redis); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	if m.store, err = startup.Retry(ctx, log, "redis", nil, func(ctx context.Context) (*redis.Store, error) {
		return redis.Open(ctx, c.Redis)
	}); err != nil {
		return err
	}
	core := coreclient.New(c.CoreURL, log)
	rm := room.New(m.store, core, log).WithRecord(coreclient.NewDials(core, c.AdminToken))
	var monitor *health.Monitor // nil: admission at the dial
	if c.Health.Mode == "on" {
		monitor = health.New(c.Health.Rule(), m.store.Health(redis.HealthKey(core.Addr())), log.With("part", "health")).OncePerWindow()
		rm.WithHealth(monitor)
	}
	accounts := account.NewVerifier(nil)
	jwksURL := c.AccountJWKSURL
	if jwksURL == "" {
		jwksURL = strings.TrimSuffix(c.CoreURL, "/") + "/.well-known/jwks.json"
	}
	// One try now (a core that is down refuses at once); the rest in the
	// background: the gateway never waits for the core to start.
	fetchAccountKeys(ctx, accounts, jwksURL, log)
	trusted, err := gwhttp.ParseTrustedProxies(c.TrustedProxies)
	if err != nil {
		return err
	}
	var operators *account.Verifier
	if c.AdminToken != "" {
		operators = accounts.Sibling(account.OperatorAudience) // the same keys, one refresh
	}
	srv, err := gwhttp.NewServer(gwhttp.Config{Room: rm, Core: core, Queue: queue, Admit: ring, Operators: operators,
		Accounts: accounts, Log: log, CheckoutURL: c.CheckoutURL, PaymentMethods: c.PaymentMethods,
		IPRate: c.IPRate, IPBurst: int(4 * c.IPRate), TokenRate: c.TokenRate, TokenBurst: int(5 * c.TokenRate),
		TrustedProxies: trusted, Health: monitor})
	if err != nil {
		return err
	}
	hs := &fasthttp.Server{Handler: srv.Handler(), Name: "onsale", ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		ReadBufferSize: gwhttp.ReadBufferSize, // the request headers' bound, sized in gateway/http/cookie.go
		IdleTimeout:    2 * time.Minute, MaxRequestBodySize: 64 << 10, Logger: slogPrintf{log},
		// Requests fasthttp refuses before any handler (too large, malformed) still get JSON.
		ErrorHandler: srv.ErrorHandler}
	// The operators' listener: plain (no PROXY header: operators reach it
	// directly, not through the fans' balancer), its own server so a
	// crowd on the fans' one never queues an operator. Bound before the
	// fans' listener reports ready: a caller that saw Addr finds it too.
	var admin *fasthttp.Server
	var adminLn net.Listener
	if c.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", c.AdminAddr); err != nil {
			return fmt.Errorf("operators' listener (ONSALE_ADMIN_ADDR): %w", err)
		}
		defer adminLn.Close()
		admin = &fasthttp.Server{Handler: srv.AdminHandler(), Name: "onsale", ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			IdleTimeout: 2 * time.Minute, MaxRequestBodySize: 64 << 10, Logger: slogPrintf{log}, ErrorHandler: srv.ErrorHandler}
		m.adminAddr = adminLn.Addr()
		log.Info("operators' listener", "addr", adminLn.Addr().String())
	} else {
		log.Info("no operators' listener (ONSALE_ADMIN_ADDR): the console, its API and /metrics are off")
	}
	ln, err := gwhttp.Listen(c.Addr, trusted, c.ProxyProtocol == "on")
	if err != nil {
		return err
	}
	// fasthttp's Shutdown closes only the listeners Serve has registered: a
	// shutdown that comes before the Serve goroutine ran would leave it
	// accepting for ever (goleak caught one in a test that stopped at once).
	defer ln.Close()
	m.ready <- ln.Addr()
	log.Info("listening", "addr", ln.Addr().String())

	if c.DebugAddr != "" {
		// net/http/pprof registers on http.DefaultServeMux; nothing else does here.
		m.debug = &http.Server{Addr: c.DebugAddr, Handler: http.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		go func() { log.Info("profiler", "err", m.debug.ListenAndServe()) }()
	}
	// The ticker outlives ctx until the listener has drained: requests in
	// flight still read fresh views.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	ticked, refreshed, probed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { defer close(ticked); rm.Run(bg, c.Tick) }()
	go func() { defer close(refreshed); keepAccountKeys(bg, accounts, jwksURL, c.JWKSRefresh, log) }()
	go func() { defer close(probed); monitor.RunProbe(bg, core.Ready) }()

	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	if admin != nil {
		go func() { errc <- admin.Serve(adminLn) }()
	}
	select {
	case err := <-errc:
		stopBG()
		<-ticked
		<-refreshed
		<-probed
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	err = hs.ShutdownWithContext(sctx)
	if admin != nil {
		err = errors.Join(err, admin.ShutdownWithContext(sctx))
	}
	stopBG()
	<-ticked
	<-refreshed
	<-probed
	log.Info("stopped")
	return err
}

// Close releases what Run opened, in reverse: the profiler, then Redis.
func (m *Main) Close() error {
	var errs []error
	if m.debug != nil {
		errs = append(errs, m.debug.Close())
		m.debug = nil
	}
	if m.store != nil {
		errs = append(errs, m.store.Close())
		m.store = nil
	}
	return errors.Join(errs...)
}

// jwksClient reads the core's JWKS: a core that hangs must not hold the
// refresh forever.
var jwksClient = &http.Client{Timeout: 5 * time.Second}

// fetchAccountKeys reads the account-token keys once into v; false when
// the core's JWKS could not be read (or had no key).
func fetchAccountKeys(ctx context.Context, v *account.Verifier, url string, log *slog.Logger) bool {
	keys, err := admission.FetchJWKS(ctx, jwksClient, url)
	if err == nil && len(keys) == 0 {
		err = errors.New("the JWKS has no key")
	}
	if err != nil {
		log.Warn("account keys not read yet: account tokens are answered 503 until they are", "url", url, "err", err)
		return false
	}
	v.SetKeys(keys)
	log.Info("account keys read", "url", url, "keys", len(keys))
	return true
}

// keepAccountKeys keeps v's keys from the core's JWKS until ctx ends:
// until a first read works (the core may start after the gateway) it
// retries with a back-off from half a second up to every; then it
// re-reads every interval (admission.RefreshJWKS), keeping the previous
// keys when a read fails.
func keepAccountKeys(ctx context.Context, v *account.Verifier, url string, every time.Duration, log *slog.Logger) {
	for wait := 500 * time.Millisecond; len(v.Keys()) == 0; wait = min(2*wait, every) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		fetchAccountKeys(ctx, v, url, log)
	}
	admission.RefreshJWKS(ctx, v, jwksClient, url, every,
		func(err error) { log.Warn("account jwks refresh failed; keeping the previous keys", "err", err) })
}

type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, args ...any) { s.l.Warn(fmt.Sprintf(format, args...)) }
