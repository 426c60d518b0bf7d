// Command cluster runs onsale's highly available topology (package
// loadtest/topology) on loopback, in the background, for a person to use:
// `make cluster-up` and `make cluster-down`.
//
//	cluster up      start it (fresh: the previous run's data is wiped), seed the
//	                demo catalog, print the URLs; returns once every gateway and
//	                core is UP behind HAProxy, leaving it running
//	cluster down    stop exactly what up started (safe to repeat)
//	cluster status  whether it runs, its URLs and HAProxy's view of every server
//	cluster env     its export lines: eval "$(bin/cluster env)"
//	cluster run     what up starts in the background: the topology in the
//	                foreground until SIGTERM (or SIGINT, SIGHUP)
//
// It uses the fixed port block topology.DefaultBase (7400-7499), so it runs
// beside `make up` (8080, 8081, 15432, 16379, 18090) and the runs of make
// test, demo and bench (their own free ports). State and logs are in -dir
// (.run/cluster): cluster.pid and cluster.log (the background process),
// cluster.env (written once the topology is ready, removed when it stops),
// seed.json (the demo catalog), keys/ (admit, ticket and signing keys,
// admin.token, queue.secret), apps/ (the apps' logs), haproxy/, pg/, etcd/,
// redis/.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
	"github.com/onsale/onsale/loadtest/topology"
	shconfig "github.com/onsale/onsale/shared/config"
)

// config is the command's setup (shared/config: flags and the environment).
type config struct {
	Dir      string        `flag:"dir" default:".run/cluster" help:"directory of the topology's state and logs"`
	Bin      string        `flag:"bin" help:"directory of the binaries (default: the directory of this command)"`
	Base     int           `flag:"base" default:"7400" min:"1024" max:"65435" help:"first port of the topology's block of 100"`
	Gateways int           `flag:"gateways" default:"3" min:"1" max:"9" help:"gateways behind HAProxy"`
	Cores    int           `flag:"cores" default:"2" min:"1" max:"9" help:"cores behind HAProxy"`
	Seed     bool          `flag:"seed" default:"true" help:"seed the demo catalog (bin/seed) once the topology is up"`
	Timeout  time.Duration `flag:"timeout" default:"5m" min:"10s" max:"1h" help:"how long up waits for the topology (duration)"`
}

const usage = `usage: cluster up|down|status|env|run [flags]   (cluster up -h: the flags)`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	var c config
	if err := shconfig.Load(&c, os.Args[2:], os.LookupEnv); err != nil {
		if shconfig.IsHelp(err) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(2)
	}
	if c.Bin == "" {
		if exe, err := os.Executable(); err == nil {
			c.Bin = filepath.Dir(exe)
		}
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
	c.Dir = dir
	switch cmd {
	case "up":
		err = up(c)
	case "down":
		err = down(c)
	case "status":
		err = status(c)
	case "env":
		err = env(c)
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		err = run(ctx, c)
		stop()
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func (c config) path(name string) string { return filepath.Join(c.Dir, name) }

// run starts the topology and keeps it until ctx ends, then stops it. The
// env file says it is ready; it is removed before the stop begins.
func run(ctx context.Context, c config) (err error) {
	began := time.Now()
	t, err := topology.Start(ctx, topology.Options{Dir: c.Dir, Base: c.Base, Gateways: c.Gateways, Cores: c.Cores, Bin: c.Bin})
	if err != nil {
		return err
	}
	defer func() {
		os.Remove(c.path("cluster.env"))
		fmt.Fprintln(os.Stderr, "cluster: stopping")
		began := time.Now()
		err = errors.Join(err, t.Stop())
		fmt.Fprintf(os.Stderr, "cluster: stopped in %v\n", time.Since(began).Round(10*time.Millisecond))
	}()
	if err := writeEnv(c.path("cluster.env"), t); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "cluster: ready in %v: fans %s, cores %s, stats %s\n", time.Since(began).Round(10*time.Millisecond),
		t.GatewayURL, t.CoreURL, t.StatsURL)
	<-ctx.Done()
	return nil
}

// writeEnv writes the topology as shell export lines, atomically (up waits
// for the file and never reads half of it).
func writeEnv(path string, t *topology.Topology) error {
	var b strings.Builder
	put := func(k, v string) { fmt.Fprintf(&b, "export CLUSTER_%s=%s\n", k, quote(v)) }
	put("GATEWAY_URL", t.GatewayURL)
	put("CORE_URL", t.CoreURL)
	put("STATS_URL", t.StatsURL)
	// The operators' listeners, each gateway's and core's own (HAProxy does
	// not reach them): the console and /metrics.
	put("GATEWAY_ADMIN_URLS", strings.Join(t.GatewayAdminURLs, " "))
	put("CORE_ADMIN_URLS", strings.Join(t.CoreAdminURLs, " "))
	put("PAYSIM_URL", t.PaysimURL)
	put("DATABASE_URL", t.DatabaseURL)
	put("PG_PRIMARY", fmt.Sprintf("127.0.0.1:%d", t.Base()+10))
	put("PG_REPLICAS", fmt.Sprintf("127.0.0.1:%d", t.Base()+9))
	put("REDIS", t.Redis.Addrs())
	put("ADMIN_TOKEN_FILE", filepath.Join(t.Dir(), "keys", "admin.token"))
	put("OPERATOR_TOKEN_FILE", filepath.Join(t.Dir(), "keys", "operator.token"))
	put("OPERATOR_PASSWORD_FILE", filepath.Join(t.Dir(), "keys", "operator.password"))
	put("ADMIT_KEY", t.AdmitKey)
	put("TICKET_KEY", t.TicketKey)
	put("TICKET_PUB", t.TicketPub)
	put("SIGNING_KEY", t.SigningKey)
	if len(t.PG.Members) > 0 {
		put("PATRONI_CONFIG", t.PG.Members[0].Config)
	}
	put("HAPROXY_SOCKET", filepath.Join(t.Dir(), "haproxy", "admin.sock"))
	var pids []string
	add := func(p *stack.Proc) {
		if p != nil {
			pids = append(pids, fmt.Sprintf("%s=%d", p.Name, p.Pid()))
		}
	}
	add(t.HAProxy)
	add(t.Paysim)
	for _, p := range append(append([]*stack.Proc{}, t.Cores...), t.Gateways...) {
		add(p)
	}
	for _, n := range t.Redis.Nodes {
		pids = append(pids, fmt.Sprintf("redis-%s=%d", n.Name, n.Pid()))
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

// readEnv reads the env file back: CLUSTER_X -> value.
func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		v = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
		out[strings.TrimPrefix(k, "CLUSTER_")] = v
	}
	return out, nil
}

// ---------------------------------------------------------------- the background process

// supervisor is the recorded background process: its pid and its start
// time in clock ticks since boot (so a reused pid is not mistaken for it).
type supervisor struct {
	pid   int
	start string
}

func (c config) supervisor() (supervisor, bool) {
	b, err := os.ReadFile(c.path("cluster.pid"))
	if err != nil {
		return supervisor{}, false
	}
	pid, start, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return supervisor{}, false
	}
	s := supervisor{pid: n, start: start}
	return s, s.alive()
}

func (s supervisor) alive() bool {
	st, ok := procStart(s.pid)
	return ok && (s.start == "" || st == s.start)
}

// procStart is field 22 of /proc/PID/stat (start time), for a process that
// is not a zombie.
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return "", false
	}
	return f[19], true
}

// lock serialises up and down on one directory.
func (c config) lock() (func(), error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(c.path("lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// up starts `cluster run` in a session of its own (it outlives make and
// this process), waits for its env file, seeds the catalog and prints the
// summary.
func up(c config) error {
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if s, ok := c.supervisor(); ok {
		fmt.Fprintf(os.Stderr, "cluster: already running (pid %d); `make cluster-down` stops it\n", s.pid)
		return summary(c)
	}
	// a fresh topology every time: the last one's data, keys and logs go,
	// but only once nothing of it runs any more (a supervisor that died
	// leaves PostgreSQL stopping for seconds; wiping under it would leave
	// the new cluster's ports and files fighting the old one's)
	if pids := running(c.Dir); len(pids) > 0 {
		return fmt.Errorf("cluster: processes of the last cluster still run from %s (%v); wait for them, or `make cluster-down`", c.Dir, pids)
	}
	if !topology.BlockFree(c.Base, topology.BlockSize) {
		return fmt.Errorf("cluster: something still listens in %d-%d; wait for the last cluster to stop, or `make cluster-down`", c.Base, c.Base+topology.BlockSize-1)
	}
	if err := wipe(c.Dir); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.path("cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(exe, "run", "-dir", c.Dir, "-bin", c.Bin, "-base", strconv.Itoa(c.Base),
		"-gateways", strconv.Itoa(c.Gateways), "-cores", strconv.Itoa(c.Cores))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	start, _ := procStart(pid)
	if err := os.WriteFile(c.path("cluster.pid"), []byte(fmt.Sprintf("%d %s\n", pid, start)), 0o644); err != nil {
		cmd.Process.Kill()
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "cluster: starting %d gateways, %d cores, PostgreSQL (Patroni, etcd), Redis Cluster, HAProxy on 127.0.0.1:%d-%d (pid %d, log %s)\n",
		c.Gateways, c.Cores, c.Base, c.Base+99, pid, rel(c.path("cluster.log")))
	deadline := time.After(c.Timeout)
	for {
		if _, err := os.Stat(c.path("cluster.env")); err == nil {
			break
		}
		select {
		case err := <-exited:
			os.Remove(c.path("cluster.pid"))
			return fmt.Errorf("the topology did not start (%v); see %s and the logs beside it%s", err, rel(c.path("cluster.log")), tail(c.path("cluster.log")))
		case <-deadline:
			cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			os.Remove(c.path("cluster.pid"))
			return fmt.Errorf("the topology was not ready after %v; stopped it; see %s", c.Timeout, rel(c.path("cluster.log")))
		case <-time.After(100 * time.Millisecond):
		}
	}
	ready := time.Since(began)
	if c.Seed {
		if err := seed(c); err != nil {
			return fmt.Errorf("the topology runs but seeding failed (make cluster-down stops it): %w", err)
		}
	}
	fmt.Fprintf(os.Stderr, "cluster: ready in %v", ready.Round(100*time.Millisecond))
	if c.Seed {
		fmt.Fprintf(os.Stderr, ", demo catalog seeded in %v more", (time.Since(began) - ready).Round(100*time.Millisecond))
	}
	fmt.Fprintln(os.Stderr)
	return summary(c)
}

// wipe empties dir of a stopped topology's files (the postgres user's
// data directories included).
// running lists the processes working in dir or naming it on their
// command line (etcd, Patroni, PostgreSQL, Redis, HAProxy, the apps), and in
// the PostgreSQL members' directory when the topology put it under /tmp.
func running(dir string) []int {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	roots := []string{abs + "/"}
	if b, err := os.ReadFile(filepath.Join(abs, "pg", "members-dir")); err == nil {
		if m := strings.TrimSpace(string(b)); strings.HasPrefix(m, "/tmp/onsale-ha-") {
			roots = append(roots, m+"/")
		}
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == os.Getppid() {
			continue
		}
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		uses := cwd + "/ " + strings.ReplaceAll(string(cmdline), "\x00", " ")
		for _, r := range roots {
			if strings.Contains(uses, r) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "lock" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// seed runs bin/seed against the cluster's DSN, as make up does for its
// database: the demo catalog, listed in seed.json.
func seed(c config) error {
	env, err := readEnv(c.path("cluster.env"))
	if err != nil {
		return err
	}
	bin, err := stack.Binary(c.Bin, "seed")
	if err != nil {
		return err
	}
	out, err := os.Create(c.path("seed.json"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(bin, "-json")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+env["DATABASE_URL"])
	cmd.Stdout = out
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bin/seed: %v: %s", err, stderr.String())
	}
	return nil
}

// summary prints what a person needs: the URLs and where things are.
func summary(c config) error {
	env, err := readEnv(c.path("cluster.env"))
	if err != nil {
		return fmt.Errorf("no %s: the topology is not ready (see %s)", rel(c.path("cluster.env")), rel(c.path("cluster.log")))
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	line := func(label, value, note string) {
		if note != "" {
			value += "   (" + note + ")"
		}
		fmt.Fprintf(w, "  %s\t%s\n", label, value)
	}
	line("fans", env["GATEWAY_URL"]+"/", "HAProxy -> the gateways, PROXY v2")
	admins := strings.Fields(env["GATEWAY_ADMIN_URLS"])
	if len(admins) > 0 {
		line("console", admins[0]+"/admin/", "gw1's operators' listener; sign in as ops, password in "+rel(env["OPERATOR_PASSWORD_FILE"]))
	}
	line("metrics", strings.Join(append(admins, strings.Fields(env["CORE_ADMIN_URLS"])...), " "), "/metrics of each gateway, then each core")
	line("cores", env["CORE_URL"], "HAProxy -> the cores: the gateways and paysim's webhooks")
	line("HAProxy stats", env["STATS_URL"]+"/", "bin/cluster status; admin socket "+rel(env["HAPROXY_SOCKET"]))
	line("database", env["DATABASE_URL"], "the cores' DSN")
	line("psql", fmt.Sprintf("psql -h 127.0.0.1 -p %s -U postgres %s", strings.TrimPrefix(env["PG_PRIMARY"], "127.0.0.1:"), topology.Database),
		"the primary, through HAProxy")
	line("patronictl", "patronictl -c "+env["PATRONI_CONFIG"]+" list", "")
	line("redis", env["REDIS"], "redis-cli -c -p "+redisPort(env["REDIS"])+" cluster nodes")
	line("paysim", env["PAYSIM_URL"], "")
	if _, err := os.Stat(c.path("seed.json")); err == nil {
		line("demo catalog", rel(c.path("seed.json")), "")
	}
	line("logs", rel(c.Dir)+"/", `eval "$(bin/cluster env)" sets CLUSTER_*`)
	return w.Flush()
}

func redisPort(addrs string) string {
	first, _, _ := strings.Cut(addrs, ",")
	_, port, _ := strings.Cut(first, ":")
	return port
}

// down stops the background process (SIGTERM: it stops the topology, in
// reverse order) and waits for it; SIGKILL of its process group after
// three minutes (its children die with it).
func down(c config) error {
	if _, err := os.Stat(c.Dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "cluster: nothing was started here; nothing to stop")
		return nil
	}
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	s, ok := c.supervisor()
	if !ok {
		os.Remove(c.path("cluster.pid"))
		os.Remove(c.path("cluster.env"))
		fmt.Fprintln(os.Stderr, "cluster: not running; nothing to stop")
		return nil
	}
	fmt.Fprintf(os.Stderr, "cluster: stopping (pid %d; gateways, cores, HAProxy, paysim, Redis, PostgreSQL, etcd) ...\n", s.pid)
	began := time.Now()
	syscall.Kill(s.pid, syscall.SIGTERM)
	for i := 0; s.alive(); i++ {
		if i == 1800 {
			fmt.Fprintf(os.Stderr, "cluster: pid %d still running after 3 min; SIGKILL to its process group\n", s.pid)
			syscall.Kill(-s.pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.Remove(c.path("cluster.pid"))
	fmt.Fprintf(os.Stderr, "cluster: stopped in %v (logs kept in %s)\n", time.Since(began).Round(100*time.Millisecond), rel(c.Dir))
	return nil
}

// status prints whether the topology runs, its URLs and every server as
// HAProxy sees it.
func status(c config) error {
	s, ok := c.supervisor()
	if !ok {
		fmt.Println("cluster: not running (make cluster-up starts it)")
		return nil
	}
	fmt.Printf("cluster: running (pid %d)\n", s.pid)
	if err := summary(c); err != nil {
		return err
	}
	env, _ := readEnv(c.path("cluster.env"))
	ss, err := topology.HAProxyServers(context.Background(), env["STATS_URL"])
	if err != nil {
		return fmt.Errorf("haproxy stats: %w", err)
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  BACKEND\tSERVER\tSTATUS (HAProxy's checks)")
	for _, s := range ss {
		fmt.Fprintf(w, "  %s\t%s\t%s\n", s.Backend, s.Server, s.Status)
	}
	return w.Flush()
}

// env prints the export lines of a running topology.
func env(c config) error {
	if _, ok := c.supervisor(); !ok {
		return errors.New("not running (make cluster-up starts it)")
	}
	b, err := os.ReadFile(c.path("cluster.env"))
	if err != nil {
		return errors.New("not ready yet")
	}
	_, err = os.Stdout.Write(b)
	return err
}

// rel is path relative to the working directory when it is inside it.
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "\n--- end of " + path + ":\n" + string(b)
}
