// Package redisconn opens Redis the one way every onsale service does: a
// redis:// URL names one server (and its database number), a comma-separated
// host:port list names the seed nodes of a Redis Cluster.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Options parses addr into client options: redis://[user:password@]host:port[/db]
// (or rediss:// for TLS) is one server; "host:port,host:port,..." is a
// cluster. Timeouts are tight (a second to dial, half a second to read or
// write): a service that cannot reach Redis must say so fast, not queue.
func Options(addr string) (*goredis.UniversalOptions, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("redis address is empty")
	}
	var opts goredis.UniversalOptions
	if strings.Contains(addr, "://") {
		u, err := goredis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		opts = goredis.UniversalOptions{Addrs: []string{u.Addr}, DB: u.DB, Username: u.Username, Password: u.Password,
			TLSConfig: u.TLSConfig}
	} else {
		for _, a := range strings.Split(addr, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if !strings.Contains(a, ":") {
					return nil, fmt.Errorf("redis cluster address %q: want host:port", a)
				}
				opts.Addrs = append(opts.Addrs, a)
			}
		}
		if len(opts.Addrs) == 0 {
			return nil, fmt.Errorf("redis address %q names no node", addr)
		}
		opts.IsClusterMode = true
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	opts.MaxRetries = 1
	// One dial per attempt: go-redis's default of five dials 100 ms apart
	// turns a dead node (a killed master, before its replica takes over)
	// into seconds of waiting per command instead of a fast error.
	opts.DialerRetries = 1
	return &opts, nil
}

// RouteReload is how often a cluster client re-reads the slot map (CLUSTER
// SLOTS) while it has traffic. go-redis re-reads it on MOVED, but a killed
// master never answers MOVED: without this, and without the reload on
// connection errors (refreshRoutes), a client keeps sending a dead master's
// slots to the dead address until its default minute is up, long after the
// replica took over (measured: about 4 s with cluster-node-timeout 2000).
const RouteReload = time.Second

// Open connects to addr (see Options) and pings it; tune, when given,
// adjusts the options first. The caller closes the client.
func Open(ctx context.Context, addr string, tune ...func(*goredis.UniversalOptions)) (goredis.UniversalClient, error) {
	opts, err := Options(addr)
	if err != nil {
		return nil, err
	}
	for _, f := range tune {
		f(opts)
	}
	var rdb goredis.UniversalClient
	if opts.IsClusterMode {
		co := opts.Cluster()
		co.ClusterStateReloadInterval = RouteReload
		cc := goredis.NewClusterClient(co)
		cc.AddHook(refreshRoutes{cc})
		rdb = cc
	} else {
		rdb = goredis.NewUniversalClient(opts)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", Redact(addr), err)
	}
	return rdb, nil
}

// refreshRoutes asks the cluster client to re-read the slot map (in the
// background, coalesced) whenever a command fails for a reason that may
// mean the map is stale: no answer from the node (killed, unreachable), or
// the node saying its slots are down or moving (CLUSTERDOWN, TRYAGAIN).
type refreshRoutes struct{ c *goredis.ClusterClient }

func (h refreshRoutes) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h refreshRoutes) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if StaleRoute(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h refreshRoutes) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		if StaleRoute(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// StaleRoute reports whether err may come from a stale view of the cluster:
// a connection that failed (no reply from Redis at all) or a CLUSTERDOWN or
// TRYAGAIN reply. A reply error (a script's refusal, a wrong type) or the
// caller's own deadline is not.
func StaleRoute(err error) bool {
	if err == nil || errors.Is(err, goredis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return true
}

// Redact returns addr with any password replaced by "xxxxx", for logs.
func Redact(addr string) string {
	i := strings.Index(addr, "://")
	if i < 0 {
		return addr
	}
	rest := addr[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return addr
	}
	cred := rest[:at]
	if c := strings.Index(cred, ":"); c >= 0 {
		cred = cred[:c] + ":xxxxx"
	}
	return addr[:i+3] + cred + rest[at:]
}
