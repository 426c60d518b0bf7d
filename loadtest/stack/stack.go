// Package stack starts onsale's apps (the payment simulator, the core and
// the gateway) as the real binaries from bin/, the one way every harness
// starts them: `make up`, `make demo`, `make bench` (through cmd/stack) and
// the end-to-end tests (loadtest/proof, loadtest/browser).
//
// Each app listens on a port of its own (a free one unless the caller names
// it), logs to Dir, and is waited for on its health route. The database and
// Redis are given by the caller (PostgreSQL and Redis are services, started
// by deploy/local/stack.sh); FreshDatabase makes a database of the run's own
// so runs never see each other's rows.
package stack

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/onsale/onsale/shared/account"
	"github.com/onsale/onsale/shared/admission"
)

// The apps, by binary name.
const (
	Paysim  = "paysim"
	Core    = "core"
	Gateway = "gateway"
)

// The payment simulator's credentials: the core is given the same ones.
const (
	ProviderKey   = "sk_test_paysim"
	WebhookSecret = "whsec_test_paysim"
)

// Options says which apps to start and how. Env entries are KEY=VALUE and
// override what Start sets (and the inherited environment).
type Options struct {
	Bin         string   // directory of the binaries; "" = BinDir()
	Dir         string   // keys and logs (required)
	Apps        []string // of Paysim, Core, Gateway; nil = all three
	DatabaseURL string   // the core's database (required with Core)
	RedisURL    string   // the gateway's (required with Gateway) and the core's seat-map cache ("" = none)
	PaysimURL   string   // a payment simulator run by the caller (e.g. in process); Paysim is then not started
	AdminToken  string   // the gateways' service token (their reads of saved dials); "" = a random one
	// OperatorPassword is the password of the stack's first operator
	// (OperatorName, an admin, created by the core); "" = a random one.
	OperatorPassword string

	PaysimAddr, CoreAddr, GatewayAddr string // listen addresses; "" = a free port on 127.0.0.1
	// The operators' listeners (/metrics; the gateway's console and admin
	// API); "" = a free port on 127.0.0.1.
	CoreAdminAddr, GatewayAdminAddr string

	PaysimEnv, CoreEnv, GatewayEnv []string
	Ready                          time.Duration // how long each app may take to answer; 0 = 60 s
	// Provider is the payment provider the core uses, and the simulator
	// answers as: "" or "paysim" (the simulator's own shape), "stripe"
	// (cards) or "razorpay" (UPI): the core's real adapter against the
	// simulator's dialect of that provider, and the booking page offering
	// only what it takes.
	Provider string
}

// ProviderEnv is what a stack of provider sets on each app beside the
// rest: the simulator's dialect and webhook URL (to the core at coreURL),
// the core's provider, the gateways' ways to pay. Empty for paysim.
func ProviderEnv(provider, coreURL string) (paysim, core, gateway []string) {
	switch provider {
	case "", "paysim":
		return nil, nil, nil
	case "razorpay":
		core = []string{"ONSALE_PROVIDER_KEY_ID=rzp_test_onsale"} // the simulator's API key is its secret
		gateway = []string{"ONSALE_PAYMENT_METHODS=upi"}
	default:
		gateway = []string{"ONSALE_PAYMENT_METHODS=card"}
	}
	paysim = []string{"ONSALE_PAYSIM_DIALECT=" + provider, "ONSALE_PAYSIM_WEBHOOK_URL=" + coreURL + "/v1/webhooks/" + provider}
	return paysim, append(core, "ONSALE_PROVIDER="+provider), gateway
}

// Keys are the run's key files (PEM). The gateway signs admit tokens with
// AdmitKey, the core trusts AdmitPub; the core signs tickets with TicketKey
// (TicketPub verifies them, e.g. bin/ticketverify). SigningKey is the core's
// own key (account tokens, hold grants, ticket links, staff tokens);
// SigningPub verifies them. Every gateway of a topology shares AdmitKey,
// every core SigningKey and TicketKey.
type Keys struct {
	AdmitKey, AdmitPub, TicketKey, TicketPub string
	SigningKey, SigningPub                   string
}

// Stack is a set of running apps. The URLs of apps not started are empty.
// The admin URLs are the operators' listeners (ONSALE_CORE_ADMIN_ADDR,
// ONSALE_ADMIN_ADDR), each on a free port of its own: /metrics, and the
// gateway's console and admin API, are served there and nowhere else.
type Stack struct {
	PaysimURL, CoreURL, GatewayURL string
	CoreAdminURL, GatewayAdminURL  string
	AdminToken                     string
	// The stack's operator (an admin the core creates at its first start):
	// its name and password (the console's sign-in) and a session token
	// minted with the signing key (the load tools' dials).
	OperatorName, OperatorPassword, OperatorToken string
	Keys
	// The processes, nil when not started (started in this order, stopped in reverse).
	Paysim, Core, Gateway *Proc
}

// BinDir is where the binaries are: $ONSALE_BIN (set by `make test`), else
// the bin/ directory of the repository holding the working directory.
func BinDir() string {
	if d := os.Getenv("ONSALE_BIN"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return "bin"
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, "bin")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, "bin")
		}
	}
}

// Binary returns the path of bin/name, or an error telling how to build it:
// the harness never builds (`make build` is the only build).
func Binary(bin, name string) (string, error) {
	if bin == "" {
		bin = BinDir()
	}
	p := filepath.Join(bin, name)
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no binary %s: run `make build` first (or set ONSALE_BIN to the directory of the binaries)", p)
	}
	return p, nil
}

// FreeAddr returns 127.0.0.1:port for a port nothing listens on right now.
// The port is free when FreeAddr returns, not when the app binds it: another
// process may take it in between (Start picks again when that happens).
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startAttempts bounds Start's tries: an app that exits before it is ready
// on a port Start picked for it most likely lost the port to another process
// between FreeAddr and its bind (the pick-then-close race), so Start stops
// what it started and tries again on new ports.
const startAttempts = 3

// errExited: the app exited before it answered on its health route.
var errExited = errors.New("exited before it was ready")

// pickedPortError is an app that exited before it was ready on a port Start
// picked for it (the caller named no address): worth another try.
type pickedPortError struct{ err error }

func (e *pickedPortError) Error() string { return e.err.Error() }
func (e *pickedPortError) Unwrap() error { return e.err }

// Start starts the apps and waits until each answers. On error, whatever it
// started is stopped again.
func Start(ctx context.Context, o Options) (*Stack, error) {
	for attempt := 1; ; attempt++ {
		s, err := startOnce(ctx, o)
		var picked *pickedPortError
		if err == nil || attempt == startAttempts || ctx.Err() != nil || !errors.As(err, &picked) {
			return s, err
		}
		log.Printf("stack: %v\nstack: its port was picked by Start and may have been taken before it bound it; starting the apps again on new ports (try %d of %d)",
			err, attempt+1, startAttempts)
	}
}

func startOnce(ctx context.Context, o Options) (_ *Stack, err error) {
	apps := o.Apps
	if apps == nil {
		apps = []string{Paysim, Core, Gateway}
	}
	has := func(app string) bool { return slices.Contains(apps, app) }
	if o.Dir == "" {
		return nil, errors.New("stack: Options.Dir is required")
	}
	if o.Ready == 0 {
		o.Ready = 60 * time.Second
	}
	if has(Paysim) && o.PaysimURL != "" {
		return nil, errors.New("stack: PaysimURL names a running simulator; do not also start one")
	}
	// s, not the result: `return nil, err` must not hide it from the defers
	s := &Stack{PaysimURL: o.PaysimURL, AdminToken: o.AdminToken}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if s.Keys, err = WriteKeys(o.Dir); err != nil {
		return nil, err
	}
	if s.AdminToken == "" {
		s.AdminToken = "admin-" + randomHex(16) // over the gateway's minimum (gwhttp.MinAdminToken)
	}
	if s.OperatorName, s.OperatorPassword, s.OperatorToken, err = StackOperator(o.Dir, s.Keys, o.OperatorPassword); err != nil {
		return nil, err
	}
	addrs := map[string]*string{Paysim: &o.PaysimAddr, Core: &o.CoreAddr, Gateway: &o.GatewayAddr}
	picked := map[string]bool{}
	for _, app := range apps {
		a, ok := addrs[app]
		if !ok {
			return nil, fmt.Errorf("stack: unknown app %q", app)
		}
		if *a == "" {
			if *a, err = FreeAddr(); err != nil {
				return nil, err
			}
			picked[app] = true
		}
	}
	// the app that failed (the last one started) exited early on a port
	// picked here: Start tries again
	defer func() {
		if err == nil || !errors.Is(err, errExited) {
			return
		}
		for _, p := range []*Proc{s.Gateway, s.Core, s.Paysim} {
			if p != nil {
				if picked[p.Name] {
					err = &pickedPortError{err}
				}
				return
			}
		}
	}()
	// The operators' listeners: a free port unless given (several stacks
	// and topologies share the machine: no fixed port would do).
	admins := map[string]string{Core: o.CoreAdminAddr, Gateway: o.GatewayAdminAddr}
	for _, app := range []string{Core, Gateway} {
		if has(app) && admins[app] == "" {
			if admins[app], err = FreeAddr(); err != nil {
				return nil, err
			}
			picked[app] = true
		}
	}
	coreURL := "http://" + o.CoreAddr
	provPaysim, provCore, provGateway := ProviderEnv(o.Provider, coreURL)
	if has(Paysim) {
		s.PaysimURL = "http://" + o.PaysimAddr
		env := append(PaysimEnv(o.PaysimAddr, coreURL), provPaysim...)
		if s.Paysim, err = start(ctx, o, Paysim, append(env, o.PaysimEnv...), s.PaysimURL+"/healthz"); err != nil {
			return nil, err
		}
	}
	if has(Core) {
		if o.DatabaseURL == "" {
			return nil, errors.New("stack: the core needs Options.DatabaseURL")
		}
		s.CoreURL = coreURL
		// Ticket links point at the gateway's pages, never at the core:
		// its address is picked above, before any app starts.
		publicURL := coreURL
		if has(Gateway) {
			publicURL = "http://" + o.GatewayAddr
		}
		env := CoreEnv(s.Keys, o.CoreAddr, o.DatabaseURL, o.RedisURL, publicURL, s.PaysimURL)
		env = append(env, "ONSALE_ADMIN_TOKEN="+s.AdminToken, // the gateway reads saved dials from the core with it
			"ONSALE_CORE_ADMIN_ADDR="+admins[Core])
		env = append(env, OperatorEnv(s.OperatorName, s.OperatorPassword)...)
		env = append(env, provCore...)
		s.CoreAdminURL = "http://" + admins[Core]
		if s.Core, err = start(ctx, o, Core, append(env, o.CoreEnv...), coreURL+"/readyz"); err != nil {
			return nil, err
		}
	}
	if has(Gateway) {
		if o.RedisURL == "" {
			return nil, errors.New("stack: the gateway needs Options.RedisURL")
		}
		s.GatewayURL = "http://" + o.GatewayAddr
		env := GatewayEnv(s.Keys, o.GatewayAddr, o.RedisURL, coreURL, randomHex(32), s.AdminToken, s.PaysimURL)
		env = append(env, "ONSALE_ADMIN_ADDR="+admins[Gateway])
		env = append(env, provGateway...)
		s.GatewayAdminURL = "http://" + admins[Gateway]
		if s.Gateway, err = start(ctx, o, Gateway, append(env, o.GatewayEnv...), s.GatewayURL+"/readyz"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// OperatorName is the first operator of every local stack and topology.
const OperatorName = "ops"

// OperatorTTL is the life of the stack's own operator token: a stack left
// up (make up) outlives an operator's working day.
const OperatorTTL = 7 * 24 * time.Hour

// StackOperator returns the stack's operator: its name, its password (the
// one given, else the one kept in dir/keys/operator.password from an
// earlier start, else a new random one, kept there 0600) and a session
// token signed with the stack's signing key (the core's own key, so the
// core and the gateways take it as one the core signed at sign-in).
func StackOperator(dir string, k Keys, password string) (name, pw, token string, err error) {
	path := filepath.Join(dir, "keys", "operator.password")
	if password == "" {
		if b, err := os.ReadFile(path); err == nil && len(b) >= 12 {
			password = strings.TrimSpace(string(b))
		} else {
			password = "ops-" + randomHex(12)
		}
	}
	if err := os.WriteFile(path, []byte(password), 0o600); err != nil {
		return "", "", "", err
	}
	key, err := admission.ReadPrivateKeyFile(k.SigningKey)
	if err != nil {
		return "", "", "", err
	}
	token, _, err = account.NewSigner(key).Operator(OperatorName, "admin", OperatorTTL)
	return OperatorName, password, token, err
}

// OperatorEnv is the core's environment that creates the first operator.
func OperatorEnv(name, password string) []string {
	return []string{"ONSALE_FIRST_OPERATOR=" + name, "ONSALE_FIRST_OPERATOR_PASSWORD=" + password}
}

// WriteKeys writes the admit, ticket and signing key pairs into dir/keys,
// once: keys already there are kept, so a restarted stack keeps trusting
// the tokens and tickets it signed before.
func WriteKeys(dir string) (Keys, error) {
	var ks Keys
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o755); err != nil {
		return ks, err
	}
	for _, k := range []struct {
		name      string
		priv, pub *string
	}{{"admit", &ks.AdmitKey, &ks.AdmitPub}, {"ticket", &ks.TicketKey, &ks.TicketPub}, {"signing", &ks.SigningKey, &ks.SigningPub}} {
		name := k.name
		*k.priv = filepath.Join(dir, "keys", name+".key")
		*k.pub = *k.priv + ".pub"
		if _, err := os.Stat(*k.priv); err == nil {
			if _, err := os.Stat(*k.pub); err == nil {
				continue
			}
		}
		key, err := admission.GenerateKey()
		if err != nil {
			return ks, err
		}
		if err := admission.WritePrivateKeyFile(*k.priv, key); err != nil {
			return ks, err
		}
		if err := admission.WritePublicKeyFile(*k.pub, key.Public().(ed25519.PublicKey)); err != nil {
			return ks, err
		}
	}
	return ks, nil
}

// PaysimEnv is the payment simulator's environment: it listens on addr and
// posts its webhooks to coreURL (a core, or a load balancer in front of
// several).
func PaysimEnv(addr, coreURL string) []string {
	return []string{"ONSALE_PAYSIM_ADDR=" + addr, "ONSALE_PAYSIM_CONTROL=true", "ONSALE_PAYSIM_API_KEY=" + ProviderKey,
		"ONSALE_PAYSIM_WEBHOOK_SECRET=" + WebhookSecret, "ONSALE_PAYSIM_WEBHOOK_URL=" + coreURL + "/v1/webhooks/payments"}
}

// CoreEnv is a core's environment: it listens on addr, on the database
// dbURL, with redis (its seat-map cache; "" = none), the gateways' public
// URL in its ticket links, and payments through paysimURL ("" = off).
func CoreEnv(k Keys, addr, dbURL, redis, publicURL, paysimURL string) []string {
	env := []string{"DATABASE_URL=" + dbURL, "ONSALE_CORE_ADDR=" + addr, "ONSALE_REDIS=" + redis,
		"ONSALE_ADMIT_PUBLIC_KEY=" + k.AdmitPub, "ONSALE_ADMIT_JWKS_URL=", "ONSALE_TICKET_KEY=" + k.TicketKey,
		"ONSALE_SIGNING_KEY=" + k.SigningKey, "ONSALE_PUBLIC_URL=" + publicURL}
	if paysimURL != "" {
		env = append(env, "ONSALE_PROVIDER_URL="+paysimURL, "ONSALE_PROVIDER_KEY="+ProviderKey,
			"ONSALE_WEBHOOK_SECRET="+WebhookSecret, "ONSALE_SMS_URL="+paysimURL+"/sms")
	}
	return env
}

// GatewayEnv is a gateway's environment: it listens on addr, with redis,
// in front of coreURL, signing admit tokens with k.AdmitKey and queue
// tokens (and visitor cookies) with queueSecret; gateways that serve the
// same fans share queueSecret, the admit key and the admin token.
func GatewayEnv(k Keys, addr, redis, coreURL, queueSecret, adminToken, paysimURL string) []string {
	env := []string{"ONSALE_GATEWAY_ADDR=" + addr, "ONSALE_REDIS=" + redis, "ONSALE_CORE_URL=" + coreURL,
		"ONSALE_ADMIT_KEYS=" + k.AdmitKey, "ONSALE_QUEUE_SECRET=" + queueSecret, "ONSALE_ADMIN_TOKEN=" + adminToken}
	if paysimURL != "" {
		env = append(env, "ONSALE_CHECKOUT_URL="+paysimURL+"/checkout")
	}
	return env
}

// RandomHex is n random bytes in hex (secrets and tokens of a run).
func RandomHex(n int) string { return randomHex(n) }

// Stop stops the apps, gateway first (SIGTERM, then SIGKILL after 30 s).
func (s *Stack) Stop() error {
	var errs []error
	for _, p := range []*Proc{s.Gateway, s.Core, s.Paysim} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}

// App says how to run one process: which binary, with what environment,
// where it listens and how to tell it is ready. The topology starts several
// cores and gateways, and HAProxy, this way.
type App struct {
	Name   string        // what it is called in messages and its log file (Dir/Name.log); "" = Binary
	Binary string        // a binary in Bin (Paysim, Core, Gateway, ...), or an absolute path
	Bin    string        // directory of the binaries; "" = BinDir()
	Args   []string      // command-line arguments
	Env    []string      // KEY=VALUE over this process's environment less DATABASE_URL and REDIS_URL
	Addr   string        // host:port it listens on
	Ready  string        // URL answering 200 once it is ready; "" = http://Addr/readyz
	Dir    string        // directory of its log (required)
	Wait   time.Duration // how long it may take to answer Ready; 0 = 60 s
	// ReadyClient makes the ready checks; nil = http.DefaultClient. A
	// gateway that requires a PROXY header from 127.0.0.1 is checked from
	// another loopback address.
	ReadyClient *http.Client
}

// NewProc resolves the app's binary and returns its handle, not started.
func NewProc(a App) (*Proc, error) {
	path := a.Binary
	if !filepath.IsAbs(path) {
		var err error
		if path, err = Binary(a.Bin, a.Binary); err != nil {
			return nil, err
		}
	}
	if a.Dir == "" {
		return nil, errors.New("stack: App.Dir is required")
	}
	if a.Name == "" {
		a.Name = filepath.Base(a.Binary)
	}
	if a.Ready == "" {
		a.Ready = "http://" + a.Addr + "/readyz"
	}
	if a.Wait == 0 {
		a.Wait = 60 * time.Second
	}
	return &Proc{Name: a.Name, Addr: a.Addr, path: path, args: a.Args, env: childEnv(a.Env), ready: a.Ready,
		log: filepath.Join(a.Dir, a.Name+".log"), wait: a.Wait, client: a.ReadyClient}, nil
}

// StartApp starts one app and waits until it answers on a.Ready.
func StartApp(ctx context.Context, a App) (*Proc, error) {
	p, err := NewProc(a)
	if err != nil {
		return nil, err
	}
	return p, p.Start(ctx)
}

// Proc is one app's process. Its methods may be called from several
// goroutines (a fault runner kills what a test reads the pid of). Start
// may be called again once the process has exited (after Kill or Stop): it
// runs the same binary with the same arguments and environment, on the same
// address.
type Proc struct {
	Name   string
	Addr   string // host:port it listens on
	path   string
	args   []string
	env    []string
	ready  string // URL answering 200 when the app is ready
	log    string
	wait   time.Duration
	client *http.Client

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

func start(ctx context.Context, o Options, name string, env []string, ready string) (*Proc, error) {
	addr := strings.TrimPrefix(ready, "http://")
	return StartApp(ctx, App{Name: name, Binary: name, Bin: o.Bin, Env: env, Addr: addr[:strings.IndexByte(addr, '/')],
		Ready: ready, Dir: o.Dir, Wait: o.Ready})
}

// childEnv is our environment without the service URLs an app would fall
// back to (the core reads REDIS_URL when ONSALE_REDIS is empty), then env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "REDIS_URL=") {
			out = append(out, kv)
		}
	}
	return append(out, env...) // later entries win (os/exec keeps the last of duplicates)
}

// Log is the path of the app's log file (stdout and stderr, appended to
// across restarts).
func (p *Proc) Log() string { return p.log }

// Start starts the app (again, after it exited) and waits until it answers
// on its health route. It refuses a process that is still running.
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.runningLocked() {
		p.mu.Unlock()
		return fmt.Errorf("start %s: already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// The app dies with its starter (a test binary killed at its timeout, a
	// SIGKILLed bin/stack) instead of holding its port and database.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	if err := waitReady(ctx, p.client, p.ready, p.wait, done); err != nil {
		// this start's process, not whatever p runs by now (a concurrent
		// Start after this one's exited)
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("%s (log %s): %w%s", p.Name, p.log, err, tail(p.log))
	}
	return nil
}

// Pid is the app's process id (0 when never started; the last one's after
// it exited).
func (p *Proc) Pid() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Done is closed when the current process has exited (a restart makes a
// new one; nil before the first Start).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process was started and has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Proc) runningLocked() bool {
	if p.cmd == nil || p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// live returns the running process and its done channel, or nil.
func (p *Proc) live() (*os.Process, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return nil, nil
	}
	return p.cmd.Process, p.done
}

// Signal sends sig to the running process: SIGSTOP freezes it (a long GC
// pause, a partition seen from outside), SIGCONT thaws it. A process that
// is not running is an error.
func (p *Proc) Signal(sig os.Signal) error {
	proc, _ := p.live()
	if proc == nil {
		return fmt.Errorf("signal %s: not running", p.Name)
	}
	return proc.Signal(sig)
}

// Kill sends SIGKILL (no cleanup of any kind: the crash experiments) and
// waits for the process to be gone. A process not running is left alone.
func (p *Proc) Kill() error {
	proc, done := p.live()
	if proc == nil {
		return nil
	}
	err := proc.Kill()
	<-done
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	return err
}

// Stop sends SIGTERM (graceful shutdown) and waits; SIGKILL after 30 s. A
// frozen process (SIGSTOP) is thawed so that it can act on the SIGTERM.
func (p *Proc) Stop() error {
	proc, done := p.live()
	if proc == nil {
		return nil
	}
	_ = proc.Signal(syscall.SIGTERM)
	_ = proc.Signal(syscall.SIGCONT)
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		// the process SIGTERM went to, not whatever p runs by now
		if err := proc.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		<-done
		return nil
	}
}

// waitReady polls url until it answers 200, the process exits, or d passes.
func waitReady(ctx context.Context, client *http.Client, url string, d time.Duration, exited <-chan struct{}) error {
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %d", url, resp.StatusCode)
		}
		last = err
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %v", d, last)
		case <-tick.C:
		}
	}
}

// tail is the end of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n--- end of " + path + ":\n" + string(b)
}
