// Command core is the booking core: the catalog and the token-verified hold
// path over PostgreSQL, with the sweeper of expired holds.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	nethttp "net/http"
	_ "net/http/pprof" // on DefaultServeMux, served only on -debug-addr
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
	"github.com/onsale/onsale/core/outbox"
	"github.com/onsale/onsale/core/paysim"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/razorpay"
	"github.com/onsale/onsale/core/redis"
	"github.com/onsale/onsale/core/seatmap"
	"github.com/onsale/onsale/core/stripe"
	"github.com/onsale/onsale/core/sweeper"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/config"
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
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := m.Run(ctx); err != nil {
		m.Log.Error("core stopped", "err", err)
		os.Exit(1)
	}
}

// Config is the core's configuration (shared/config reads it: defaults,
// then the environment, then flags; a bad value refuses to start).
type Config struct {
	Addr            string        `env:"ONSALE_CORE_ADDR" flag:"addr" default:"127.0.0.1:8081" help:"listen address (host:port)"`
	DatabaseURL     string        `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"PostgreSQL URL (required); migrations are applied at start-up"`
	DBMaxConns      int           `env:"ONSALE_DB_MAX_CONNS" flag:"db-max-conns" default:"16" min:"1" max:"1000" help:"connection pool size of holds, payments and every write (connections)"`
	DBReadMaxConns  int           `env:"ONSALE_DB_READ_MAX_CONNS" flag:"db-read-max-conns" default:"4" min:"1" max:"1000" help:"connection pool size of the public catalog, event, layout and seat-map reads, apart from the holds' pool so a flood of reads cannot starve a hold (connections; each core opens up to DB_MAX_CONNS plus this)"`
	DBIdleTxTimeout time.Duration `env:"ONSALE_DB_IDLE_TX_TIMEOUT" flag:"db-idle-tx-timeout" default:"5s" min:"0s" max:"1h" help:"the server ends a transaction of the core's idle this long: a stalled core's locks go (duration; 0: the server's setting)"`
	DBLockTimeout   time.Duration `env:"ONSALE_DB_LOCK_TIMEOUT" flag:"db-lock-timeout" default:"2s" min:"0s" max:"1h" help:"a statement waiting this long for a row lock fails with 503 (duration; 0: the server's setting)"`
	AdmitPublicKey  string        `env:"ONSALE_ADMIT_PUBLIC_KEY" flag:"admit-public-key" help:"PEM file of the gateway's Ed25519 admit-token public key (this or -admit-jwks-url)"`
	AdmitJWKSURL    string        `env:"ONSALE_ADMIT_JWKS_URL" flag:"admit-jwks-url" help:"the gateway's /.well-known/jwks.json URL, instead of a key file: https (plain http only to a loopback address); each read bounded, keys merged during a rotation"`
	JWKSRefresh     time.Duration `env:"ONSALE_JWKS_REFRESH" flag:"jwks-refresh" default:"1m" min:"10ms" max:"24h" help:"how often to re-fetch the JWKS (duration)"`
	SweepInterval   time.Duration `env:"ONSALE_SWEEP_INTERVAL" flag:"sweep-interval" default:"30s" min:"10ms" max:"24h" help:"time between sweeps of expired holds (duration)"`
	ShutdownTimeout time.Duration `env:"ONSALE_SHUTDOWN_TIMEOUT" flag:"shutdown-timeout" default:"50s" min:"1s" max:"10m" help:"grace period for in-flight requests on SIGTERM (duration; a card confirm may take 45 s: below that, a shutdown may cut an answer after money moved)"`
	LogLevel        slog.Level    `env:"ONSALE_LOG_LEVEL" flag:"log-level" default:"info" help:"log level: debug, info, warn or error; logs are JSON on stderr"`
	AdminAddr       string        `env:"ONSALE_CORE_ADMIN_ADDR" flag:"admin-addr" help:"the operators' listener (host:port): /metrics, never served on the API's address; empty: off. No default port: two cores may share a machine (give each its own, e.g. 127.0.0.1:9081); keep it off the fans' network"`
	DebugAddr       string        `env:"ONSALE_DEBUG_ADDR" flag:"debug-addr" help:"serve /debug/pprof on this address (host:port); off when empty"`
	AdminToken      string        `env:"ONSALE_ADMIN_TOKEN" flag:"admin-token" secret:"true" help:"the gateways' service token (at least 32 bytes): they read each event's saved dials here with it, to set a room up again after Redis lost it (an operator's change comes with the operator's own token, checked and audited here); empty: no dials routes, and gateways with an operators' API refuse to set a room up"`
	Redis           string        `env:"ONSALE_REDIS,REDIS_URL" flag:"redis" secret:"url" help:"Redis for the seat-map cache: redis://host:port/db (rediss:// for TLS), or a cluster: rediss://user:password@host:port,host:port,... or host:port,...; off when empty"`

	// Payments: on with stripe or razorpay, or with paysim when ProviderURL is set.
	Provider       string        `env:"ONSALE_PROVIDER" flag:"provider" default:"paysim" oneof:"paysim|stripe|razorpay" help:"the payment provider: paysim (onsale's simulator: tests and demos), stripe (cards) or razorpay (UPI); docs/going-live.md says which keys and webhooks each needs"`
	ProviderURL    string        `env:"ONSALE_PROVIDER_URL" flag:"provider-url" help:"the provider's API address: required for paysim (payments are off without it); for stripe and razorpay empty means their public API (set it only for a stand-in in tests)"`
	ProviderKeyID  string        `env:"ONSALE_PROVIDER_KEY_ID" flag:"provider-key-id" help:"razorpay only: the key id (rzp_test_... or rzp_live_...); ONSALE_PROVIDER_KEY is its secret"`
	ProviderKey    string        `env:"ONSALE_PROVIDER_KEY" flag:"provider-key" secret:"true" help:"the provider's API key: paysim's key, Stripe's secret or restricted key (sk_test_/sk_live_/rk_...), or Razorpay's key secret"`
	WebhookSecret  string        `env:"ONSALE_WEBHOOK_SECRET" flag:"webhook-secret" secret:"true" help:"secret of the provider's webhook signatures (Stripe: the endpoint's whsec_...; Razorpay: the secret typed in when the webhook was added)"`
	LatePolicy     string        `env:"ONSALE_LATE_POLICY" flag:"late-policy" default:"refund" oneof:"refund|honour" help:"a payment for an expired hold: refund (keep the countdown) or honour (book it if the seats are still this hold's)"`
	SigningKey     string        `env:"ONSALE_SIGNING_KEY" flag:"signing-key" help:"PEM file of the core's Ed25519 key that signs account tokens, hold grants, ticket links and staff tokens (admitkey gen makes one); empty: a key made at start-up, so tokens die with the process and several cores cannot share them"`
	TicketKey      string        `env:"ONSALE_TICKET_KEY" flag:"ticket-key" help:"PEM file of the Ed25519 key that signs tickets (admitkey gen makes one)"`
	ReconcileAfter time.Duration `env:"ONSALE_RECONCILE_AFTER" flag:"reconcile-after" default:"10m" min:"1s" max:"24h" help:"ask the provider about bookings pending longer than this (duration; in production longer than a hold plus its extension)"`
	ExtendBy       time.Duration `env:"ONSALE_EXTEND_BY" flag:"extend-by" default:"2m" min:"1s" max:"1h" help:"what the one extension of a hold (at Pay) adds (duration)"`
	OutboxPoll     time.Duration `env:"ONSALE_OUTBOX_POLL" flag:"outbox-poll" default:"1s" min:"10ms" max:"1h" help:"how often an idle outbox worker looks for due jobs (duration)"`
	OutboxLease    time.Duration `env:"ONSALE_OUTBOX_LEASE" flag:"outbox-lease" default:"1m" min:"1s" max:"1h" help:"how long a claimed outbox job is one worker's before another may retry it (duration)"`
	SMTPAddr       string        `env:"ONSALE_SMTP_ADDR" flag:"smtp-addr" help:"SMTP relay for ticket emails (host:port); off when empty"`
	SMTPFrom       string        `env:"ONSALE_SMTP_FROM" flag:"smtp-from" default:"tickets@onsale.local" help:"From address of ticket emails"`
	SMTPUser       string        `env:"ONSALE_SMTP_USER" flag:"smtp-user" help:"SMTP user name; no authentication when empty"`
	SMTPPassword   string        `env:"ONSALE_SMTP_PASSWORD" flag:"smtp-password" secret:"true" help:"SMTP password"`
	SMTPTLS        string        `env:"ONSALE_SMTP_TLS" flag:"smtp-tls" default:"starttls" oneof:"starttls|tls|off" help:"how the SMTP relay is reached: starttls (required, port 587), tls (from the first byte, port 465) or off (plain: a relay on the same host only); the relay's certificate is checked against the system roots"`
	SMSURL         string        `env:"ONSALE_SMS_URL" flag:"sms-url" secret:"url" help:"HTTP SMS gateway for sign-in codes and ticket SMS (POST {\"to\",\"body\"}); off when empty"`
	PublicURL      string        `env:"ONSALE_PUBLIC_URL" flag:"public-url" default:"http://127.0.0.1:8080" help:"the gateway's public address (scheme://host[:port]), never the core's: ticket SMS and emails link to <url>/tickets/<booking>"`

	// Accounts: sign-in by phone and one-time code.
	SendsPerPhone    int           `env:"ONSALE_SIGNIN_SENDS_PER_PHONE" flag:"signin-sends-per-phone" default:"10" min:"1" max:"1000" help:"sign-in codes sent to one phone number per hour, asked for from any addresses (codes)"`
	SendsPhoneAddr   int           `env:"ONSALE_SIGNIN_SENDS_PER_PHONE_ADDR" flag:"signin-sends-per-phone-addr" default:"3" min:"1" max:"1000" help:"sign-in codes sent to one phone number per hour asked for from one address (codes; so one address cannot use up a fan's sends)"`
	SendsPerAddr     int           `env:"ONSALE_SIGNIN_SENDS_PER_ADDR" flag:"signin-sends-per-addr" default:"20" min:"1" max:"10000000" help:"sign-in codes asked for from one client address per hour (codes; a local crowd on one loopback address needs more)"`
	VerifiesPerAddr  int           `env:"ONSALE_SIGNIN_VERIFIES_PER_ADDR" flag:"signin-verifies-per-addr" default:"60" min:"1" max:"10000000" help:"sign-in code checks from one client address per hour, right or wrong (checks)"`
	AccountTTL       time.Duration `env:"ONSALE_ACCOUNT_TOKEN_TTL" flag:"account-token-ttl" default:"720h" min:"1m" max:"8760h" help:"life of an account token (duration)"`
	RefuseFromMemory bool          `env:"ONSALE_REFUSE_FROM_MEMORY" flag:"refuse-from-memory" default:"true" help:"refuse holds of seats the core knows are taken without a database statement (seatmap.Taken); false: every hold goes to PostgreSQL (a switch to rule the memory out, and to measure what it saves)"`
	// Operators: named accounts; the first is created at start-up.
	FirstOperator         string `env:"ONSALE_FIRST_OPERATOR" flag:"first-operator" help:"the first operator's name (an admin), created at start-up when there is no operator yet, with ONSALE_FIRST_OPERATOR_PASSWORD; it then creates the others (onsalectl operators add, or POST /operator/v1/operators); ignored once any operator exists"`
	FirstOperatorPassword string `env:"ONSALE_FIRST_OPERATOR_PASSWORD" flag:"first-operator-password" secret:"true" help:"the first operator's password, 12 to 72 bytes (by env or ONSALE_FIRST_OPERATOR_PASSWORD_FILE: a flag is visible in ps); change it after the first sign-in"`
	DevLogCodes           bool   `env:"ONSALE_DEV_LOG_CODES" flag:"dev-log-codes" default:"false" help:"development only: without ONSALE_SMS_URL, log sign-in codes at warn level instead of refusing sign-in (503)"`
}

// payments reports whether payments are on: a real provider always, the
// simulator when its address is given.
func (c *Config) payments() bool { return c.Provider != "paysim" || c.ProviderURL != "" }

// liveKeys reports whether the provider's key is a live one (real money).
func (c *Config) liveKeys() bool {
	switch c.Provider {
	case "stripe":
		return strings.HasPrefix(c.ProviderKey, "sk_live_") || strings.HasPrefix(c.ProviderKey, "rk_live_")
	case "razorpay":
		return strings.HasPrefix(c.ProviderKeyID, "rzp_live_")
	}
	return false
}

// Validate checks the rules across settings.
func (c *Config) Validate() error {
	switch {
	case c.DatabaseURL == "":
		return errors.New("DATABASE_URL (or -database-url) is required")
	case (c.AdmitPublicKey == "") == (c.AdmitJWKSURL == ""):
		return errors.New("give exactly one of ONSALE_ADMIT_PUBLIC_KEY and ONSALE_ADMIT_JWKS_URL")
	case c.payments() && (c.ProviderKey == "" || c.WebhookSecret == "" || c.TicketKey == ""):
		return errors.New("payments need ONSALE_PROVIDER_KEY, ONSALE_WEBHOOK_SECRET and ONSALE_TICKET_KEY")
	case c.Provider == "razorpay" && c.ProviderKeyID == "":
		return errors.New("razorpay needs ONSALE_PROVIDER_KEY_ID (its key id) beside ONSALE_PROVIDER_KEY (its secret)")
	case c.Provider != "razorpay" && c.ProviderKeyID != "":
		return errors.New("ONSALE_PROVIDER_KEY_ID is razorpay's; this core uses " + c.Provider)
	case c.AdminToken != "" && len(c.AdminToken) < http.MinDialsToken:
		return fmt.Errorf("ONSALE_ADMIN_TOKEN is %d bytes; at least %d are required", len(c.AdminToken), http.MinDialsToken)
	}
	if c.AdmitJWKSURL != "" {
		if err := admission.CheckJWKSURL(c.AdmitJWKSURL); err != nil {
			return fmt.Errorf("ONSALE_ADMIT_JWKS_URL: %w", err)
		}
	}
	if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("ONSALE_PUBLIC_URL %q: want the gateway's address, http(s)://host[:port][/path]", c.PublicURL)
	}
	if c.liveKeys() {
		// Real money: the provider's pages send fans back to the public
		// address, which must be TLS; and the key goes to the provider
		// itself, never to a stand-in.
		switch {
		case !strings.HasPrefix(c.PublicURL, "https://"):
			return fmt.Errorf("ONSALE_PUBLIC_URL %q: live keys need the public https address (the provider's pages send fans back to it)", c.PublicURL)
		case c.ProviderURL != "":
			return errors.New("ONSALE_PROVIDER_URL is set with live keys: a live key goes to the provider's own API only (leave it empty)")
		}
	}
	if c.AdminAddr != "" {
		if _, port, err := net.SplitHostPort(c.AdminAddr); err != nil {
			return fmt.Errorf("ONSALE_CORE_ADMIN_ADDR %q: %w", c.AdminAddr, err)
		} else if c.AdminAddr == c.Addr && port != "0" { // port 0: each listener gets a free one
			return errors.New("ONSALE_CORE_ADMIN_ADDR is the API's address: the operators' listener must be another")
		}
	}
	if c.FirstOperator != "" {
		n := core.NewOperator{Name: c.FirstOperator, Role: core.RoleAdmin, Password: c.FirstOperatorPassword}
		if err := n.Validate(); err != nil {
			return fmt.Errorf("ONSALE_FIRST_OPERATOR(_PASSWORD): %s", err.(*core.Error).Message)
		}
	}
	if c.SMTPAddr != "" {
		if _, port, err := net.SplitHostPort(c.SMTPAddr); err != nil {
			return fmt.Errorf("ONSALE_SMTP_ADDR %q: %w", c.SMTPAddr, err)
		} else if _, err := strconv.Atoi(port); err != nil {
			return fmt.Errorf("ONSALE_SMTP_ADDR %q: the port is not a number", c.SMTPAddr)
		}
	}
	return nil
}

// firstOperator creates the first operator (an admin) when the config
// names one and there is no operator yet. Two cores starting at once may
// both try: the name's uniqueness lets one win, and the other finds it.
func firstOperator(ctx context.Context, db *postgres.DB, c Config, log *slog.Logger) error {
	if c.FirstOperator == "" {
		return nil
	}
	n, err := db.CountOperators(ctx)
	if err != nil || n > 0 {
		return err
	}
	hash, err := http.HashPassword(c.FirstOperatorPassword, 0)
	if err != nil {
		return err
	}
	_, err = db.CreateOperator(ctx, core.NewOperator{Name: c.FirstOperator, Role: core.RoleAdmin}, hash,
		core.Actor{Operator: "system:first-operator"})
	switch {
	case core.ErrorCode(err) == core.EConflict:
		return nil
	case err != nil:
		return fmt.Errorf("first operator: %w", err)
	}
	log.Info("first operator created", "audit", "operator.create", "operator", c.FirstOperator, "role", core.RoleAdmin)
	return nil
}

// Main is the core program, testable: ParseFlags, Run until ctx ends, and
// Addr once listening.
type Main struct {
	Config Config
	Log    *slog.Logger
	ready  chan net.Addr
	addr   net.Addr
	// adminAddr is the operators' listener's, set before ready is sent.
	adminAddr net.Addr
}

// NewMain returns a Main; ParseFlags fills its Config.
func NewMain() *Main {
	return &Main{ready: make(chan net.Addr, 1)}
}

// ParseFlags reads the configuration from the environment and args (flags
// win) and validates it: it fails on any unparsable or out-of-range value.
func (m *Main) ParseFlags(args []string) error {
	if err := config.Load(&m.Config, args, os.LookupEnv); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	return nil
}

// AdminAddr is the operators' listener's address once Addr has returned;
// nil when ONSALE_CORE_ADMIN_ADDR is off.
func (m *Main) AdminAddr() net.Addr {
	m.Addr()
	return m.adminAddr
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
	config.Log(log, &m.Config)

	verifier, err := m.verifier(ctx, log)
	if err != nil {
		return err
	}
	// The keeper's rebuild feeds the memory of taken seats that refuses
	// holds which cannot win (seatmap.Taken), and with Redis the seat maps.
	keeper := &seatmap.Keeper{Taken: &seatmap.Taken{}, Log: log}
	opts := postgres.Options{MaxConns: int32(c.DBMaxConns), ReadMaxConns: int32(c.DBReadMaxConns), Logger: log, LatePolicy: core.LatePolicy(c.LatePolicy), ExtendBy: c.ExtendBy,
		IdleInTxTimeout: c.DBIdleTxTimeout, LockTimeout: c.DBLockTimeout, Taken: keeper.Taken}
	if !c.RefuseFromMemory {
		opts.Taken = nil // the keeper still keeps it (the metrics read it); no hold asks it
		log.Warn("holds are not refused from memory (ONSALE_REFUSE_FROM_MEMORY=false): every hold goes to PostgreSQL")
	}
	// A core started while PostgreSQL fails over (about 10 s without a
	// primary) or before Redis answers waits for them instead of exiting:
	// systemd's restart limit would otherwise leave it failed for good.
	if c.Redis != "" {
		maps, err := startup.Retry(ctx, log, "redis", redis.IsConfigError, func(ctx context.Context) (*redis.SeatMaps, error) {
			return redis.Open(ctx, c.Redis)
		})
		if err != nil {
			return err
		}
		defer maps.Close()
		keeper.Cache = maps
		opts.OnSeats = keeper.Changed
	}
	// postgres.Open applies the migrations too: each attempt runs them
	// under the pool's lock_timeout, so a migration waiting on a busy
	// table's lock fails after ONSALE_DB_LOCK_TIMEOUT and is tried again
	// rather than queueing every request behind its lock.
	db, err := startup.Retry(ctx, log, "postgresql", postgres.IsConfigError, func(ctx context.Context) (*postgres.DB, error) {
		return postgres.Open(ctx, c.DatabaseURL, opts)
	})
	if err != nil {
		return err
	}
	defer db.Close()
	keeper.DB = db

	keys, err := m.signingKeys(log)
	if err != nil {
		return err
	}
	// One client for every outbound call (the SMS gateway, the payment
	// provider), keeping enough idle connections per host for a crowd
	// signing in or paying at once: net/http's default keeps 2, so every
	// call past those dialled a new connection (at 400 sign-ins at once,
	// a tenth of the core's CPU went to dialling the SMS gateway).
	outbound := &nethttp.Client{Timeout: 10 * time.Second, Transport: pooledTransport()}
	var sms *notify.SMS
	if c.SMSURL != "" {
		sms = &notify.SMS{URL: c.SMSURL, HTTP: outbound}
	}
	met := metrics.New()
	met.CountSeatHolds(keeper.Taken.Decisions)
	met.CountVitals(db.Vitals)
	met.CountPool("writes", poolStats(db.Pool()))
	if db.ReadPool() != db.Pool() {
		met.CountPool("reads", poolStats(db.ReadPool()))
	}
	if err := firstOperator(ctx, db, c, log); err != nil {
		return err
	}
	srv := &http.Server{Catalog: db, Holds: db, Verifier: verifier, Ready: db.Ping, Log: log, Metrics: met, Layouts: db,
		Dials:     &http.Dials{Store: db, Token: c.AdminToken},
		Operators: &http.Operators{Store: db, Shows: db},
		Tokens:    keys, Accounts: &http.Accounts{Store: db, LogCodes: c.DevLogCodes, TokenTTL: c.AccountTTL,
			Limits: core.SignInLimits{SendsPerPhone: c.SendsPerPhone, SendsPerPhoneAddr: c.SendsPhoneAddr, SendsPerAddr: c.SendsPerAddr, VerifiesPerAddr: c.VerifiesPerAddr}}}
	if sms != nil {
		srv.Accounts.SMS = sms
	} else if c.DevLogCodes {
		log.Warn("no SMS gateway: sign-in codes are logged (ONSALE_DEV_LOG_CODES; development only)")
	} else {
		log.Warn("no SMS gateway (ONSALE_SMS_URL): sign-in answers 503")
	}
	if srv.Gate, err = m.gate(db, log, keys.PublicKey()); err != nil { // the gate (gate.go)
		return err
	}
	var worker *outbox.Worker
	var reconciler *outbox.Reconciler
	if c.payments() {
		tkey, err := admission.ReadPrivateKeyFile(c.TicketKey)
		if err != nil {
			return fmt.Errorf("ticket key: %w", err)
		}
		prov, err := c.paymentProvider(outbound)
		if err != nil {
			return err
		}
		worker = &outbox.Worker{DB: db, Provider: prov, Tickets: ticket.NewSigner(tkey), PublicURL: c.PublicURL,
			Links: keys, Lease: c.OutboxLease, Log: log, Metrics: met}
		if c.SMTPAddr != "" {
			host, port, _ := net.SplitHostPort(c.SMTPAddr) // checked by Validate
			p, _ := strconv.Atoi(port)
			sec, _ := notify.ParseSecurity(c.SMTPTLS) // oneof checked by Load
			worker.Mailer = &notify.Mailer{Host: host, Port: p, From: c.SMTPFrom, Username: c.SMTPUser, Password: c.SMTPPassword,
				Security: sec}
		}
		if sms != nil {
			worker.SMS = sms
		}
		reconciler = &outbox.Reconciler{DB: db, Provider: prov, Worker: worker, After: c.ReconcileAfter, Log: log, Metrics: met}
		srv.Payments = &http.Payments{Bookings: db, Keys: db, Provider: prov, Outbox: worker, Tickets: worker.Tickets,
			PublicURL: c.PublicURL}
		log.Info("payments on", "provider", prov.Name(), "api", c.ProviderURL, "webhook_path", http.WebhookPath(prov.Name()), "late_policy", c.LatePolicy, "smtp", c.SMTPAddr != "", "sms", c.SMSURL != "")
	}
	hs := newHTTPServer(srv.Handler(), log)
	// The operators' listener, bound before the API's reports ready (a
	// caller that saw Addr finds it too); its own server, so it still
	// answers while the API's is saturated.
	var admin *nethttp.Server
	var adminLn net.Listener
	if c.AdminAddr != "" {
		if adminLn, err = net.Listen("tcp", c.AdminAddr); err != nil {
			return fmt.Errorf("operators' listener (ONSALE_CORE_ADMIN_ADDR): %w", err)
		}
		defer adminLn.Close()
		admin = newHTTPServer(srv.AdminHandler(), log)
		m.adminAddr = adminLn.Addr()
		log.Info("operators' listener", "addr", adminLn.Addr().String())
	} else {
		log.Info("no operators' listener (ONSALE_CORE_ADMIN_ADDR): /metrics is off")
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return err
	}
	m.ready <- ln.Addr()
	log.Info("listening", "addr", ln.Addr().String())

	// Every background goroutine is started on workers and stops when bg
	// ends: shutdown cancels bg only after the last request is answered,
	// and returns only after each of them has returned.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	workers.Go(func() { sweeper.Run(bg, db, c.SweepInterval, log, met) })
	workers.Go(func() { keeper.Run(bg, seatmap.Interval) })
	if worker != nil {
		workers.Go(func() { worker.Run(bg, c.OutboxPoll) })
		workers.Go(func() { reconciler.Run(bg, max(c.ReconcileAfter/4, time.Second)) })
		workers.Go(func() { purge(bg, log, "idempotency keys", db.PurgeKeys) })
	}
	workers.Go(func() { purge(bg, log, "sign-in codes and limits", db.PurgeSignIn) })
	if c.AdmitJWKSURL != "" {
		workers.Go(func() {
			admission.RefreshJWKS(bg, verifier, nethttp.DefaultClient, c.AdmitJWKSURL, c.JWKSRefresh,
				func(err error) { log.Warn("jwks refresh failed; keeping the previous keys", "err", err) })
		})
	}
	if c.DebugAddr != "" {
		dbg := &nethttp.Server{Addr: c.DebugAddr, Handler: nethttp.DefaultServeMux, ReadHeaderTimeout: 5 * time.Second}
		workers.Go(func() {
			if err := dbg.ListenAndServe(); !errors.Is(err, nethttp.ErrServerClosed) {
				log.Warn("debug server stopped", "err", err)
			}
		})
		workers.Go(func() { <-bg.Done(); dbg.Close() })
	}
	stopWorkers := func() { stopBG(); workers.Wait() }

	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }() // joined below: Serve returns once hs is shut down
	adminc := make(chan error, 1)
	if admin != nil {
		go func() { adminc <- admin.Serve(adminLn) }()
	}
	select {
	case err := <-errc:
		if admin != nil {
			admin.Close()
		}
		stopWorkers()
		return err
	case err := <-adminc:
		hs.Close()
		<-errc
		stopWorkers()
		return fmt.Errorf("operators' listener: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	<-errc
	if admin != nil {
		err = errors.Join(err, admin.Shutdown(sctx))
	}
	stopWorkers()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// newHTTPServer is the core's HTTP server. Its read and write timeouts are
// core/http's, sized from the longest request (a card confirmation: see
// http.LongestRequest), so no answer is cut after money moved.
func newHTTPServer(h nethttp.Handler, log *slog.Logger) *nethttp.Server {
	return &nethttp.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       http.ReadTimeout,
		WriteTimeout:      http.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// purge deletes rows past their retention (idempotency keys after 24
// hours, sign-in codes and limit records after two hours), hourly.
func purge(ctx context.Context, log *slog.Logger, what string, del func(context.Context) (int64, error)) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := del(ctx); err != nil && ctx.Err() == nil {
			log.Warn("purging "+what+" failed", "err", err)
		} else if n > 0 {
			log.Info("purged "+what, "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// signingKeys loads the core's own key (ONSALE_SIGNING_KEY), or makes one
// for this process with a warning: its tokens then die with the process,
// and several cores would not accept each other's.
func (m *Main) signingKeys(log *slog.Logger) (*token.Keys, error) {
	if m.Config.SigningKey == "" {
		priv, err := admission.GenerateKey()
		if err != nil {
			return nil, err
		}
		log.Warn("no ONSALE_SIGNING_KEY: signing with a key made at start-up; account tokens, hold grants and ticket links end with this process")
		return token.New(priv), nil
	}
	priv, err := admission.ReadPrivateKeyFile(m.Config.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return token.New(priv), nil
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

// pooledTransport is net/http's default transport keeping up to 512 idle
// connections per host (its default: 2).
func pooledTransport() *nethttp.Transport {
	t := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 512
	return t
}

// poolStats reads a pool's figures for metrics.CountPool.
func poolStats(p *pgxpool.Pool) func() metrics.PoolStats {
	return func() metrics.PoolStats {
		s := p.Stat()
		return metrics.PoolStats{Acquired: s.AcquiredConns(), Idle: s.IdleConns(), Total: s.TotalConns(), Max: s.MaxConns(),
			Acquires: s.AcquireCount(), Waits: s.EmptyAcquireCount(), Canceled: s.CanceledAcquireCount(),
			AcquireTime: s.AcquireDuration(), WaitTime: s.EmptyAcquireWaitTime()}
	}
}

// site names this deployment at the payment provider: the host of its
// public address (checked by Validate).
func (c *Config) site() string {
	u, _ := url.Parse(c.PublicURL)
	return strings.ToLower(u.Host)
}

// paymentProvider opens the configured provider's adapter.
func (c *Config) paymentProvider(hc *nethttp.Client) (core.PaymentProvider, error) {
	switch c.Provider {
	case "stripe":
		p, err := stripe.New(stripe.Config{Key: c.ProviderKey, WebhookSecret: c.WebhookSecret, URL: c.ProviderURL, HTTP: hc, Site: c.site()})
		if err != nil {
			return nil, fmt.Errorf("ONSALE_PROVIDER=stripe: %w", err)
		}
		return p, nil
	case "razorpay":
		p, err := razorpay.New(razorpay.Config{KeyID: c.ProviderKeyID, KeySecret: c.ProviderKey, WebhookSecret: c.WebhookSecret,
			URL: c.ProviderURL, HTTP: hc, Site: c.site()})
		if err != nil {
			return nil, fmt.Errorf("ONSALE_PROVIDER=razorpay: %w", err)
		}
		return p, nil
	}
	p := paysim.New(c.ProviderURL, c.ProviderKey, []byte(c.WebhookSecret))
	p.HTTP = hc
	return p, nil
}
