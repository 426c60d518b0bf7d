// Package redisconn opens Redis the one way every onsale service does: a
// redis:// (or rediss://, TLS) URL names one server (and its database
// number), a comma names the seed nodes of a Redis Cluster (in a URL with
// its credentials and TLS, or as a bare host:port list).
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Options parses addr into client options. One URL names one server:
// redis://[user:password@]host:port[/db], or rediss:// for TLS. A cluster is
// named by a comma: its seed nodes listed either in a URL,
// redis[s]://[user:password@]host:port,host:port,... (credentials and TLS
// for every node; a trailing comma names a cluster of one seed), or bare,
// "host:port,host:port,..." (no credentials, no TLS). TLS verifies each
// node's certificate against the system roots (a private CA: point Go's
// SSL_CERT_FILE at it) for the node's own host name. Timeouts are tight (a
// second to dial, half a second to read or write): a service that cannot
// reach Redis must say so fast, not queue.
func Options(addr string) (*goredis.UniversalOptions, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, errors.New("redis address is empty")
	}
	var opts goredis.UniversalOptions
	switch {
	case strings.Contains(addr, "://") && strings.Contains(addr, ","):
		o, err := clusterURL(addr)
		if err != nil {
			return nil, err
		}
		opts = *o
	case strings.Contains(addr, "://"):
		u, err := goredis.ParseURL(addr)
		if err != nil {
			return nil, fmt.Errorf("redis url: %w", err)
		}
		opts = goredis.UniversalOptions{Addrs: []string{u.Addr}, DB: u.DB, Username: u.Username, Password: u.Password,
			TLSConfig: u.TLSConfig}
	default:
		seeds, err := seedList(addr)
		if err != nil {
			return nil, err
		}
		opts.Addrs, opts.IsClusterMode = seeds, true
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	opts.MaxRetries = 1
	// One dial per attempt: go-redis's default of five dials 100 ms apart
	// turns a dead node (a killed master, before its replica takes over)
	// into seconds of waiting per command instead of a fast error.
	opts.DialerRetries = 1
	return &opts, nil
}

// clusterURL parses redis[s]://[user:password@]host:port,host:port,...:
// the seeds of a cluster that share the URL's credentials and, for
// rediss, TLS. A cluster has only database 0, so a path or a query is
// refused rather than ignored.
func clusterURL(addr string) (*goredis.UniversalOptions, error) {
	scheme, rest, _ := strings.Cut(addr, "://")
	opts := &goredis.UniversalOptions{IsClusterMode: true}
	switch scheme {
	case "rediss":
		// No ServerName: the dialer verifies each node against its own
		// host name, where one name for all would fail every other node.
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis":
	default:
		return nil, fmt.Errorf("redis url: scheme %q: want redis or rediss", scheme)
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		user, pass, hasPass := strings.Cut(rest[:i], ":")
		var err error
		if opts.Username, err = url.PathUnescape(user); err != nil {
			return nil, fmt.Errorf("redis url: user name: %w", err)
		}
		if hasPass {
			if opts.Password, err = url.PathUnescape(pass); err != nil {
				return nil, errors.New("redis url: the password is not URL-escaped")
			}
		}
		rest = rest[i+1:]
	}
	if strings.ContainsAny(rest, "/?#") {
		return nil, fmt.Errorf("redis cluster url %s: a cluster has no database number or options", Redact(addr))
	}
	seeds, err := seedList(rest)
	if err != nil {
		return nil, err
	}
	opts.Addrs = seeds
	return opts, nil
}

// seedList parses "host:port,host:port,...", empty items skipped.
func seedList(list string) ([]string, error) {
	var seeds []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a != "" {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				return nil, fmt.Errorf("redis cluster address %q: want host:port", a)
			}
			seeds = append(seeds, a)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("redis address %q names no node", list)
	}
	return seeds, nil
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
// a connection that failed (no reply from Redis at all), a deadline that
// ran out waiting for one, or a CLUSTERDOWN or TRYAGAIN reply. A deadline
// counts (context.DeadlineExceeded, or the socket's own timeout): a master
// that is gone without a reset (a network cut, a frozen host) shows only as
// timeouts, and the reload is coalesced and cheap. A reply error (a
// script's refusal, a wrong type), an empty reply or the caller's own
// cancellation is not.
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
