// Command core is the booking core: the catalog and the token-verified hold
// path over PostgreSQL, with the sweeper of expired holds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	nethttp "net/http"
	_ "net/http/pprof" // on DefaultServeMux, served only on -debug-addr
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
	"github.com/onsale/onsale/core/outbox"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/provider"
	"github.com/onsale/onsale/core/redis"
	"github.com/onsale/onsale/core/seatmap"
	"github.com/onsale/onsale/core/sweeper"
	"github.com/onsale/onsale/core/ticket"
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
		m.Log.Error("core stopped", "err", err)
		os.Exit(1)
	}
}

// Config is the core's configuration: environment variables, overridden by flags.
type Config struct {
	Addr            string
	DatabaseURL     string
	DBMaxConns      int
	AdmitPublicKey  string // PEM file with the gateway's Ed25519 public key
	AdmitJWKSURL    string // or the gateway's JWKS URL
	JWKSRefresh     time.Duration
	SweepInterval   time.Duration
	ShutdownTimeout time.Duration
	LogLevel        slog.Level
	DebugAddr       string // pprof listener; empty: none
	Redis           string // for the seat-map cache: redis://... or host:port,... (cluster); empty: none

	// Payments: on when ProviderURL is set.
	ProviderURL    string
	ProviderKey    string
	WebhookSecret  string
	LatePolicy     string
	TicketKey      string // PEM file of the Ed25519 key that signs tickets
	ReconcileAfter time.Duration
	ExtendBy       time.Duration
	OutboxPoll     time.Duration
	OutboxLease    time.Duration
	SMTPAddr       string // host:port; empty: no ticket emails
	SMTPFrom       string
	SMTPUser       string
	SMTPPassword   string
	SMSURL         string // empty: no ticket SMS
	PublicURL      string
}

// Main is the core program, testable: ParseFlags, Run until ctx ends, and
// Addr once listening.
type Main struct {
	Config Config
	Log    *slog.Logger
	ready  chan net.Addr
	addr   net.Addr
}

// NewMain returns a Main with the defaults and the environment applied.
func NewMain() *Main {
	c := Config{
		Addr:            envOr("ONSALE_CORE_ADDR", "127.0.0.1:8081"),
		DatabaseURL:     os.Getenv("DATABASE_URL"),
		DBMaxConns:      envInt("ONSALE_DB_MAX_CONNS", 16),
		AdmitPublicKey:  os.Getenv("ONSALE_ADMIT_PUBLIC_KEY"),
		AdmitJWKSURL:    os.Getenv("ONSALE_ADMIT_JWKS_URL"),
		JWKSRefresh:     envDuration("ONSALE_JWKS_REFRESH", time.Minute),
		SweepInterval:   envDuration("ONSALE_SWEEP_INTERVAL", 30*time.Second),
		ShutdownTimeout: 30 * time.Second, // a card confirm may take 25 s end to end
		Redis:           envOr("ONSALE_REDIS", os.Getenv("REDIS_URL")),
		ProviderURL:     os.Getenv("ONSALE_PROVIDER_URL"),
		ProviderKey:     os.Getenv("ONSALE_PROVIDER_KEY"),
		WebhookSecret:   os.Getenv("ONSALE_WEBHOOK_SECRET"),
		LatePolicy:      envOr("ONSALE_LATE_POLICY", "refund"),
		TicketKey:       os.Getenv("ONSALE_TICKET_KEY"),
		ReconcileAfter:  envDuration("ONSALE_RECONCILE_AFTER", 10*time.Minute),
		ExtendBy:        envDuration("ONSALE_EXTEND_BY", core.ExtendBy),
		OutboxPoll:      envDuration("ONSALE_OUTBOX_POLL", time.Second),
		OutboxLease:     envDuration("ONSALE_OUTBOX_LEASE", outbox.DefaultLease),
		SMTPAddr:        os.Getenv("ONSALE_SMTP_ADDR"),
		SMTPFrom:        envOr("ONSALE_SMTP_FROM", "tickets@onsale.local"),
		SMTPUser:        os.Getenv("ONSALE_SMTP_USER"),
		SMTPPassword:    os.Getenv("ONSALE_SMTP_PASSWORD"),
		SMSURL:          os.Getenv("ONSALE_SMS_URL"),
		PublicURL:       envOr("ONSALE_PUBLIC_URL", "http://127.0.0.1:8081"),
	}
	_ = c.LogLevel.UnmarshalText([]byte(envOr("ONSALE_LOG_LEVEL", "info")))
	return &Main{Config: c, ready: make(chan net.Addr, 1)}
}

// ParseFlags applies command-line flags over the environment and validates.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("core", flag.ContinueOnError)
	c := &m.Config
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen address (env ONSALE_CORE_ADDR)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL URL (env DATABASE_URL)")
	fs.IntVar(&c.DBMaxConns, "db-max-conns", c.DBMaxConns, "connection pool size (env ONSALE_DB_MAX_CONNS)")
	fs.StringVar(&c.AdmitPublicKey, "admit-public-key", c.AdmitPublicKey, "PEM file of the gateway's admit-token public key (env ONSALE_ADMIT_PUBLIC_KEY)")
	fs.StringVar(&c.AdmitJWKSURL, "admit-jwks-url", c.AdmitJWKSURL, "gateway JWKS URL, instead of a key file (env ONSALE_ADMIT_JWKS_URL)")
	fs.DurationVar(&c.JWKSRefresh, "jwks-refresh", c.JWKSRefresh, "how often to re-fetch the JWKS, e.g. 1m (env ONSALE_JWKS_REFRESH)")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", c.SweepInterval, "time between sweeps of expired holds, e.g. 30s (env ONSALE_SWEEP_INTERVAL)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "grace period for in-flight requests on SIGTERM")
	fs.StringVar(&c.DebugAddr, "debug-addr", os.Getenv("ONSALE_DEBUG_ADDR"), "serve /debug/pprof on this address, e.g. 127.0.0.1:6061 (env ONSALE_DEBUG_ADDR; off when empty)")
	fs.StringVar(&c.Redis, "redis", c.Redis, "Redis for the seat-map cache: redis://host:port/db or host:port,... for a cluster; none when empty (env ONSALE_REDIS or REDIS_URL)")
	fs.StringVar(&c.ProviderURL, "provider-url", c.ProviderURL, "payment provider base URL; payments are off without it (env ONSALE_PROVIDER_URL)")
	fs.StringVar(&c.ProviderKey, "provider-key", c.ProviderKey, "payment provider API key (env ONSALE_PROVIDER_KEY)")
	fs.StringVar(&c.WebhookSecret, "webhook-secret", c.WebhookSecret, "secret of the provider's webhook signatures (env ONSALE_WEBHOOK_SECRET)")
	fs.StringVar(&c.LatePolicy, "late-policy", c.LatePolicy, "a payment for an expired hold: refund or honour (env ONSALE_LATE_POLICY)")
	fs.StringVar(&c.TicketKey, "ticket-key", c.TicketKey, "PEM file of the Ed25519 key that signs tickets (env ONSALE_TICKET_KEY)")
	fs.DurationVar(&c.ExtendBy, "extend-by", c.ExtendBy, "what the one extension of a hold (at Pay) adds (env ONSALE_EXTEND_BY)")
	fs.DurationVar(&c.ReconcileAfter, "reconcile-after", c.ReconcileAfter, "ask the provider about bookings pending longer than this (env ONSALE_RECONCILE_AFTER)")
	fs.DurationVar(&c.OutboxPoll, "outbox-poll", c.OutboxPoll, "how often an idle outbox worker looks for due jobs (env ONSALE_OUTBOX_POLL)")
	fs.DurationVar(&c.OutboxLease, "outbox-lease", c.OutboxLease, "how long a claimed outbox job is a worker's before another may retry it (env ONSALE_OUTBOX_LEASE)")
	fs.StringVar(&c.SMTPAddr, "smtp-addr", c.SMTPAddr, "SMTP relay host:port for ticket emails; none when empty (env ONSALE_SMTP_ADDR)")
	fs.StringVar(&c.SMSURL, "sms-url", c.SMSURL, "HTTP SMS gateway URL for ticket SMS; none when empty (env ONSALE_SMS_URL)")
	fs.TextVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env ONSALE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case c.DatabaseURL == "":
		return errors.New("core: DATABASE_URL (or -database-url) is required")
	case (c.AdmitPublicKey == "") == (c.AdmitJWKSURL == ""):
		return errors.New("core: give exactly one of ONSALE_ADMIT_PUBLIC_KEY and ONSALE_ADMIT_JWKS_URL")
	case c.SweepInterval <= 0 || c.DBMaxConns <= 0:
		return errors.New("core: sweep interval and pool size must be positive")
	case c.ProviderURL != "" && (c.ProviderKey == "" || c.WebhookSecret == "" || c.TicketKey == ""):
		return errors.New("core: payments need ONSALE_PROVIDER_KEY, ONSALE_WEBHOOK_SECRET and ONSALE_TICKET_KEY")
	case c.LatePolicy != string(core.PolicyRefund) && c.LatePolicy != string(core.PolicyHonour):
		return errors.New("core: ONSALE_LATE_POLICY must be refund or honour")
	case c.OutboxPoll <= 0 || c.OutboxLease < 30*time.Second && c.OutboxLease != 0 && c.OutboxLease < time.Second:
		return errors.New("core: the outbox poll must be positive and the lease at least 1s")
	case c.ExtendBy < time.Second:
		return errors.New("core: ONSALE_EXTEND_BY must be at least 1s")
	case c.ReconcileAfter < time.Second:
		return errors.New("core: ONSALE_RECONCILE_AFTER must be at least 1s (and in production longer than a hold plus its extension)")
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

// Run serves until ctx ends, then shuts down gracefully: stop accepting,
// finish in-flight requests, stop the sweeper, close the pool.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	if m.Log == nil {
		m.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: c.LogLevel}))
	}
	log := m.Log.With("service", "core")
	log.Info("starting", "addr", c.Addr, "database", redact(c.DatabaseURL), "db_max_conns", c.DBMaxConns,
		"admit_public_key", c.AdmitPublicKey, "admit_jwks_url", c.AdmitJWKSURL, "sweep_interval", c.SweepInterval)

	verifier, err := m.verifier(ctx, log)
	if err != nil {
		return err
	}
	var keeper *seatmap.Keeper
	opts := postgres.Options{MaxConns: int32(c.DBMaxConns), Logger: log, LatePolicy: core.LatePolicy(c.LatePolicy), ExtendBy: c.ExtendBy}
	if c.Redis != "" {
		maps, err := redis.Open(ctx, c.Redis)
		if err != nil {
			return err
		}
		defer maps.Close()
		keeper = &seatmap.Keeper{Cache: maps, Log: log}
		opts.OnSeats = keeper.Changed
	}
	db, err := postgres.Open(ctx, c.DatabaseURL, opts)
	if err != nil {
		return err
	}
	defer db.Close()
	if keeper != nil {
		keeper.DB = db
	}

	met := metrics.New()
	srv := &http.Server{Catalog: db, Holds: db, Verifier: verifier, Ready: db.Ping, Log: log, Metrics: met, Layouts: db}
	var worker *outbox.Worker
	var reconciler *outbox.Reconciler
	if c.ProviderURL != "" {
		tkey, err := admission.ReadPrivateKeyFile(c.TicketKey)
		if err != nil {
			return fmt.Errorf("ticket key: %w", err)
		}
		prov := provider.New(c.ProviderURL, c.ProviderKey)
		worker = &outbox.Worker{DB: db, Provider: prov, Tickets: ticket.NewSigner(tkey), PublicURL: c.PublicURL,
			Lease: c.OutboxLease, Log: log, Metrics: met}
		if c.SMTPAddr != "" {
			host, port, err := net.SplitHostPort(c.SMTPAddr)
			if err != nil {
				return fmt.Errorf("smtp addr: %w", err)
			}
			p, _ := strconv.Atoi(port)
			worker.Mailer = &notify.Mailer{Host: host, Port: p, From: c.SMTPFrom, Username: c.SMTPUser, Password: c.SMTPPassword}
		}
		if c.SMSURL != "" {
			worker.SMS = &notify.SMS{URL: c.SMSURL}
		}
		reconciler = &outbox.Reconciler{DB: db, Provider: prov, Worker: worker, After: c.ReconcileAfter, Log: log, Metrics: met}
		srv.Payments = &http.Payments{Bookings: db, Keys: db, Provider: prov, Outbox: worker,
			WebhookSecret: []byte(c.WebhookSecret), Tickets: worker.Tickets}
		log.Info("payments on", "provider", c.ProviderURL, "late_policy", c.LatePolicy, "smtp", c.SMTPAddr != "", "sms", c.SMSURL != "")
	}
	hs := &nethttp.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	m.ready <- ln.Addr()
	log.Info("listening", "addr", ln.Addr().String())

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
		sweeper.Run(bg, db, c.SweepInterval, log, met)
	}()
	if keeper != nil {
		workers.Add(1)
		go func() { defer workers.Done(); keeper.Run(bg, 2*time.Second) }()
	}
	if worker != nil {
		workers.Add(3)
		go func() { defer workers.Done(); worker.Run(bg, c.OutboxPoll) }()
		go func() { defer workers.Done(); reconciler.Run(bg, max(c.ReconcileAfter/4, time.Second)) }()
		go func() { defer workers.Done(); purgeKeys(bg, db, log) }()
	}
	if c.AdmitJWKSURL != "" {
		// Joined like the others: shutdown waits for a fetch under way.
		workers.Add(1)
		go func() {
			defer workers.Done()
			admission.RefreshJWKS(bg, verifier, nethttp.DefaultClient, c.AdmitJWKSURL, c.JWKSRefresh,
				func(err error) { log.Warn("jwks refresh failed; keeping the previous keys", "err", err) })
		}()
	}
	go func() { workers.Wait(); close(done) }()

	if c.DebugAddr != "" {
		dbg := &nethttp.Server{Addr: c.DebugAddr, Handler: nethttp.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		go func() { log.Warn("debug server stopped", "err", dbg.ListenAndServe()) }()
		defer dbg.Close()
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		stopBG()
		<-done
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	stopBG()
	<-done
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// purgeKeys deletes idempotency keys past their 24-hour retention, hourly.
func purgeKeys(ctx context.Context, db *postgres.DB, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := db.PurgeKeys(ctx); err != nil && ctx.Err() == nil {
			log.Warn("purging idempotency keys failed", "err", err)
		} else if n > 0 {
			log.Info("purged idempotency keys", "keys", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Main) verifier(ctx context.Context, log *slog.Logger) (*admission.Verifier, error) {
	c := m.Config
	if c.AdmitPublicKey != "" {
		pub, err := admission.ReadPublicKeyFile(c.AdmitPublicKey)
		if err != nil {
			return nil, fmt.Errorf("admit public key: %w", err)
		}
		return admission.NewVerifierFromPublicKeys(pub), nil
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	keys, err := admission.FetchJWKS(fctx, nethttp.DefaultClient, c.AdmitJWKSURL)
	if err != nil {
		return nil, err
	}
	log.Info("admit keys loaded from jwks", "keys", len(keys))
	return admission.NewVerifier(keys), nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

// redact hides a password in a database URL before it is logged.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	return p.Redacted()
}
