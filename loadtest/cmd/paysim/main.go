// Command paysim is the payment-provider simulator: a Stripe-like API with
// idempotency keys, signed webhooks to the core, switchable misbehaviour,
// a ledger for the invariant checker, and an SMS sink (package
// loadtest/paysim). Environment variables configure it, flags override.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := m.Run(ctx); err != nil {
		m.Log.Error("paysim stopped", "err", err)
		os.Exit(1)
	}
}

// Config is paysim's configuration: environment variables, overridden by flags.
type Config struct {
	Addr            string
	APIKey          string
	WebhookSecret   string
	WebhookURL      string
	Control         bool
	Behaviour       paysim.Behaviour
	ShutdownTimeout time.Duration
	LogLevel        slog.Level
}

// Main is the program, testable: ParseFlags, Run until ctx ends, and Addr
// once listening.
type Main struct {
	Config Config
	Log    *slog.Logger
	ready  chan net.Addr
	addr   net.Addr
}

// NewMain returns a Main with the defaults and the environment applied
// (ONSALE_PAYSIM_BEHAVIOUR is read by ParseFlags, which can report errors).
func NewMain() *Main {
	c := Config{
		Addr:            envOr("ONSALE_PAYSIM_ADDR", "127.0.0.1:18090"),
		APIKey:          envOr("ONSALE_PAYSIM_API_KEY", "sk_test_paysim"),
		WebhookSecret:   envOr("ONSALE_PAYSIM_WEBHOOK_SECRET", "whsec_test_paysim"),
		WebhookURL:      envOr("ONSALE_PAYSIM_WEBHOOK_URL", "http://127.0.0.1:8081/v1/webhooks/payments"),
		Control:         os.Getenv("ONSALE_PAYSIM_CONTROL") == "true" || os.Getenv("ONSALE_PAYSIM_CONTROL") == "1",
		Behaviour:       paysim.DefaultBehaviour(),
		ShutdownTimeout: 10 * time.Second,
	}
	_ = c.LogLevel.UnmarshalText([]byte(envOr("ONSALE_LOG_LEVEL", "info")))
	return &Main{Config: c, ready: make(chan net.Addr, 1)}
}

// ParseFlags applies ONSALE_PAYSIM_BEHAVIOUR (JSON, as /_sim/config) and
// then the command-line flags, and validates.
func (m *Main) ParseFlags(args []string) error {
	c := &m.Config
	if v := os.Getenv("ONSALE_PAYSIM_BEHAVIOUR"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.Behaviour); err != nil {
			return fmt.Errorf("paysim: ONSALE_PAYSIM_BEHAVIOUR: %w", err)
		}
	}
	b := &c.Behaviour
	fs := flag.NewFlagSet("paysim", flag.ContinueOnError)
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env ONSALE_PAYSIM_ADDR)")
	// The secrets' flags show no default: help must not print a secret.
	apiKey := fs.String("api-key", "", "the Bearer API key clients must send (env ONSALE_PAYSIM_API_KEY; default sk_test_paysim)")
	secret := fs.String("webhook-secret", "", "secret that signs webhooks (env ONSALE_PAYSIM_WEBHOOK_SECRET; default whsec_test_paysim)")
	fs.StringVar(&c.WebhookURL, "webhook-url", c.WebhookURL, "where webhooks are POSTed (env ONSALE_PAYSIM_WEBHOOK_URL)")
	fs.BoolVar(&c.Control, "control", c.Control, "serve /_sim/config and the /_sim/ test hooks, without auth (env ONSALE_PAYSIM_CONTROL=true)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "grace period for in-flight requests on SIGTERM, e.g. 10s")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env ONSALE_LOG_LEVEL)")
	fs.DurationVar(&b.UPIDelayMin, "upi-delay-min", b.UPIDelayMin, "shortest time a UPI payer takes to approve, e.g. 1s")
	fs.DurationVar(&b.UPIDelayMax, "upi-delay-max", b.UPIDelayMax, "longest time a UPI payer takes to approve (uniform in between), e.g. 5s")
	fs.Float64Var(&b.UPISlowFraction, "upi-slow-fraction", b.UPISlowFraction, "fraction (0..1) of UPI payers who take -upi-slow-delay instead")
	fs.DurationVar(&b.UPISlowDelay, "upi-slow-delay", b.UPISlowDelay, "how long the slow UPI payers take, e.g. 2m")
	fs.Float64Var(&b.FailRate, "fail-rate", b.FailRate, "fraction (0..1) of payments that fail")
	fs.Float64Var(&b.DuplicateRate, "duplicate-rate", b.DuplicateRate, "fraction (0..1) of webhook events delivered twice, concurrently")
	fs.DurationVar(&b.ReorderWindow, "reorder-window", b.ReorderWindow, "hold each webhook a random time up to this long, e.g. 3s (0: send at once)")
	fs.Float64Var(&b.TimeoutRate, "timeout-rate", b.TimeoutRate, "fraction (0..1) of successful POSTs answered only after -timeout-delay")
	fs.DurationVar(&b.TimeoutDelay, "timeout-delay", b.TimeoutDelay, "how long those answers are held back, e.g. 30s")
	fs.Var(outageFlag{b, time.Now()}, "outage", "an outage window START/END (RFC 3339), or +OFFSET/LENGTH from start-up, e.g. +1m/30s; repeatable")
	fs.DurationVar(&b.WebhookRetryBase, "webhook-retry-base", b.WebhookRetryBase, "wait after the first failed webhook attempt, doubled per attempt, e.g. 1s")
	fs.DurationVar(&b.WebhookRetryMax, "webhook-retry-max", b.WebhookRetryMax, "longest wait between webhook attempts, e.g. 1m")
	fs.IntVar(&b.WebhookMaxAttempts, "webhook-max-attempts", b.WebhookMaxAttempts, "webhook attempts before a delivery is given up")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *apiKey != "" {
		c.APIKey = *apiKey
	}
	if *secret != "" {
		c.WebhookSecret = *secret
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("paysim: unexpected arguments %q", fs.Args())
	case c.ShutdownTimeout <= 0:
		return errors.New("paysim: shutdown timeout must be positive")
	}
	if err := c.Behaviour.Validate(); err != nil {
		return fmt.Errorf("paysim: %w", err)
	}
	return nil
}

// Addr waits until the server listens and returns its address.
func (m *Main) Addr() net.Addr {
	if m.addr == nil {
		m.addr = <-m.ready
	}
	return m.addr
}

// Run serves until ctx ends, then shuts down: stop the simulator's
// background work (releasing held-back responses), then let in-flight
// requests finish.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	if m.Log == nil {
		m.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	log := m.Log.With("service", "paysim")
	log.Info("starting", "addr", c.Addr, "api_key", mask(c.APIKey), "webhook_secret", mask(c.WebhookSecret),
		"webhook_url", c.WebhookURL, "control", c.Control, "behaviour", c.Behaviour)

	sim, err := paysim.New(paysim.Config{APIKey: c.APIKey, WebhookSecret: c.WebhookSecret, WebhookURL: c.WebhookURL,
		Control: c.Control, Behaviour: c.Behaviour}, log)
	if err != nil {
		return err
	}
	defer sim.Close()
	hs := &http.Server{
		Handler:           sim.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	m.ready <- ln.Addr()
	log.Info("listening", "addr", ln.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sim.Close()
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// outageFlag appends an outage window to the behaviour per -outage.
type outageFlag struct {
	b     *paysim.Behaviour
	start time.Time // relative windows count from here
}

func (f outageFlag) String() string { return "" }

func (f outageFlag) Set(v string) error {
	from, to, ok := strings.Cut(v, "/")
	if !ok {
		return errors.New("want START/END or +OFFSET/LENGTH")
	}
	var w paysim.Window
	if off, ok := strings.CutPrefix(from, "+"); ok {
		o, err1 := time.ParseDuration(off)
		l, err2 := time.ParseDuration(to)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		w = paysim.Window{Start: f.start.Add(o), End: f.start.Add(o + l)}
	} else {
		var err1, err2 error
		w.Start, err1 = time.Parse(time.RFC3339, from)
		w.End, err2 = time.Parse(time.RFC3339, to)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
	}
	f.b.Outages = append(f.b.Outages, w)
	return nil
}

// mask shows a secret's length, never the secret.
func mask(s string) string { return "(" + strconv.Itoa(len(s)) + " characters)" }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
