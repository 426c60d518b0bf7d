package topology

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisOptions configures StartRedis.
type RedisOptions struct {
	Dir         string        // node files under Dir/redis/n1..n6
	Base        int           // port block: nodes at Base+31..36, their bus at Base+41..46
	NodeTimeout time.Duration // cluster-node-timeout; 0 = 2 s (a failover of about 4 s)
	// Announce, when set, gives the client port node i (0-based) announces
	// (cluster-announce-port): the port its replica replicates from and
	// clients are redirected to. A test puts a proxy there to hold back the
	// replication stream of a master; 0 or nil = the node's own port.
	Announce func(i int) int
	// Conf is the configuration template; "" = deploy/ha/redis.conf of the
	// repository holding the working directory.
	Conf string
}

// RedisCluster is a running Redis Cluster: n1..n3 start as masters (a third
// of the slots each), n4..n6 as their replicas. Who is master later is read
// from the cluster (Masters, MasterOf), never assumed.
type RedisCluster struct {
	Nodes []*RedisNode
	o     RedisOptions
}

// RedisNode is one redis-server of the cluster.
type RedisNode struct {
	Name     string // n1..n6
	Port     int    // client port
	BusPort  int
	Announce int    // the port it announces (Port unless a proxy sits in front)
	ID       string // cluster node id (stable across restarts: nodes.conf)
	Dir      string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is the node's own host:port (not the announced one).
func (n *RedisNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

// redisNodes is the cluster's size: three masters, one replica each.
const redisNodes = 6

// StartRedis starts six redis-servers from the configuration template and
// makes them one cluster: n1..n3 masters over the 16384 slots, n4..n6
// replicating n1..n3. It returns once every node reports cluster_state:ok
// and every replica's link to its master is up.
func StartRedis(ctx context.Context, o RedisOptions) (_ *RedisCluster, err error) {
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 2 * time.Second
	}
	if o.Dir == "" || o.Base == 0 {
		return nil, errors.New("redis: Dir and Base are required")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis: redis-server is not installed (apt-get install redis-server): %w", err)
	}
	tmpl := o.Conf
	if tmpl == "" {
		p, err := redisDeployFile("deploy/ha/redis.conf")
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		tmpl = string(b)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	r := &RedisCluster{o: o}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	for i := 0; i < redisNodes; i++ {
		n := &RedisNode{Name: fmt.Sprintf("n%d", i+1), Port: o.Base + 31 + i, BusPort: o.Base + 41 + i,
			Dir: filepath.Join(dir, "redis", fmt.Sprintf("n%d", i+1))}
		n.Announce = n.Port
		if o.Announce != nil {
			if p := o.Announce(i); p != 0 {
				n.Announce = p
			}
		}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, err
		}
		vars := map[string]string{"BIND": "127.0.0.1", "PORT": strconv.Itoa(n.Port), "BUS_PORT": strconv.Itoa(n.BusPort),
			"DIR": n.Dir, "NODE_TIMEOUT_MS": strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
			"ANNOUNCE_IP": "", "ANNOUNCE_PORT": strconv.Itoa(n.Announce)}
		var missing []string
		conf := os.Expand(tmpl, func(k string) string {
			v, ok := vars[k]
			if !ok {
				missing = append(missing, k)
			}
			return v
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("redis: template has unknown placeholders %v", missing)
		}
		if err := os.WriteFile(filepath.Join(n.Dir, "redis.conf"), []byte(conf), 0o644); err != nil {
			return nil, err
		}
		r.Nodes = append(r.Nodes, n)
	}
	for _, n := range r.Nodes {
		if err := n.start(); err != nil {
			return nil, err
		}
	}
	for _, n := range r.Nodes {
		if err := redisWaitPing(ctx, n, 10*time.Second); err != nil {
			return nil, err
		}
		id, err := redisDo(ctx, n, "CLUSTER", "MYID")
		if err != nil {
			return nil, fmt.Errorf("redis %s: %w", n.Name, err)
		}
		n.ID = id.(string)
	}
	if err := r.create(ctx); err != nil {
		return nil, err
	}
	if err := r.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	return r, nil
}

// create makes the cluster the way `redis-cli --cluster create
// --cluster-replicas 1` does, but with a fixed pairing (n4→n1, n5→n2,
// n6→n3): slots to the masters, MEET, then REPLICATE once every node knows
// every other.
func (r *RedisCluster) create(ctx context.Context) error {
	first := r.Nodes[0]
	for i := 0; i < 3; i++ {
		lo, hi := i*16384/3, (i+1)*16384/3-1
		if _, err := redisDo(ctx, r.Nodes[i], "CLUSTER", "ADDSLOTSRANGE", lo, hi); err != nil {
			return fmt.Errorf("redis %s: addslots: %w", r.Nodes[i].Name, err)
		}
		// Distinct config epochs, as redis-cli gives them, so no collision
		// resolution is needed before the cluster is ok.
		if _, err := redisDo(ctx, r.Nodes[i], "CLUSTER", "SET-CONFIG-EPOCH", i+1); err != nil {
			return fmt.Errorf("redis %s: set-config-epoch: %w", r.Nodes[i].Name, err)
		}
	}
	for _, n := range r.Nodes[1:] {
		if _, err := redisDo(ctx, first, "CLUSTER", "MEET", "127.0.0.1", n.Announce, n.BusPort); err != nil {
			return fmt.Errorf("redis meet %s: %w", n.Name, err)
		}
	}
	// A node can be told to replicate a master only once it knows it.
	if err := redisPoll(ctx, 20*time.Second, func() error {
		for _, n := range r.Nodes {
			v, err := redisDo(ctx, n, "CLUSTER", "NODES")
			if err != nil {
				return err
			}
			for _, m := range r.Nodes[:3] {
				if !strings.Contains(v.(string), m.ID) {
					return fmt.Errorf("%s does not know %s yet", n.Name, m.Name)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for i, n := range r.Nodes[3:] {
		if _, err := redisDo(ctx, n, "CLUSTER", "REPLICATE", r.Nodes[i].ID); err != nil {
			return fmt.Errorf("redis %s: replicate %s: %w", n.Name, r.Nodes[i].Name, err)
		}
	}
	return nil
}

// waitHealthy waits until every running node says cluster_state:ok and
// every running replica's master link is up.
func (r *RedisCluster) waitHealthy(ctx context.Context, d time.Duration) error {
	return redisPoll(ctx, d, func() error {
		for _, n := range r.Nodes {
			if !n.running() {
				continue
			}
			info, err := redisDo(ctx, n, "CLUSTER", "INFO")
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			if !strings.Contains(info.(string), "cluster_state:ok") {
				return fmt.Errorf("%s: cluster not ok", n.Name)
			}
			repl, err := redisDo(ctx, n, "INFO", "replication")
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			s := repl.(string)
			if strings.Contains(s, "role:slave") && !strings.Contains(s, "master_link_status:up") {
				return fmt.Errorf("%s: replica link not up", n.Name)
			}
		}
		return nil
	})
}

// Addrs is every node's client address, comma-separated: the services'
// ONSALE_REDIS (shared/redisconn reads a list as a cluster's seeds).
func (r *RedisCluster) Addrs() string {
	var a []string
	for _, n := range r.Nodes {
		a = append(a, n.Addr())
	}
	return strings.Join(a, ",")
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, flags, master string
	slots             [][2]int
}

// view reads CLUSTER NODES from the first running node that answers.
func (r *RedisCluster) view(ctx context.Context) ([]clusterNode, error) {
	var last error
	for _, n := range r.Nodes {
		if !n.running() {
			continue
		}
		v, err := redisDo(ctx, n, "CLUSTER", "NODES")
		if err != nil {
			last = err
			continue
		}
		return parseClusterNodes(v.(string)), nil
	}
	if last == nil {
		last = errors.New("no node is running")
	}
	return nil, fmt.Errorf("redis cluster nodes: %w", last)
}

func parseClusterNodes(s string) []clusterNode {
	var out []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		c := clusterNode{id: f[0], flags: f[2], master: f[3]}
		for _, sl := range f[8:] {
			if strings.HasPrefix(sl, "[") { // a slot being migrated
				continue
			}
			lo, hi, _ := strings.Cut(sl, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if hi != "" {
				b, _ = strconv.Atoi(hi)
			}
			c.slots = append(c.slots, [2]int{a, b})
		}
		out = append(out, c)
	}
	return out
}

func (r *RedisCluster) byID(id string) *RedisNode {
	for _, n := range r.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Masters returns the nodes the cluster currently counts as masters
// holding slots (not failed), as seen by a running node.
func (r *RedisCluster) Masters(ctx context.Context) ([]*RedisNode, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	var out []*RedisNode
	for _, c := range v {
		if strings.Contains(c.flags, "master") && !strings.Contains(c.flags, "fail") && len(c.slots) > 0 {
			if n := r.byID(c.id); n != nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// Replica returns the node replicating m, per the cluster's view (nil if none).
func (r *RedisCluster) Replica(ctx context.Context, m *RedisNode) (*RedisNode, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range v {
		if c.master == m.ID && !strings.Contains(c.flags, "fail") {
			return r.byID(c.id), nil
		}
	}
	return nil, nil
}

// MasterOf returns the master holding key's slot (hash tags honoured).
func (r *RedisCluster) MasterOf(ctx context.Context, key string) (*RedisNode, error) {
	slot := RedisSlot(key)
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range v {
		if !strings.Contains(c.flags, "master") || strings.Contains(c.flags, "fail") {
			continue
		}
		for _, s := range c.slots {
			if slot >= s[0] && slot <= s[1] {
				if n := r.byID(c.id); n != nil {
					return n, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("redis: no live master holds slot %d", slot)
}

// Kill sends SIGKILL to the node (no shutdown, no AOF flush: a crash) and
// waits until the process is gone.
func (r *RedisCluster) Kill(n *RedisNode) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || !n.running() {
		return nil
	}
	err := cmd.Process.Kill()
	<-done
	return err
}

// WaitFailover waits until dead's slots are held by another node that
// accepts writes to them, and returns that node (dead's replica, promoted).
func (r *RedisCluster) WaitFailover(ctx context.Context, dead *RedisNode) (*RedisNode, error) {
	// A key in one of dead's slots, found before it died (its nodes.conf
	// view is gone with it, so ask a survivor which slots dead had).
	var slot = -1
	var promoted *RedisNode
	err := redisPoll(ctx, 60*time.Second, func() error {
		v, err := r.view(ctx)
		if err != nil {
			return err
		}
		if slot < 0 {
			for _, c := range v {
				if c.id == dead.ID && len(c.slots) > 0 {
					slot = c.slots[0][0]
				}
			}
			if slot < 0 {
				// dead held no slots in a survivor's view any more: the
				// failover is done; find who owns what dead's replica has.
				for _, c := range v {
					if c.master == dead.ID {
						return fmt.Errorf("replica %s still follows %s", c.id, dead.Name)
					}
				}
			}
		}
		for _, c := range v {
			if c.id == dead.ID || !strings.Contains(c.flags, "master") || strings.Contains(c.flags, "fail") {
				continue
			}
			for _, s := range c.slots {
				if slot >= s[0] && slot <= s[1] {
					promoted = r.byID(c.id)
				}
			}
		}
		if promoted == nil || slot < 0 {
			return fmt.Errorf("%s's slots not taken over yet", dead.Name)
		}
		// The promoted node itself must agree it is a master and take a
		// write to the slot.
		key := fmt.Sprintf("{%s}:failover-probe", redisTagForSlot(slot))
		if _, err := redisDo(ctx, promoted, "SET", key, "1", "PX", 1000); err != nil {
			p := promoted
			promoted = nil
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis failover of %s: %w", dead.Name, err)
	}
	return promoted, nil
}

// Restart starts a killed or stopped node again with its files (nodes.conf,
// append-only file) and returns when it has rejoined: as a replica of the
// node that took over its slots, its link up, the cluster ok.
func (r *RedisCluster) Restart(ctx context.Context, n *RedisNode) error {
	if n.running() {
		return fmt.Errorf("redis %s is running", n.Name)
	}
	if err := n.start(); err != nil {
		return err
	}
	if err := redisWaitPing(ctx, n, 10*time.Second); err != nil {
		return err
	}
	return redisPoll(ctx, 30*time.Second, func() error {
		repl, err := redisDo(ctx, n, "INFO", "replication")
		if err != nil {
			return err
		}
		s := repl.(string)
		if !strings.Contains(s, "role:slave") || !strings.Contains(s, "master_link_status:up") {
			return fmt.Errorf("%s has not rejoined as a replica yet", n.Name)
		}
		info, err := redisDo(ctx, n, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if !strings.Contains(info.(string), "cluster_state:ok") {
			return fmt.Errorf("%s: cluster not ok", n.Name)
		}
		return nil
	})
}

// Stop shuts every node down (SIGTERM: the append-only file is flushed)
// and waits for them; SIGKILL after 10 s. Idempotent.
func (r *RedisCluster) Stop() error {
	var wg sync.WaitGroup
	for _, n := range r.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop() }()
	}
	wg.Wait()
	return nil
}

func (n *RedisNode) start() error {
	logf, err := os.OpenFile(filepath.Join(n.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("redis-server", filepath.Join(n.Dir, "redis.conf"))
	cmd.Dir = n.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The node dies with its starter (a test binary killed at its timeout)
	// instead of holding its ports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start redis %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

func (n *RedisNode) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Pid is the node's process id (0 when not running).
func (n *RedisNode) Pid() int {
	if !n.running() {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

func (n *RedisNode) stop() {
	if !n.running() {
		return
	}
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	// SIGTERM again every half second: Redis 7.0 refuses one that comes
	// while it writes its first append-only file (a replica right after a
	// full sync: "Writing initial AOF, can't exit") and forgets it.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	again := time.NewTicker(500 * time.Millisecond)
	defer again.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-again.C:
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			return
		}
	}
}

// redisDo runs one command on one node (no cluster redirection).
func redisDo(ctx context.Context, n *RedisNode, args ...any) (any, error) {
	c := goredis.NewClient(&goredis.Options{Addr: n.Addr(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second,
		MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return c.Do(ctx, args...).Result()
}

func redisWaitPing(ctx context.Context, n *RedisNode, d time.Duration) error {
	return redisPoll(ctx, d, func() error {
		if !n.running() {
			return fmt.Errorf("redis %s exited (log %s)", n.Name, filepath.Join(n.Dir, "redis.log"))
		}
		_, err := redisDo(ctx, n, "PING")
		return err
	})
}

// redisPoll calls f every 50 ms until it returns nil, ctx ends or d passes.
func redisPoll(ctx context.Context, d time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", d, err)
		case <-t.C:
		}
	}
}

// redisDeployFile finds rel in the repository holding the working directory
// (the directory with go.work), where the operator's files are.
func redisDeployFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return filepath.Join(d, rel), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.work above %s: cannot find %s", dir, rel)
		}
	}
}

// RedisSlot is the cluster slot of key (CRC16 of its hash tag or the whole key).
func RedisSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(redisCRC16([]byte(key)) % 16384)
}

// redisTagForSlot returns a hash tag whose slot is slot.
func redisTagForSlot(slot int) string {
	for i := 0; ; i++ {
		t := "s" + strconv.Itoa(i)
		if RedisSlot(t) == slot {
			return t
		}
	}
}

// redisCRC16 is CRC16-CCITT (XModem), the cluster's key hash.
func redisCRC16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
