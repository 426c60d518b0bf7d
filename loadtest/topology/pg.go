package topology

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGOptions says how to start the PostgreSQL cluster: one etcd and three
// Patroni members from deploy/ha/patroni.yml.
type PGOptions struct {
	Dir   string // etcd and Patroni files under Dir/etcd, Dir/pg
	Base  int    // port block (see ports.go)
	Scope string // Patroni scope; "" = "onsale"
	// NoSync turns synchronous_mode off: only the failover test's control,
	// which shows what asynchronous replication loses.
	NoSync                      bool
	TTL, LoopWait, RetryTimeout int   // seconds; 0 = 10, 2, 4 (LoopWait + 2*RetryTimeout <= TTL)
	MaxLagOnFailover            int64 // bytes; 0 = 1 MiB
	// ReplicationAddr, when set, gives the address member i (0-based)
	// advertises to replicas (Patroni's postgresql.connect_address): a
	// test's lag proxy in front of it. nil = direct.
	ReplicationAddr func(i int) string
	// MaxConnections is PostgreSQL's max_connections; 0 = 200 (two cores'
	// pools of 16 to 64 each, operators, Patroni and replication).
	MaxConnections int
	// Template is the Patroni configuration template; "" =
	// deploy/ha/patroni.yml of the repository holding the working directory.
	Template string
	// Detached leaves the processes running when the calling process exits
	// (make cluster-up); otherwise etcd and every Patroni get SIGTERM (a
	// Patroni stops its PostgreSQL cleanly) if the caller dies without Stop.
	Detached bool

	// inTopology: started by Start, whose Stop gives the port block back
	// (not PG.Stop, while the rest of the topology still runs on it).
	inTopology bool
}

// PG is a running PostgreSQL cluster under Patroni, with its etcd.
type PG struct {
	Members []*PGMember

	o       PGOptions
	etcd    *pgProc
	root    string // what the postgres user must reach: data dirs, sockets, pgpass, configs
	tmpRoot bool   // root is /tmp/onsale-ha-<hash>, removed at Stop
	logDir  string
	cred    *syscall.Credential // nil when not root: run as ourselves

	mu      sync.Mutex
	stopped bool
}

// PGMember is one Patroni member and its PostgreSQL.
type PGMember struct {
	Name          string
	Port, APIPort int
	Config        string // its Patroni configuration file (for patronictl -c)
	DataDir       string

	index   int
	patroni *pgProc
}

// the postgres user's passwords: loopback is trusted (pg_hba), so these only
// matter for an operator's networks; the local topology keeps them fixed.
const (
	pgSuperPassword = "onsale-super"
	pgReplPassword  = "onsale-repl"
	pgRewindPasswd  = "onsale-rewind"
)

func (o *PGOptions) defaults() {
	if o.Scope == "" {
		o.Scope = "onsale"
	}
	if o.TTL == 0 {
		o.TTL = 10
	}
	if o.LoopWait == 0 {
		o.LoopWait = 2
	}
	if o.RetryTimeout == 0 {
		o.RetryTimeout = 4
	}
	if o.MaxLagOnFailover == 0 {
		o.MaxLagOnFailover = 1 << 20
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = 200
	}
}

// StartPG starts etcd and three Patroni members and returns once a leader
// answers /primary and both replicas stream from it (one of them
// synchronous unless NoSync). On error whatever it started is stopped.
func StartPG(ctx context.Context, o PGOptions) (_ *PG, err error) {
	o.defaults()
	if o.Dir == "" || o.Base == 0 {
		return nil, errors.New("topology: PGOptions.Dir and Base are required")
	}
	if o.LoopWait+2*o.RetryTimeout > o.TTL {
		return nil, fmt.Errorf("topology: loop_wait %d + 2 * retry_timeout %d > ttl %d", o.LoopWait, o.RetryTimeout, o.TTL)
	}
	bins, err := pgBinaries()
	if err != nil {
		return nil, err
	}
	tmpl := o.Template
	if tmpl == "" {
		if tmpl, err = pgRepoFile("deploy/ha/patroni.yml"); err != nil {
			return nil, err
		}
	}
	text, err := os.ReadFile(tmpl)
	if err != nil {
		return nil, fmt.Errorf("patroni template: %w", err)
	}
	p := &PG{o: o, logDir: filepath.Join(o.Dir, "pg")}
	defer func() {
		if err != nil {
			p.Stop()
		}
	}()
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return nil, err
	}
	if p.cred, err = postgresCredential(); err != nil {
		return nil, err
	}
	if err := p.prepareRoot(); err != nil {
		return nil, err
	}
	if err := p.startEtcd(ctx, bins.etcd); err != nil {
		return nil, err
	}
	p.members(bins.patroni)
	for _, m := range p.Members {
		if err := p.writeConfig(m, string(text), bins.pgBin); err != nil {
			return nil, err
		}
	}
	for _, m := range p.Members {
		if err := m.patroni.start(); err != nil {
			return nil, err
		}
	}
	if err := p.waitHealthy(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

type pgBins struct{ etcd, patroni, pgBin string }

// pgBinaries finds etcd, patroni and the newest PostgreSQL's bin directory.
func pgBinaries() (pgBins, error) {
	var b pgBins
	var missing []string
	for _, x := range []struct {
		name string
		dst  *string
	}{{"etcd", &b.etcd}, {"patroni", &b.patroni}} {
		p, err := exec.LookPath(x.name)
		if err != nil {
			missing = append(missing, x.name)
			continue
		}
		*x.dst = p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, c string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vc, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
		return vc - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			b.pgBin = d
			break
		}
	}
	if b.pgBin == "" {
		missing = append(missing, "postgresql (/usr/lib/postgresql/*/bin/initdb)")
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("%w: %s (Debian packages etcd-server, patroni, postgresql; make test installs them)",
			ErrNoPGEngine, strings.Join(missing, ", "))
	}
	return b, nil
}

// ErrNoPGEngine: an engine the topology needs is not installed.
var ErrNoPGEngine = errors.New("engine not installed")

// pgRepoFile is rel in the repository holding the working directory (the
// directory with go.work), or in the parent of ONSALE_BIN.
func pgRepoFile(rel string) (string, error) {
	var tried []string
	if d := os.Getenv("ONSALE_BIN"); d != "" {
		p := filepath.Join(filepath.Dir(filepath.Clean(d)), rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	dir, err := os.Getwd()
	if err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
				p := filepath.Join(d, rel)
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				tried = append(tried, p)
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("topology: no %s (looked at %v; run from inside the repository)", rel, tried)
}

// postgresCredential is the postgres OS user's when we are root
// (PostgreSQL refuses to run as root), nil otherwise (run as ourselves).
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("topology: running as root needs the postgres OS user (Debian's postgresql package makes it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.Atoi(g); err == nil && n != gid {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c, nil
}

// prepareRoot picks where the postgres user's files go: Dir/pg/members
// when that user can reach it, else /tmp/onsale-ha-<hash of Dir> (a clone
// inside a 0700 mktemp directory, or a Dir too deep for a Unix socket's
// path), removed again at Stop.
func (p *PG) prepareRoot() error {
	p.root = filepath.Join(p.o.Dir, "pg", "members")
	os.Remove(filepath.Join(p.logDir, "members-dir"))
	if err := os.MkdirAll(p.root, 0o755); err != nil {
		return err
	}
	// A Unix socket's path has at most 107 bytes: a deep Dir moves too.
	long := len(p.root)+len("/pg1/.s.PGSQL.65535.lock") > 100
	if long || (p.cred != nil && !p.postgresCanReach(p.root)) {
		sum := sha256.Sum256([]byte(p.o.Dir))
		p.root = "/tmp/onsale-ha-" + hex.EncodeToString(sum[:8])
		p.tmpRoot = true
		removeStaleRoots(p.root)
		if err := os.RemoveAll(p.root); err != nil {
			return err
		}
		if err := os.Mkdir(p.root, 0o755); err != nil {
			return err
		}
		// the mark removeStaleRoots looks for
		os.WriteFile(filepath.Join(p.root, staleMark), []byte(p.o.Dir+"\n"), 0o644)
		// what the postgres user needs to find it from Dir
		os.WriteFile(filepath.Join(p.logDir, "members-dir"), []byte(p.root+"\n"), 0o644)
	}
	return p.chown(p.root)
}

// staleMark marks a /tmp/onsale-ha-* directory as one prepareRoot made.
const staleMark = ".onsale-topology"

// removeStaleRoots removes the /tmp/onsale-ha-* directories that a caller
// killed before Stop left behind (a test binary at its timeout: its
// processes die with it, their data stays), except keep. A directory goes
// only when it carries prepareRoot's mark and no process runs in it or
// names it on its command line (a Detached cluster's members do both).
func removeStaleRoots(keep string) {
	dirs, _ := filepath.Glob("/tmp/onsale-ha-*")
	if len(dirs) == 0 {
		return
	}
	var uses []string // every process's working directory and command line
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil {
			uses = append(uses, cwd+"/")
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil {
			uses = append(uses, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	for _, d := range dirs {
		if d == keep {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, staleMark)); err != nil {
			continue // not one of ours
		}
		busy := false
		for _, u := range uses {
			if strings.Contains(u, d+"/") {
				busy = true
				break
			}
		}
		if !busy {
			os.RemoveAll(d)
		}
	}
}

// postgresCanReach reports whether the postgres user can enter dir (every
// directory on its path searchable).
func (p *PG) postgresCanReach(dir string) bool {
	cmd := exec.Command("/usr/bin/test", "-x", dir)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd.Run() == nil
}

func (p *PG) chown(path string) error {
	if p.cred == nil {
		return nil
	}
	return os.Chown(path, int(p.cred.Uid), int(p.cred.Gid))
}

// writeConfig expands the template for member m.
func (p *PG) writeConfig(m *PGMember, tmpl, pgBin string) error {
	runDir := filepath.Join(p.root, m.Name)
	if err := os.MkdirAll(m.DataDir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{runDir, m.DataDir} {
		if err := p.chown(d); err != nil {
			return err
		}
	}
	connect := fmt.Sprintf("127.0.0.1:%d", m.Port)
	if p.o.ReplicationAddr != nil {
		if a := p.o.ReplicationAddr(m.index); a != "" {
			connect = a
		}
	}
	vars := map[string]string{
		"SCOPE":                p.o.Scope,
		"NAME":                 m.Name,
		"ETCD_HOSTS":           fmt.Sprintf("127.0.0.1:%d", p.o.Base+1),
		"REST_LISTEN":          fmt.Sprintf("127.0.0.1:%d", m.APIPort),
		"REST_CONNECT":         fmt.Sprintf("127.0.0.1:%d", m.APIPort),
		"PG_LISTEN":            fmt.Sprintf("127.0.0.1:%d", m.Port),
		"PG_CONNECT":           connect,
		"DATA_DIR":             m.DataDir,
		"BIN_DIR":              pgBin,
		"RUN_DIR":              runDir,
		"CLIENT_NET":           "127.0.0.1/32",
		"PEER_NET":             "127.0.0.1/32",
		"SUPERUSER_PASSWORD":   pgSuperPassword,
		"REPLICATION_PASSWORD": pgReplPassword,
		"REWIND_PASSWORD":      pgRewindPasswd,
		"SYNC_MODE":            strconv.FormatBool(!p.o.NoSync),
		"TTL":                  strconv.Itoa(p.o.TTL),
		"LOOP_WAIT":            strconv.Itoa(p.o.LoopWait),
		"RETRY_TIMEOUT":        strconv.Itoa(p.o.RetryTimeout),
		"MAX_LAG":              strconv.FormatInt(p.o.MaxLagOnFailover, 10),
		"MAX_CONNECTIONS":      strconv.Itoa(p.o.MaxConnections),
		"SHARED_BUFFERS":       "64MB",
		// loopback only, trusted: no TLS (the hostssl lines match nothing)
		"SSL":           "off",
		"SSL_CERT_FILE": "server.crt",
		"SSL_KEY_FILE":  "server.key",
	}
	var unknown []string
	out := os.Expand(tmpl, func(k string) string {
		v, ok := vars[k]
		if !ok {
			unknown = append(unknown, k)
		}
		return v
	})
	if len(unknown) > 0 {
		return fmt.Errorf("topology: patroni template: unknown placeholders %v", unknown)
	}
	if err := os.WriteFile(m.Config, []byte(out), 0o644); err != nil {
		return err
	}
	// a copy beside the logs, where an operator of the local topology looks
	if p.tmpRoot {
		os.WriteFile(filepath.Join(p.logDir, m.Name+".yml"), []byte(out), 0o644)
	}
	return nil
}

func (p *PG) startEtcd(ctx context.Context, bin string) error {
	data := filepath.Join(p.o.Dir, "etcd", "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", p.o.Base+1)
	peer := fmt.Sprintf("http://127.0.0.1:%d", p.o.Base+2)
	args := []string{"--name", "etcd1", "--data-dir", data, "--initial-cluster-state", "new",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd1=" + peer, "--initial-cluster-token", "onsale-" + p.o.Scope}
	p.etcd = &pgProc{name: "etcd", path: bin, args: args, log: p.etcdLog(), detached: p.o.Detached}
	if err := p.etcd.start(); err != nil {
		return err
	}
	return pgWaitFor(ctx, 30*time.Second, p.etcd, func() error {
		return pgHTTPStatus(client+"/health", http.StatusOK)
	})
}

// members makes the three members' handles (nothing started).
func (p *PG) members(patroni string) {
	for i := range 3 {
		m := &PGMember{Name: fmt.Sprintf("pg%d", i+1), Port: p.o.Base + 11 + i, APIPort: p.o.Base + 21 + i, index: i}
		m.DataDir = filepath.Join(p.root, m.Name, "data")
		m.Config = filepath.Join(p.root, m.Name+".yml")
		m.patroni = &pgProc{name: "patroni " + m.Name, path: patroni, args: []string{m.Config},
			log: filepath.Join(p.logDir, m.Name+".log"), cred: p.cred, detached: p.o.Detached,
			env: []string{"HOME=" + filepath.Join(p.root, m.Name), "PATH=/usr/bin:/bin", "LANG=C.UTF-8"}}
		p.Members = append(p.Members, m)
	}
}

func (p *PG) etcdLog() string { return filepath.Join(p.o.Dir, "etcd", "etcd.log") }

// OpenPG is a handle on the cluster that StartPG started, with the same
// Dir and Base, from another process (make cluster-down after a Detached
// make cluster-up): it finds the processes by their pid files. Stop, Kill,
// Restart, Primary and the rest work on it.
func OpenPG(o PGOptions) (*PG, error) {
	o.defaults()
	if o.Dir == "" || o.Base == 0 {
		return nil, errors.New("topology: PGOptions.Dir and Base are required")
	}
	p := &PG{o: o, logDir: filepath.Join(o.Dir, "pg"), root: filepath.Join(o.Dir, "pg", "members")}
	if b, err := os.ReadFile(filepath.Join(p.logDir, "members-dir")); err == nil {
		p.root, p.tmpRoot = strings.TrimSpace(string(b)), true
	}
	var err error
	if p.cred, err = postgresCredential(); err != nil {
		return nil, err
	}
	patroni, _ := exec.LookPath("patroni")
	p.etcd = &pgProc{name: "etcd", log: p.etcdLog(), detached: o.Detached}
	p.etcd.attach()
	p.members(patroni)
	for _, m := range p.Members {
		m.patroni.attach()
	}
	return p, nil
}

// waitHealthy waits for a leader and both replicas streaming from it, one
// of them synchronous unless NoSync.
func (p *PG) waitHealthy(ctx context.Context, d time.Duration) error {
	return pgWaitFor(ctx, d, nil, func() error {
		for _, m := range p.Members {
			if !m.patroni.running() {
				return fmt.Errorf("%s exited%s", m.patroni.name, pgTail(m.patroni.log))
			}
		}
		leader, err := p.Primary(ctx)
		if err != nil {
			return err
		}
		reps, err := p.replication(ctx, leader)
		if err != nil {
			return err
		}
		sync := 0
		for _, m := range p.Members {
			if m == leader {
				continue
			}
			r, ok := reps[m.Name]
			if !ok || r.state != "streaming" {
				return fmt.Errorf("%s not streaming from %s yet", m.Name, leader.Name)
			}
			if r.sync == "sync" {
				sync++
			}
		}
		if !p.o.NoSync {
			if sync == 0 {
				return errors.New("no synchronous standby yet")
			}
			// Patroni records the standby in the DCS (/sync) just after
			// PostgreSQL reports it synchronous: wait for both.
			if _, err := p.SyncStandby(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

type pgReplica struct{ state, sync string }

// replication is pg_stat_replication on the leader, by application_name
// (Patroni sets it to the member's name).
func (p *PG) replication(ctx context.Context, leader *PGMember) (map[string]pgReplica, error) {
	conn, err := p.connect(ctx, leader, "postgres")
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT application_name, state, sync_state FROM pg_stat_replication`)
	if err != nil {
		return nil, err
	}
	out := map[string]pgReplica{}
	for rows.Next() {
		var name string
		var r pgReplica
		if err := rows.Scan(&name, &r.state, &r.sync); err != nil {
			return nil, err
		}
		out[name] = r
	}
	return out, rows.Err()
}

// connect opens a connection to one member.
func (p *PG) connect(ctx context.Context, m *PGMember, db string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", m.Port, db))
}

// DSN is the multi-host URL of database db: pgx tries each member in turn
// and keeps the one that accepts writes, so a client follows a failover by
// reconnecting.
func (p *PG) DSN(db string) string {
	hosts := make([]string, len(p.Members))
	for i, m := range p.Members {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", m.Port)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?target_session_attrs=read-write&connect_timeout=2&sslmode=disable",
		strings.Join(hosts, ","), db)
}

// CreateDatabase creates database name on the primary and returns once
// every running member has it.
func (p *PG) CreateDatabase(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	// pgx's multi-host connect gives up at the first member that answers
	// "database does not exist" (3D000) instead of trying the next, and a
	// replica replays the creation a moment after the commit: return once
	// every running member has it.
	return pgWaitFor(ctx, 30*time.Second, nil, func() error {
		for _, m := range p.Members {
			if !m.patroni.running() {
				continue
			}
			c, err := p.connect(ctx, m, name)
			if err != nil {
				return fmt.Errorf("create database %s: %w", name, err)
			}
			c.Close(ctx)
		}
		return nil
	})
}

// Primary is the member whose Patroni answers 200 on /primary (it holds the
// leader key and runs PostgreSQL read-write).
func (p *PG) Primary(ctx context.Context) (*PGMember, error) {
	return p.memberAnswering(ctx, "/primary")
}

// SyncStandby is the member Patroni has made the synchronous standby.
func (p *PG) SyncStandby(ctx context.Context) (*PGMember, error) {
	return p.memberAnswering(ctx, "/sync")
}

func (p *PG) memberAnswering(ctx context.Context, path string) (*PGMember, error) {
	for _, m := range p.Members {
		if !m.patroni.running() {
			continue
		}
		if pgHTTPStatusCtx(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", m.APIPort, path), http.StatusOK) == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no member answers %s", path)
}

// WaitPrimary waits until a member other than not is the primary and
// accepts writes, and returns it.
func (p *PG) WaitPrimary(ctx context.Context, not *PGMember) (*PGMember, error) {
	var found *PGMember
	err := pgWaitFor(ctx, 120*time.Second, nil, func() error {
		m, err := p.Primary(ctx)
		if err != nil {
			return err
		}
		if m == not {
			return fmt.Errorf("%s is still the primary", m.Name)
		}
		conn, err := p.connect(ctx, m, "postgres")
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		var rec bool
		if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&rec); err != nil {
			return err
		}
		if rec {
			return fmt.Errorf("%s is still in recovery", m.Name)
		}
		found = m
		return nil
	})
	return found, err
}

// Kill is the member's machine dying: SIGKILL of its Patroni, its
// postmaster and every process the postmaster started (backends, WAL
// sender, checkpointer...), none of which gets to send another byte. The
// postmaster is stopped first so it forks nothing while its children are
// listed.
func (p *PG) Kill(m *PGMember) error {
	var pids []int
	// Only processes that are still the member's: a Patroni that exited
	// (killed before) and a postmaster.pid left behind by a kill -9 name
	// pids the kernel may have handed to anything since.
	if m.patroni.running() {
		pid := m.patroni.pid()
		syscall.Kill(pid, syscall.SIGSTOP)
		pids = append(pids, pid)
	}
	if pm := m.postmaster(); pm > 0 {
		syscall.Kill(pm, syscall.SIGSTOP)
		pids = append(pids, pm)
	}
	for _, root := range slices.Clone(pids) {
		pids = append(pids, pgDescendants(root)...)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	m.patroni.reap()
	return pgWaitGone(pids, 10*time.Second)
}

// Restart starts the member's Patroni again with the same configuration and
// returns once it streams from the primary (as a replica: Patroni rewinds a
// former primary with pg_rewind first).
func (p *PG) Restart(ctx context.Context, m *PGMember) error {
	if m.patroni.running() {
		return fmt.Errorf("%s is running", m.Name)
	}
	if pm := m.postmaster(); pm > 0 {
		return fmt.Errorf("%s: its postmaster %d is still running", m.Name, pm)
	}
	if err := m.patroni.start(); err != nil {
		return err
	}
	return pgWaitFor(ctx, 120*time.Second, m.patroni, func() error {
		leader, err := p.Primary(ctx)
		if err != nil {
			return err
		}
		if leader == m {
			return nil // it won an election meanwhile: it is serving
		}
		reps, err := p.replication(ctx, leader)
		if err != nil {
			return err
		}
		if reps[m.Name].state != "streaming" {
			return fmt.Errorf("%s not streaming from %s yet", m.Name, leader.Name)
		}
		return nil
	})
}

// Stop stops every member (SIGTERM to Patroni, which stops PostgreSQL
// cleanly; SIGKILL of what is still the members' after 60 s), then etcd, and removes the
// data directories kept outside Dir. It is idempotent.
func (p *PG) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	var errs []error
	for _, m := range p.Members {
		if m.patroni != nil && m.patroni.running() {
			syscall.Kill(m.patroni.pid(), syscall.SIGTERM)
		}
	}
	if err := p.waitMembersDown(60 * time.Second); err != nil {
		// Whatever is still the members' own now (checked again: a pid
		// seen before the wait may have exited and been reused since).
		for _, m := range p.Members {
			var roots []int
			if m.patroni != nil && m.patroni.running() {
				roots = append(roots, m.patroni.pid())
			}
			if pm := m.postmaster(); pm > 0 {
				roots = append(roots, pm)
			}
			for _, r := range roots {
				for _, c := range append(pgDescendants(r), r) {
					syscall.Kill(c, syscall.SIGKILL)
				}
			}
		}
		// A graceful stop that hangs is Patroni's (once in a fresh-clone
		// run: a replica's Patroni still up 60 s after SIGTERM, when it
		// usually takes 4-9 s); what Stop promises is that nothing of the
		// cluster outlives it, so only survivors of the kill are an error.
		fmt.Fprintf(os.Stderr, "topology: graceful stop: %v; killed\n", err)
		errs = append(errs, p.waitMembersDown(10*time.Second))
	}
	for _, m := range p.Members {
		if m.patroni != nil {
			m.patroni.reap()
		}
	}
	if p.etcd != nil {
		errs = append(errs, p.etcd.stop(10*time.Second))
	}
	if p.tmpRoot && strings.HasPrefix(p.root, "/tmp/onsale-ha-") {
		errs = append(errs, os.RemoveAll(p.root))
	}
	if !p.o.inTopology {
		ReleaseBlock(p.o.Base)
	}
	return errors.Join(errs...)
}

// pgProc is one process the cluster runs (etcd or a Patroni): a child of
// ours, or, after OpenPG, a process found by its pid file (pid and start
// time, so a reused pid is never mistaken for it).
type pgProc struct {
	name, path string
	args, env  []string
	log        string
	cred       *syscall.Credential
	detached   bool

	mu    sync.Mutex
	pidv  int
	since string        // the process's start time (/proc/pid/stat field 22)
	done  chan struct{} // closed at exit; nil for a process we did not start
}

func (x *pgProc) pidFile() string { return x.log + ".pid" }

func (x *pgProc) start() error {
	logf, err := os.OpenFile(x.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(x.path, x.args...)
	cmd.Dir = "/"
	if x.env != nil {
		cmd.Env = x.env
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	attr := &syscall.SysProcAttr{Credential: x.cred}
	if x.detached {
		attr.Setsid = true // outlives us, and no terminal's ^C reaches it
	} else {
		attr.Setpgid = true
		// The caller's death (a test binary killed at its timeout) stops
		// Patroni, which stops its PostgreSQL: nothing holds the ports.
		// Go sets the signal after the change of user, so it holds.
		attr.Pdeathsig = syscall.SIGTERM
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", x.name, err)
	}
	done := make(chan struct{})
	pid := cmd.Process.Pid
	since := pgStartTime(pid)
	x.mu.Lock()
	x.pidv, x.since, x.done = pid, since, done
	x.mu.Unlock()
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	return os.WriteFile(x.pidFile(), fmt.Appendf(nil, "%d %s\n", pid, since), 0o644)
}

// attach finds the process from its pid file (OpenPG).
func (x *pgProc) attach() {
	b, err := os.ReadFile(x.pidFile())
	if err != nil {
		return
	}
	var pid int
	var since string
	if _, err := fmt.Sscan(string(b), &pid, &since); err != nil || pgStartTime(pid) != since {
		return
	}
	x.mu.Lock()
	x.pidv, x.since = pid, since
	x.mu.Unlock()
}

func (x *pgProc) pid() int {
	if x == nil {
		return 0
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pidv
}

func (x *pgProc) running() bool {
	if x == nil {
		return false
	}
	x.mu.Lock()
	pid, since, done := x.pidv, x.since, x.done
	x.mu.Unlock()
	if pid == 0 {
		return false
	}
	if done == nil {
		return pgAlive(pid) && pgStartTime(pid) == since
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// reap waits (briefly) for the exit of a process that was killed.
func (x *pgProc) reap() {
	x.mu.Lock()
	pid, done := x.pidv, x.done
	x.mu.Unlock()
	if done == nil {
		pgWaitGone([]int{pid}, 10*time.Second)
		return
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

func (x *pgProc) stop(d time.Duration) error {
	if !x.running() {
		return nil
	}
	pid := x.pid()
	syscall.Kill(pid, syscall.SIGTERM)
	if pgWaitGone([]int{pid}, d) != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		x.reap()
		return fmt.Errorf("%s did not stop in %v; killed", x.name, d)
	}
	x.reap()
	os.Remove(x.pidFile())
	return nil
}

// pgStartTime is field 22 of /proc/pid/stat, the process's start time in
// clock ticks since boot ("" when there is no such process).
func pgStartTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// postmasterPID is the first line of the data directory's postmaster.pid
// (0 when there is none).
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// postmaster is the pid of m's running postmaster, or 0. postmaster.pid
// outlives a postmaster killed with SIGKILL, and by then its pid may belong
// to any process: it counts only while that process runs in m's data
// directory (a postmaster's working directory is its data directory).
func (m *PGMember) postmaster() int {
	pid := postmasterPID(m.DataDir)
	if pid <= 0 || !pgAlive(pid) || !pgRunsIn(pid, m.DataDir) {
		return 0
	}
	return pid
}

// pgRunsIn reports whether process pid's working directory is dir.
func pgRunsIn(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		want = filepath.Clean(dir)
	}
	return cwd == want
}

// waitMembersDown waits until no member's Patroni or postmaster runs.
func (p *PG) waitMembersDown(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, m := range p.Members {
			if m.patroni != nil && m.patroni.running() {
				left = append(left, m.patroni.name)
			}
			if pm := m.postmaster(); pm > 0 {
				left = append(left, fmt.Sprintf("%s postmaster %d", m.Name, pm))
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still running after %v", strings.Join(left, ", "), d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// descendants lists every process below pid, from /proc.
func pgDescendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := pgPPID(c); pp > 0 {
			children[pp] = append(children[pp], c)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, c := range children[n] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// procStat is the state letter and parent of a process ("" when gone).
func pgProcStat(pid int) (state string, parent int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0
	}
	parent, _ = strconv.Atoi(f[1])
	return f[0], parent
}

func pgPPID(pid int) int { _, pp := pgProcStat(pid); return pp }

// alive: the process exists and is not a zombie (a zombie is dead, only
// not yet reaped by its parent).
func pgAlive(pid int) bool {
	st, _ := pgProcStat(pid)
	return st != "" && st != "Z" && st != "X"
}

func pgWaitGone(pids []int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, pid := range pids {
			if pgAlive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still running after %v", left, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor calls check every 100 ms until it returns nil, proc exits, ctx
// ends or d passes.
func pgWaitFor(ctx context.Context, d time.Duration, proc *pgProc, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if proc != nil && !proc.running() {
			return fmt.Errorf("%s exited: %v%s", proc.name, last, pgTail(proc.log))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %v", d, last)
		case <-tick.C:
		}
	}
}

func pgHTTPStatus(url string, want int) error {
	return pgHTTPStatusCtx(context.Background(), url, want)
}

var pgHTTP = &http.Client{Timeout: 2 * time.Second}

func pgHTTPStatusCtx(ctx context.Context, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := pgHTTP.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// tail is the end of a log file, for error messages.
func pgTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "\n--- end of " + path + ":\n" + string(b)
}
