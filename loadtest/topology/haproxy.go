package topology

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/onsale/onsale/loadtest/stack"
)

// HAProxy's frontends and backends, by their names in deploy/ha/haproxy.cfg.
const (
	BackendGateways   = "gateways"
	BackendCores      = "cores"
	BackendPGPrimary  = "pg_primary"
	BackendPGReplicas = "pg_replicas"
)

// haproxyMaxConn is the local topology's global maxconn: each connection
// takes two descriptors and the shell's limit here is 20,000.
const haproxyMaxConn = 8000

// HAProxyConfig is what deploy/ha/haproxy.cfg is expanded with.
type HAProxyConfig struct {
	Bind                                     string // address of every frontend
	FansPort, CoresPort                      int
	PGPrimaryPort, PGReplicasPort, StatsPort int
	StatsSocket                              string
	MaxConn                                  int
	Gateways, Cores                          []string // host:port, named gw1.., core1.. in order
	PG                                       []PGServer
}

// PGServer is a PostgreSQL member as HAProxy checks it: its port and its
// Patroni REST port.
type PGServer struct {
	Name      string
	Addr      string // host:port of PostgreSQL
	CheckPort int    // Patroni's REST API on the same host
}

// RenderHAProxy expands the template (deploy/ha/haproxy.cfg) with c. A
// placeholder the template names and c does not fill is an error: an
// empty expansion would leave a config HAProxy may still accept.
func RenderHAProxy(template string, c HAProxyConfig) (string, error) {
	// servers is one line per address: "server gw1 ADDR", name suffix and
	// options after it
	servers := func(prefix string, addrs []string, suffix, opts string) string {
		var b strings.Builder
		for i, a := range addrs {
			fmt.Fprintf(&b, "    server %s%d%s %s%s\n", prefix, i+1, suffix, a, opts)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	var pg strings.Builder
	for _, s := range c.PG {
		fmt.Fprintf(&pg, "    server %s %s check port %d\n", s.Name, s.Addr, s.CheckPort)
	}
	vars := map[string]string{
		"BIND":             c.Bind,
		"FANS_PORT":        strconv.Itoa(c.FansPort),
		"CORES_PORT":       strconv.Itoa(c.CoresPort),
		"PG_PRIMARY_PORT":  strconv.Itoa(c.PGPrimaryPort),
		"PG_REPLICAS_PORT": strconv.Itoa(c.PGReplicasPort),
		"STATS_PORT":       strconv.Itoa(c.StatsPort),
		"STATS_SOCKET":     c.StatsSocket,
		"MAXCONN":          strconv.Itoa(c.MaxConn),
		"GATEWAY_SERVERS":  servers("gw", c.Gateways, "", ""),
		// every gateway again, unchecked: HAProxy's fallback while no
		// checked gateway is UP (a Redis failover fails every /readyz)
		"GATEWAY_FALLBACK_SERVERS": servers("gw", c.Gateways, "-fallback", " backup no-check"),
		"CORE_SERVERS":             servers("core", c.Cores, "", ""),
		"PG_SERVERS":               strings.TrimSuffix(pg.String(), "\n"),
	}
	var missing []string
	out := os.Expand(template, func(k string) string {
		v, ok := vars[k]
		if !ok || v == "" || v == "0" {
			missing = append(missing, k)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("haproxy template: no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// haproxyConfig is the topology's HAProxy configuration: every frontend on
// 127.0.0.1 at its port of the block.
func (t *Topology) haproxyConfig() HAProxyConfig {
	b := t.base
	c := HAProxyConfig{Bind: "127.0.0.1", FansPort: b + 80, CoresPort: b + 81, PGPrimaryPort: b + 10, PGReplicasPort: b + 9,
		StatsPort: b + 89, StatsSocket: filepath.Join(t.dir, "haproxy", "admin.sock"), MaxConn: haproxyMaxConn}
	for i := range t.o.Gateways {
		c.Gateways = append(c.Gateways, addr(b+51+i))
	}
	for i := range t.o.Cores {
		c.Cores = append(c.Cores, addr(b+61+i))
	}
	for i := range 3 {
		c.PG = append(c.PG, PGServer{Name: fmt.Sprintf("pg%d", i+1), Addr: addr(b + 11 + i), CheckPort: b + 21 + i})
	}
	return c
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// writeHAProxyConfig renders the template into Dir/haproxy/haproxy.cfg and
// has HAProxy check it.
func (t *Topology) writeHAProxyConfig(haproxy string) (string, error) {
	tmpl, err := pgRepoFile("deploy/ha/haproxy.cfg")
	if err != nil {
		return "", err
	}
	text, err := os.ReadFile(tmpl)
	if err != nil {
		return "", err
	}
	out, err := RenderHAProxy(string(text), t.haproxyConfig())
	if err != nil {
		return "", err
	}
	dir := filepath.Join(t.dir, "haproxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(out), 0o644); err != nil {
		return "", err
	}
	if b, err := exec.Command(haproxy, "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("haproxy -c -f %s: %v\n%s", cfg, err, b)
	}
	return cfg, nil
}

// startHAProxy runs HAProxy in the foreground (-db) as a stack.Proc, so
// that it can be killed, frozen and restarted like the apps; it is ready
// once its stats page answers.
func (t *Topology) startHAProxy(ctx context.Context) error {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return fmt.Errorf("%w: haproxy (Debian package haproxy; make cluster-up installs it)", ErrNoPGEngine)
	}
	cfg, err := t.writeHAProxyConfig(bin)
	if err != nil {
		return err
	}
	t.HAProxy, err = stack.StartApp(ctx, stack.App{Name: "haproxy", Binary: bin, Args: []string{"-db", "-f", cfg},
		Addr: addr(t.base + 89), Ready: t.StatsURL + "/;csv", Dir: filepath.Join(t.dir, "haproxy"), Wait: 20 * time.Second})
	return err
}

// ServerState is one server's line of HAProxy's statistics.
type ServerState struct {
	Backend, Server string
	Status          string // UP, DOWN, MAINT, DRAIN, "UP 1/2" (going down), "DOWN 1/2" (coming up), no check
}

// Up reports whether HAProxy sends it traffic.
func (s ServerState) Up() bool { return s.Status == "UP" }

// Servers reads HAProxy's statistics: every server of every backend.
func (t *Topology) Servers(ctx context.Context) ([]ServerState, error) {
	return HAProxyServers(ctx, t.StatsURL)
}

// HAProxyServers reads the statistics page at statsURL (the stats uri, as
// in deploy/ha/haproxy.cfg): every server of every backend.
func HAProxyServers(ctx context.Context, statsURL string) ([]ServerState, error) {
	c, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(c, http.MethodGet, statsURL+"/;csv", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("haproxy stats: %s", resp.Status)
	}
	r := csv.NewReader(resp.Body)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("haproxy stats: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimPrefix(h, "# ")] = i
	}
	px, sv, st := col["pxname"], col["svname"], col["status"]
	var out []ServerState
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("haproxy stats: %w", err)
		}
		if len(rec) <= st || rec[sv] == "FRONTEND" || rec[sv] == "BACKEND" {
			continue
		}
		out = append(out, ServerState{Backend: rec[px], Server: rec[sv], Status: rec[st]})
	}
}

// WaitServers waits until exactly want servers of backend are UP, as
// HAProxy's checks see them.
func (t *Topology) WaitServers(ctx context.Context, backend string, want int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last string
	for {
		ss, err := t.Servers(ctx)
		if err == nil {
			up, all := 0, 0
			var states []string
			for _, s := range ss {
				if s.Backend == backend {
					all++
					if s.Up() {
						up++
					}
					states = append(states, s.Server+" "+s.Status)
				}
			}
			if up == want {
				return nil
			}
			last = fmt.Sprintf("%d of %d UP (%s)", up, all, strings.Join(states, ", "))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("haproxy backend %s: want %d servers UP after %v: %s", backend, want, d, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// HAProxyCommand sends one command to HAProxy's admin socket (e.g. "set
// server gateways/gw1 state drain") and returns its answer.
func (t *Topology) HAProxyCommand(cmd string) (string, error) {
	return haproxySocket(filepath.Join(t.dir, "haproxy", "admin.sock"), cmd)
}

func haproxySocket(path, cmd string) (string, error) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return strings.TrimSpace(string(b)), err
}
