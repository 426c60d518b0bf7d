// Command gateway is the waiting room in front of the core: fans join,
// poll, and are admitted at the operators' rate with signed admit tokens.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on -pprof-addr
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway/coreclient"
	gwhttp "github.com/onsale/onsale/gateway/http"
	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/gateway/room"
	"github.com/onsale/onsale/gateway/token"
	"github.com/onsale/onsale/shared/admission"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := m.Run(ctx); err != nil {
		m.Log.Error("gateway stopped", "err", err)
		os.Exit(1)
	}
}

// Config is the gateway's configuration: environment, overridden by flags.
type Config struct {
	Addr            string
	Redis           string // redis://host:port/db, or host:port,host:port,... for a cluster
	CoreURL         string
	CheckoutURL     string // the payment provider's hosted checkout (for the pages)
	AdmitKeys       string // comma-separated PEM files; the first signs, all are published
	QueueSecret     string
	AdminToken      string
	AccountSecret   string
	RequireIdentity bool
	Tick            time.Duration
	IPRate          float64 // requests per second per client IP
	TokenRate       float64 // polls per second per queue token
	ShutdownTimeout time.Duration
	LogLevel        slog.Level
	PprofAddr       string
}

// Main is the gateway program.
type Main struct {
	Config Config
	Log    *slog.Logger
	ready  chan net.Addr
	addr   net.Addr
}

// NewMain returns a Main with defaults and the environment applied.
func NewMain() *Main {
	env := func(k, d string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return d
	}
	c := Config{
		Addr:            env("ONSALE_GATEWAY_ADDR", "127.0.0.1:8080"),
		Redis:           env("ONSALE_REDIS", env("REDIS_URL", "")),
		CoreURL:         env("ONSALE_CORE_URL", "http://127.0.0.1:8081"),
		CheckoutURL:     env("ONSALE_CHECKOUT_URL", "http://127.0.0.1:18090/checkout"),
		AdmitKeys:       os.Getenv("ONSALE_ADMIT_KEYS"),
		QueueSecret:     os.Getenv("ONSALE_QUEUE_SECRET"),
		AdminToken:      os.Getenv("ONSALE_ADMIN_TOKEN"),
		AccountSecret:   os.Getenv("ONSALE_ACCOUNT_SECRET"),
		RequireIdentity: os.Getenv("ONSALE_REQUIRE_IDENTITY") == "true",
		PprofAddr:       os.Getenv("ONSALE_PPROF_ADDR"),
		Tick:            100 * time.Millisecond,
		ShutdownTimeout: 10 * time.Second,
	}
	if f, err := strconv.ParseFloat(os.Getenv("ONSALE_IP_RATE"), 64); err == nil {
		c.IPRate = f
	}
	if f, err := strconv.ParseFloat(os.Getenv("ONSALE_TOKEN_RATE"), 64); err == nil {
		c.TokenRate = f
	}
	if d, err := time.ParseDuration(os.Getenv("ONSALE_TICK")); err == nil {
		c.Tick = d
	}
	_ = c.LogLevel.UnmarshalText([]byte(env("ONSALE_LOG_LEVEL", "info")))
	return &Main{Config: c, ready: make(chan net.Addr, 1)}
}

// ParseFlags applies flags over the environment and validates.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	c := &m.Config
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env ONSALE_GATEWAY_ADDR)")
	fs.StringVar(&c.Redis, "redis", c.Redis, "redis://host:port/db, or a cluster as host:port,host:port,... (env ONSALE_REDIS or REDIS_URL)")
	fs.StringVar(&c.CoreURL, "core-url", c.CoreURL, "the core's base URL, for event times (env ONSALE_CORE_URL)")
	fs.StringVar(&c.CheckoutURL, "checkout-url", c.CheckoutURL, "the payment provider's hosted checkout, linked from the booking page (env ONSALE_CHECKOUT_URL)")
	fs.StringVar(&c.AdmitKeys, "admit-keys", c.AdmitKeys, "comma-separated Ed25519 PEM key files: the first signs admit tokens, all are published (env ONSALE_ADMIT_KEYS)")
	fs.StringVar(&c.QueueSecret, "queue-secret", c.QueueSecret, "HMAC secret of queue tokens, 32+ bytes, shared by all gateways (env ONSALE_QUEUE_SECRET)")
	fs.StringVar(&c.AdminToken, "admin-token", c.AdminToken, "bearer token of the operators' API (env ONSALE_ADMIN_TOKEN)")
	fs.StringVar(&c.AccountSecret, "account-secret", c.AccountSecret, "HS256 secret of account JWTs (env ONSALE_ACCOUNT_SECRET)")
	fs.BoolVar(&c.RequireIdentity, "require-identity", c.RequireIdentity, "joins need an account JWT with phone_verified (env ONSALE_REQUIRE_IDENTITY=true)")
	fs.DurationVar(&c.Tick, "tick", c.Tick, "admission tick and cache refresh interval (env ONSALE_TICK)")
	fs.Float64Var(&c.IPRate, "ip-rate", c.IPRate, "requests per second per client IP, burst 4x (0: 5/s; env ONSALE_IP_RATE)")
	fs.Float64Var(&c.TokenRate, "token-rate", c.TokenRate, "status polls per second per queue token, burst 5x (0: 2/s; env ONSALE_TOKEN_RATE)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", c.PprofAddr, "serve Go's profiler (net/http/pprof) here, e.g. 127.0.0.1:6060; off when empty (env ONSALE_PPROF_ADDR)")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env ONSALE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case c.Redis == "":
		return errors.New("gateway: ONSALE_REDIS (or REDIS_URL) is required")
	case c.AdmitKeys == "":
		return errors.New("gateway: ONSALE_ADMIT_KEYS is required")
	case len(c.QueueSecret) < 32:
		return errors.New("gateway: ONSALE_QUEUE_SECRET of at least 32 bytes is required")
	case c.RequireIdentity && c.AccountSecret == "":
		return errors.New("gateway: ONSALE_REQUIRE_IDENTITY needs ONSALE_ACCOUNT_SECRET")
	case c.Tick <= 0 || c.Tick > time.Second:
		return errors.New("gateway: the tick must be within (0, 1s] so dial changes reach every gateway within a second")
	}
	return nil
}

// Addr waits until the gateway listens and returns its address.
func (m *Main) Addr() net.Addr {
	if m.addr == nil {
		m.addr = <-m.ready
	}
	return m.addr
}

// Run serves until ctx ends, then shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	if m.Log == nil {
		m.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	log := m.Log.With("service", "gateway")
	log.Info("starting", "addr", c.Addr, "redis", redact(c.Redis), "core", c.CoreURL, "admit_keys", c.AdmitKeys,
		"require_identity", c.RequireIdentity, "tick", c.Tick)
	var keys []ed25519.PrivateKey
	for _, f := range strings.Split(c.AdmitKeys, ",") {
		k, err := admission.ReadPrivateKeyFile(strings.TrimSpace(f))
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
	store, err := redis.Open(ctx, c.Redis)
	if err != nil {
		return err
	}
	defer store.Close()
	core := coreclient.New(c.CoreURL, log)
	rm := room.New(store, core, log)
	srv, err := gwhttp.NewServer(gwhttp.Config{Store: store, Room: rm, Core: core, Queue: queue, Admit: ring, AdminToken: c.AdminToken,
		AccountSecret: []byte(c.AccountSecret), RequireIdentity: c.RequireIdentity, Log: log, CheckoutURL: c.CheckoutURL,
		IPRate: c.IPRate, IPBurst: int(4 * c.IPRate), TokenRate: c.TokenRate, TokenBurst: int(5 * c.TokenRate)})
	if err != nil {
		return err
	}
	hs := &fasthttp.Server{Handler: srv.Handler(), Name: "onsale", ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxRequestBodySize: 64 << 10, Logger: slogPrintf{log},
		// Requests fasthttp refuses before any handler (too large, malformed) still get JSON.
		ErrorHandler: srv.ErrorHandler}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	m.ready <- ln.Addr()
	log.Info("listening", "addr", ln.Addr().String())

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	if c.PprofAddr != "" {
		// net/http/pprof registers on http.DefaultServeMux; nothing else does here.
		ps := &http.Server{Addr: c.PprofAddr, Handler: http.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		go func() { log.Info("profiler", "err", ps.ListenAndServe()) }()
		defer ps.Close()
	}
	ticked := make(chan struct{})
	go func() { defer close(ticked); rm.Run(bg, c.Tick) }()

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		stopBG()
		<-ticked
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	err = hs.ShutdownWithContext(sctx)
	stopBG()
	<-ticked
	log.Info("stopped")
	return err
}

type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(format string, args ...any) { s.l.Warn(fmt.Sprintf(format, args...)) }

func redact(s string) string {
	if i := strings.Index(s, "@"); i > 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "***" + s[i:]
		}
	}
	return s
}
