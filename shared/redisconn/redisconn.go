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
	return &opts, nil
}

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
	rdb := goredis.NewUniversalClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", Redact(addr), err)
	}
	return rdb, nil
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
