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
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

type config struct {
	o        stack.Options
	apps     string
	fresh    string
	spread   bool
	envFile  string
	keepDB   bool
	database string
}

func main() {
	var c config
	flag.StringVar(&c.o.Dir, "dir", ".run/stack", "directory for the apps' logs and keys (keys/admit.key, keys/ticket.key, keys/admin.token)")
	flag.StringVar(&c.o.Bin, "bin", "", "directory of the binaries (default $ONSALE_BIN, else the repository's bin/)")
	flag.StringVar(&c.apps, "apps", "paysim,core,gateway", "apps to start, comma-separated")
	flag.StringVar(&c.database, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL: the core's database, or with -fresh-database the server to make one on (env DATABASE_URL)")
	flag.StringVar(&c.fresh, "fresh-database", "", "make a database named PREFIX_<random> on -database-url's server for this run, dropped at exit")
	flag.BoolVar(&c.keepDB, "keep-database", false, "with -fresh-database: keep it at exit")
	flag.BoolVar(&c.spread, "spread-event-ids", false, "start event ids at a random point past one million (runs sharing one Redis database)")
	flag.StringVar(&c.o.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL for the gateway and the core's seat-map cache (env REDIS_URL)")
	flag.StringVar(&c.o.PaysimAddr, "paysim-addr", "", "payment simulator listen address (default: a free port on 127.0.0.1)")
	flag.StringVar(&c.o.CoreAddr, "core-addr", "", "core listen address (default: a free port on 127.0.0.1)")
	flag.StringVar(&c.o.GatewayAddr, "gateway-addr", "", "gateway listen address (default: a free port on 127.0.0.1)")
	flag.StringVar(&c.o.AdminToken, "admin-token", "", "the gateway's admin token (default: random; written to DIR/keys/admin.token)")
	flag.Var((*list)(&c.o.PaysimEnv), "paysim-env", "KEY=VALUE for the payment simulator's environment (repeatable)")
	flag.Var((*list)(&c.o.CoreEnv), "core-env", "KEY=VALUE for the core's environment (repeatable)")
	flag.Var((*list)(&c.o.GatewayEnv), "gateway-env", "KEY=VALUE for the gateway's environment (repeatable)")
	flag.StringVar(&c.envFile, "env-file", "", "write the stack's STACK_* export lines here once every app is ready")
	flag.DurationVar(&c.o.Ready, "ready-timeout", 60*time.Second, "how long each app may take to become ready")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) (err error) {
	c.o.Apps = strings.Split(c.apps, ",")
	c.o.DatabaseURL = c.database
	if c.fresh != "" {
		url, drop, err := stack.FreshDatabase(ctx, c.database, c.fresh)
		if err != nil {
			return err
		}
		c.o.DatabaseURL = url
		if !c.keepDB {
			defer func() {
				if derr := drop(context.Background()); derr != nil {
					err = errors.Join(err, fmt.Errorf("drop the run's database: %w", derr))
				}
			}()
		}
	}
	s, err := stack.Start(ctx, c.o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, s.Stop()) }()
	if c.spread && s.Core != nil {
		if err := stack.SpreadEventIDs(ctx, c.o.DatabaseURL); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(c.o.Dir, "keys", "admin.token"), []byte(s.AdminToken), 0o600); err != nil {
		return err
	}
	if c.envFile != "" {
		if err := writeEnv(c.envFile, c.o.DatabaseURL, s); err != nil {
			return err
		}
		defer os.Remove(c.envFile)
	}
	fmt.Fprintf(os.Stderr, "stack: ready: paysim %s, core %s, gateway %s (logs in %s)\n",
		orNone(s.PaysimURL), orNone(s.CoreURL), orNone(s.GatewayURL), c.o.Dir)
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
		return fmt.Errorf("%s exited on its own (see %s)", name, filepath.Join(c.o.Dir, name+".log"))
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
	addr := func(p *stack.Proc) string {
		if p == nil {
			return ""
		}
		return p.Addr
	}
	put("PAYSIM_ADDR", addr(s.Paysim))
	put("CORE_ADDR", addr(s.Core))
	put("GATEWAY_ADDR", addr(s.Gateway))
	put("ADMIN_TOKEN", s.AdminToken)
	put("ADMIT_KEY", s.AdmitKey)
	put("TICKET_KEY", s.TicketKey)
	put("TICKET_PUB", s.TicketPub)
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
