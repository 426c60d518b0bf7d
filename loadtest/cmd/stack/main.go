// Command stack runs onsale's apps (package loadtest/stack) until it is told
// to stop: the payment simulator, the core and the gateway from bin/, each
// on its own port, on a database of the run's own. The shell harness
// (deploy/local: `make up`, `make demo`, `make bench`) starts the apps only
// through it.
//
//	stack -dir .run/demo -database-url "$DATABASE_URL" -fresh-database onsale_demo \
//	      -redis "$REDIS_URL" -env-file .run/demo/stack.env
//
// Once every app answers it writes -env-file (shell export lines: the URLs,
// addresses, key files, admin token and pids, all prefixed STACK_) and waits
// for SIGINT/SIGTERM; then it stops the apps, drops a -fresh-database and
// exits. It exits non-zero, stopping the rest, when an app dies on its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the command's setup (shared/config: flags, DATABASE_URL and
// REDIS_URL from the environment; the URLs' passwords never reach -h or a log).
type config struct {
	Dir          string        `flag:"dir" default:".run/stack" help:"directory for the apps' logs and keys (keys/admit.key, keys/ticket.key, keys/admin.token)"`
	Bin          string        `flag:"bin" help:"directory of the binaries (default $ONSALE_BIN, else the repository's bin/)"`
	Apps         []string      `flag:"apps" default:"paysim,core,gateway" help:"apps to start, comma-separated (of paysim, core, gateway)"`
	DatabaseURL  string        `env:"DATABASE_URL" flag:"database-url" secret:"url" help:"PostgreSQL URL: the core's database, or with -fresh-database the server to make one on"`
	Fresh        string        `flag:"fresh-database" help:"make a database named PREFIX_<random> on -database-url's server for this run, dropped at exit"`
	KeepDB       bool          `flag:"keep-database" default:"false" help:"with -fresh-database: keep it at exit"`
	Spread       bool          `flag:"spread-event-ids" default:"false" help:"start event ids at a random point past one million (runs sharing one Redis database)"`
	RedisURL     string        `env:"REDIS_URL" flag:"redis" secret:"url" help:"Redis URL for the gateway and the core's seat-map cache (-redis '': none)"`
	PaysimAddr   string        `flag:"paysim-addr" help:"payment simulator listen address (default: a free port on 127.0.0.1)"`
	CoreAddr     string        `flag:"core-addr" help:"core listen address (default: a free port on 127.0.0.1)"`
	GatewayAddr  string        `flag:"gateway-addr" help:"gateway listen address (default: a free port on 127.0.0.1)"`
	CoreAdmin    string        `flag:"core-admin-addr" help:"the core's operators' listener, /metrics (default: a free port on 127.0.0.1)"`
	GatewayAdmin string        `flag:"gateway-admin-addr" help:"the gateway's operators' listener: the console /admin/, its API, /metrics (default: a free port on 127.0.0.1)"`
	AdminToken   string        `env:"ONSALE_ADMIN_TOKEN" flag:"admin-token" secret:"true" help:"the gateway's admin token (default: random; written to DIR/keys/admin.token 0600; by env or ONSALE_ADMIN_TOKEN_FILE: a flag is visible in ps)"`
	PaysimEnv    envList       `flag:"paysim-env" help:"KEY=VALUE for the payment simulator's environment (repeatable)"`
	CoreEnv      envList       `flag:"core-env" help:"KEY=VALUE for the core's environment (repeatable)"`
	GatewayEnv   envList       `flag:"gateway-env" help:"KEY=VALUE for the gateway's environment (repeatable)"`
	EnvFile      string        `flag:"env-file" help:"write the stack's STACK_* export lines here once every app is ready"`
	Ready        time.Duration `flag:"ready-timeout" default:"60s" min:"1s" max:"30m" help:"how long each app may take to become ready"`
}

// Validate refuses an unknown app and a run with nothing to start.
func (c *config) Validate() error {
	if len(c.Apps) == 0 {
		return errors.New("-apps: name at least one of paysim, core, gateway")
	}
	for _, a := range c.Apps {
		if a != stack.Paysim && a != stack.Core && a != stack.Gateway {
			return fmt.Errorf("-apps: unknown app %q (paysim, core, gateway)", a)
		}
	}
	return nil
}

// envList is a repeatable KEY=VALUE flag: each use adds one entry (a value
// may hold commas).
type envList []string

func (l *envList) MarshalText() ([]byte, error) { return []byte(strings.Join(*l, " ")), nil }

func (l *envList) UnmarshalText(b []byte) error {
	if !strings.Contains(string(b), "=") {
		return errors.New("want KEY=VALUE")
	}
	*l = append(*l, string(b))
	return nil
}

func main() {
	var c config
	if code := shconfig.Status("stack", &c); code >= 0 {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) (err error) {
	o := stack.Options{Bin: c.Bin, Dir: c.Dir, Apps: c.Apps, DatabaseURL: c.DatabaseURL, RedisURL: c.RedisURL,
		AdminToken: c.AdminToken, PaysimAddr: c.PaysimAddr, CoreAddr: c.CoreAddr, GatewayAddr: c.GatewayAddr,
		CoreAdminAddr: c.CoreAdmin, GatewayAdminAddr: c.GatewayAdmin,
		PaysimEnv: c.PaysimEnv, CoreEnv: c.CoreEnv, GatewayEnv: c.GatewayEnv, Ready: c.Ready}
	if c.Fresh != "" {
		url, drop, err := stack.FreshDatabase(ctx, c.DatabaseURL, c.Fresh)
		if err != nil {
			return err
		}
		o.DatabaseURL = url
		if !c.KeepDB {
			defer func() {
				if derr := drop(context.Background()); derr != nil {
					err = errors.Join(err, fmt.Errorf("drop the run's database: %w", derr))
				}
			}()
		}
	}
	s, err := stack.Start(ctx, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Stop()) }()
	if c.Spread && s.Core != nil {
		if err := stack.SpreadEventIDs(ctx, o.DatabaseURL); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "keys", "admin.token"), []byte(s.AdminToken), 0o600); err != nil {
		return err
	}
	if c.EnvFile != "" {
		if err := writeEnv(c.EnvFile, o.DatabaseURL, s); err != nil {
			return err
		}
		defer os.Remove(c.EnvFile)
	}
	fmt.Fprintf(os.Stderr, "stack: ready: paysim %s, core %s, gateway %s; operators: core %s, gateway %s/admin/ (logs in %s)\n",
		orNone(s.PaysimURL), orNone(s.CoreURL), orNone(s.GatewayURL), orNone(s.CoreAdminURL), orNone(s.GatewayAdminURL), o.Dir)
	died := make(chan string, 3)
	for _, p := range []*stack.Proc{s.Paysim, s.Core, s.Gateway} {
		if p != nil {
			go func() { <-p.Done(); died <- p.Name }()
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case name := <-died:
		return fmt.Errorf("%s exited on its own (see %s)", name, filepath.Join(o.Dir, name+".log"))
	}
}

func orNone(s string) string {
	if s == "" {
		return "(not started)"
	}
	return s
}

// writeEnv writes the stack as shell export lines, atomically (a script
// waiting for the file never reads half of it).
func writeEnv(path, dbURL string, s *stack.Stack) error {
	var b strings.Builder
	put := func(k, v string) { fmt.Fprintf(&b, "export STACK_%s=%s\n", k, quote(v)) }
	put("DATABASE_URL", dbURL)
	put("PAYSIM_URL", s.PaysimURL)
	put("CORE_URL", s.CoreURL)
	put("GATEWAY_URL", s.GatewayURL)
	put("CORE_ADMIN_URL", s.CoreAdminURL)       // the core's /metrics
	put("GATEWAY_ADMIN_URL", s.GatewayAdminURL) // the console /admin/, its API and the gateway's /metrics
	addr := func(p *stack.Proc) string {
		if p == nil {
			return ""
		}
		return p.Addr
	}
	put("PAYSIM_ADDR", addr(s.Paysim))
	put("CORE_ADDR", addr(s.Core))
	put("GATEWAY_ADDR", addr(s.Gateway))
	put("ADMIN_TOKEN", s.AdminToken)             // the gateways' service token
	put("OPERATOR_NAME", s.OperatorName)         // the console's sign-in: this name,
	put("OPERATOR_PASSWORD", s.OperatorPassword) // this password (also in DIR/keys/operator.password)
	put("OPERATOR_TOKEN", s.OperatorToken)       // the load tools' session token
	put("ADMIT_KEY", s.AdmitKey)
	put("TICKET_KEY", s.TicketKey)
	put("TICKET_PUB", s.TicketPub)
	put("SIGNING_KEY", s.SigningKey)
	var pids []string
	for _, p := range []*stack.Proc{s.Paysim, s.Core, s.Gateway} {
		if p != nil {
			pids = append(pids, fmt.Sprintf("%s=%d", p.Name, p.Pid()))
		}
	}
	put("PIDS", strings.Join(pids, ","))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// quote is v in single quotes for sh.
func quote(v string) string { return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'" }
