// Command paysim is the payment-provider simulator: a Stripe-like API with
// idempotency keys, signed webhooks to the core, switchable misbehaviour,
// a ledger for the invariant checker, and an SMS sink (package
// loadtest/paysim). Environment variables configure it, flags override.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
	"github.com/onsale/onsale/shared/config"
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
		m.Log.Error("paysim stopped", "err", err)
		os.Exit(1)
	}
}

// Config is paysim's configuration (shared/config: defaults, then the
// environment, then flags). The behaviour starts from
// paysim.DefaultBehaviour, is overlaid with ONSALE_PAYSIM_BEHAVIOUR (JSON, as
// /_sim/config takes it), and then with the flags of single knobs.
type Config struct {
	Addr            string        `env:"ONSALE_PAYSIM_ADDR" flag:"addr" default:"127.0.0.1:18090" help:"listen address (host:port)"`
	APIKey          string        `env:"ONSALE_PAYSIM_API_KEY" flag:"api-key" default:"sk_test_paysim" secret:"true" help:"the Bearer API key clients must send"`
	WebhookSecret   string        `env:"ONSALE_PAYSIM_WEBHOOK_SECRET" flag:"webhook-secret" default:"whsec_test_paysim" secret:"true" help:"secret that signs webhooks"`
	WebhookURL      string        `env:"ONSALE_PAYSIM_WEBHOOK_URL" flag:"webhook-url" default:"http://127.0.0.1:8081/v1/webhooks/payments" help:"where webhooks are POSTed"`
	Dialect         string        `env:"ONSALE_PAYSIM_DIALECT" flag:"dialect" default:"paysim" oneof:"paysim|stripe|razorpay" help:"the API and webhook shape: paysim (its own), stripe (Stripe's PaymentIntents, Checkout Sessions, refunds, events and Stripe-Signature, for a core with ONSALE_PROVIDER=stripe) or razorpay (Razorpay's Payment Links, payments, refunds, events and X-Razorpay-Signature; Basic auth with a key id rzp_test_... and the API key as its secret)"`
	Control         bool          `env:"ONSALE_PAYSIM_CONTROL" flag:"control" default:"false" help:"serve /_sim/config and the /_sim/ test hooks, without auth"`
	ShutdownTimeout time.Duration `env:"ONSALE_PAYSIM_SHUTDOWN_TIMEOUT" flag:"shutdown-timeout" default:"10s" min:"1ms" max:"10m" help:"grace period for in-flight requests on SIGTERM"`
	LogLevel        slog.Level    `env:"ONSALE_LOG_LEVEL" flag:"log-level" default:"info" help:"debug, info, warn or error; logs are JSON on stderr"`
	BehaviourJSON   behaviourJSON `env:"ONSALE_PAYSIM_BEHAVIOUR" flag:"behaviour" help:"the behaviour as JSON, as PUT /_sim/config takes it (fields absent keep their value); the knobs' flags below override it"`
	Behaviour       knobs
}

// knobs are the behaviour's single settings (paysim.Behaviour). Their
// defaults are paysim.DefaultBehaviour's (a test keeps them equal); they
// have no variables of their own: ONSALE_PAYSIM_BEHAVIOUR sets any of them.
type knobs struct {
	UPIDelayMin        time.Duration `flag:"upi-delay-min" default:"1s" min:"0s" help:"shortest time a UPI payer takes to approve"`
	UPIDelayMax        time.Duration `flag:"upi-delay-max" default:"5s" min:"0s" help:"longest time a UPI payer takes to approve (uniform in between)"`
	UPISlowFraction    float64       `flag:"upi-slow-fraction" default:"0" min:"0" max:"1" help:"fraction of UPI payers who take -upi-slow-delay instead"`
	UPISlowDelay       time.Duration `flag:"upi-slow-delay" default:"2m" min:"0s" help:"how long the slow UPI payers take"`
	FailRate           float64       `flag:"fail-rate" default:"0" min:"0" max:"1" help:"fraction of payments that fail"`
	DuplicateRate      float64       `flag:"duplicate-rate" default:"0" min:"0" max:"1" help:"fraction of webhook events delivered twice, concurrently"`
	ReorderWindow      time.Duration `flag:"reorder-window" default:"0s" min:"0s" help:"hold each webhook a random time up to this long (0: send at once)"`
	TimeoutRate        float64       `flag:"timeout-rate" default:"0" min:"0" max:"1" help:"fraction of successful POSTs answered only after -timeout-delay"`
	TimeoutDelay       time.Duration `flag:"timeout-delay" default:"30s" min:"0s" help:"how long those answers are held back"`
	Outages            outages       `flag:"outage" help:"an outage window START/END (RFC 3339), or +OFFSET/LENGTH from start-up, e.g. +1m/30s; repeatable, or comma-separated"`
	WebhookRetryBase   time.Duration `flag:"webhook-retry-base" default:"1s" min:"0s" help:"wait after the first failed webhook attempt, doubled per attempt"`
	WebhookRetryMax    time.Duration `flag:"webhook-retry-max" default:"1m" min:"0s" help:"longest wait between webhook attempts"`
	WebhookMaxAttempts int           `flag:"webhook-max-attempts" default:"12" min:"0" help:"webhook attempts before a delivery is given up"`
}

// behaviour is the knobs as the simulator takes them.
func (k knobs) behaviour() paysim.Behaviour {
	return paysim.Behaviour{UPIDelayMin: k.UPIDelayMin, UPIDelayMax: k.UPIDelayMax, UPISlowFraction: k.UPISlowFraction,
		UPISlowDelay: k.UPISlowDelay, FailRate: k.FailRate, DuplicateRate: k.DuplicateRate, ReorderWindow: k.ReorderWindow,
		TimeoutRate: k.TimeoutRate, TimeoutDelay: k.TimeoutDelay, Outages: k.Outages.windows, WebhookRetryBase: k.WebhookRetryBase,
		WebhookRetryMax: k.WebhookRetryMax, WebhookMaxAttempts: k.WebhookMaxAttempts}
}

// setBehaviour sets the knobs from b.
func (k *knobs) setBehaviour(b paysim.Behaviour) {
	*k = knobs{UPIDelayMin: b.UPIDelayMin, UPIDelayMax: b.UPIDelayMax, UPISlowFraction: b.UPISlowFraction,
		UPISlowDelay: b.UPISlowDelay, FailRate: b.FailRate, DuplicateRate: b.DuplicateRate, ReorderWindow: b.ReorderWindow,
		TimeoutRate: b.TimeoutRate, TimeoutDelay: b.TimeoutDelay, Outages: outages{b.Outages}, WebhookRetryBase: b.WebhookRetryBase,
		WebhookRetryMax: b.WebhookRetryMax, WebhookMaxAttempts: b.WebhookMaxAttempts}
}

// Validate applies the behaviour's own rules (those across fields, such as
// upi_delay_min <= upi_delay_max).
func (c *Config) Validate() error { return c.Behaviour.behaviour().Validate() }

// behaviourJSON is ONSALE_PAYSIM_BEHAVIOUR: JSON overlaid on the knobs as it
// is read (the environment is read before the flags, so the knobs' flags
// win).
type behaviourJSON struct {
	into *knobs
	raw  string
}

func (j *behaviourJSON) UnmarshalText(text []byte) error {
	b := j.into.behaviour()
	if err := json.Unmarshal(text, &b); err != nil {
		return err
	}
	j.into.setBehaviour(b)
	j.raw = string(text)
	return nil
}

func (j behaviourJSON) MarshalText() ([]byte, error) { return []byte(j.raw), nil }

// outages are -outage windows; each value read adds its windows (so the
// flag is repeatable). Relative windows count from when they are read: the
// start-up. (A struct, not a slice: shared/config shows slices as []string.)
type outages struct{ windows []paysim.Window }

func (o *outages) UnmarshalText(text []byte) error {
	for _, v := range strings.Split(string(text), ",") {
		w, err := parseWindow(strings.TrimSpace(v), time.Now())
		if err != nil {
			return err
		}
		o.windows = append(o.windows, w)
	}
	return nil
}

func (o outages) MarshalText() ([]byte, error) {
	parts := make([]string, len(o.windows))
	for i, w := range o.windows {
		parts[i] = w.Start.Format(time.RFC3339) + "/" + w.End.Format(time.RFC3339)
	}
	return []byte(strings.Join(parts, ",")), nil
}

// parseWindow reads START/END (RFC 3339) or +OFFSET/LENGTH from start.
func parseWindow(v string, start time.Time) (paysim.Window, error) {
	from, to, ok := strings.Cut(v, "/")
	if !ok {
		return paysim.Window{}, errors.New("want START/END or +OFFSET/LENGTH")
	}
	if off, ok := strings.CutPrefix(from, "+"); ok {
		o, err1 := time.ParseDuration(off)
		l, err2 := time.ParseDuration(to)
		if err := errors.Join(err1, err2); err != nil {
			return paysim.Window{}, err
		}
		return paysim.Window{Start: start.Add(o), End: start.Add(o + l)}, nil
	}
	var w paysim.Window
	var err1, err2 error
	w.Start, err1 = time.Parse(time.RFC3339, from)
	w.End, err2 = time.Parse(time.RFC3339, to)
	return w, errors.Join(err1, err2)
}

// Main is the program, testable: ParseFlags, Run until ctx ends, and Addr
// once listening.
type Main struct {
	Config Config
	Log    *slog.Logger
	ready  chan net.Addr
	addr   net.Addr
	lookup func(string) (string, bool) // the environment
}

// NewMain returns a Main that reads the process's environment.
func NewMain() *Main {
	return &Main{ready: make(chan net.Addr, 1), lookup: os.LookupEnv}
}

// ParseFlags loads the configuration: defaults, the environment, then args;
// an error names any setting it cannot parse or that is out of range.
func (m *Main) ParseFlags(args []string) error {
	m.Config.BehaviourJSON.into = &m.Config.Behaviour
	if err := config.Load(&m.Config, args, m.lookup); err != nil {
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
	config.Log(log, &m.Config)

	sim, err := paysim.New(paysim.Config{APIKey: c.APIKey, WebhookSecret: c.WebhookSecret, WebhookURL: c.WebhookURL,
		Control: c.Control, Behaviour: c.Behaviour.behaviour(), Dialect: c.Dialect}, log)
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
