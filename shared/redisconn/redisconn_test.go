package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/shared/servicetest"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		in      string
		addrs   []string
		db      int
		cluster bool
		wantErr bool
	}{
		{in: "redis://127.0.0.1:6379/3", addrs: []string{"127.0.0.1:6379"}, db: 3},
		{in: "redis://:pw@127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{in: "127.0.0.1:7001,127.0.0.1:7002", addrs: []string{"127.0.0.1:7001", "127.0.0.1:7002"}, cluster: true},
		{in: " 127.0.0.1:7001 , ", addrs: []string{"127.0.0.1:7001"}, cluster: true},
		{in: "", wantErr: true},
		{in: ",", wantErr: true},
		{in: "localhost", wantErr: true},
		{in: "redis://127.0.0.1:6379/notadb", wantErr: true},
		{in: "http://127.0.0.1:6379", wantErr: true},
		{in: "rediss://u:p@127.0.0.1:7001,127.0.0.1:7002", addrs: []string{"127.0.0.1:7001", "127.0.0.1:7002"}, cluster: true},
		{in: "redis://127.0.0.1:7001,", addrs: []string{"127.0.0.1:7001"}, cluster: true},
		{in: "redis://127.0.0.1:7001,127.0.0.1:7002/1", wantErr: true},
		{in: "http://127.0.0.1:7001,127.0.0.1:7002", wantErr: true},
		{in: "redis://127.0.0.1,127.0.0.1:7002", wantErr: true},
	}
	for _, tc := range tests {
		o, err := Options(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("Options(%q) = %+v; want an error", tc.in, o)
			}
			continue
		}
		if err != nil {
			t.Errorf("Options(%q) = %v", tc.in, err)
			continue
		}
		if len(o.Addrs) != len(tc.addrs) || o.DB != tc.db || o.IsClusterMode != tc.cluster {
			t.Errorf("Options(%q) = addrs %v db %d cluster %v; want %v %d %v", tc.in, o.Addrs, o.DB, o.IsClusterMode, tc.addrs, tc.db, tc.cluster)
			continue
		}
		for i := range o.Addrs {
			if o.Addrs[i] != tc.addrs[i] {
				t.Errorf("Options(%q).Addrs = %v; want %v", tc.in, o.Addrs, tc.addrs)
			}
		}
	}
}

// A cluster URL carries its credentials and TLS to every node; a bare list
// has neither.
func TestOptionsCluster(t *testing.T) {
	o, err := Options("rediss://alice:p%40ss@[::1]:7001,127.0.0.1:7002")
	if err != nil {
		t.Fatal(err)
	}
	if o.Username != "alice" || o.Password != "p@ss" || o.TLSConfig == nil || o.TLSConfig.ServerName != "" || !o.IsClusterMode {
		t.Errorf("Options(cluster URL) = user %q password %q tls %v cluster %v; want alice, p@ss, TLS without one ServerName, cluster",
			o.Username, o.Password, o.TLSConfig, o.IsClusterMode)
	}
	if c := o.Cluster(); c.Username != "alice" || c.Password != "p@ss" || c.TLSConfig == nil {
		t.Errorf("Cluster() dropped the credentials or TLS: %q %q %v", c.Username, c.Password, c.TLSConfig)
	}
	if o, err = Options("redis://127.0.0.1:7001,127.0.0.1:7002"); err != nil || o.TLSConfig != nil {
		t.Errorf("Options(redis:// cluster) = tls %v, %v; want no TLS", o.TLSConfig, err)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://user:secret@h:1/0": "redis://user:xxxxx@h:1/0",
		"redis://:secret@h:1":       "redis://:xxxxx@h:1",
		"redis://h:1/2":             "redis://h:1/2",
		"h:1,h:2":                   "h:1,h:2",
		"rediss://u:secret@h:1,h:2": "rediss://u:xxxxx@h:1,h:2",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestOpen(t *testing.T) {
	url := servicetest.Env(t, "REDIS_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(REDIS_URL) = %v", err)
	}
	rdb.Close()
	if _, err := Open(ctx, "redis://127.0.0.1:1/0"); err == nil {
		t.Fatal("Open(a closed port) succeeded")
	}
}

// StaleRoute: a failed connection, a deadline that ran out waiting for a
// reply, or a cluster that says its slots are down or moving re-reads the
// slot map; a script's own refusal, an empty reply or the caller's
// cancellation does not.
func TestStaleRoute(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{goredis.Nil, false},
		{context.Canceled, false},
		{fmt.Errorf("evalsha: %w", context.Canceled), false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("evalsha: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{io.EOF, true},
		{goredis.ErrClosed, true},
	} {
		if got := StaleRoute(tc.err); got != tc.want {
			t.Errorf("StaleRoute(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
}

// Against a real server: reply errors are told apart from the cluster's.
func TestStaleRouteReplies(t *testing.T) {
	url := servicetest.Env(t, "REDIS_URL")
	ctx := context.Background()
	rdb, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for script, want := range map[string]bool{
		"return redis.error_reply('CLUSTERDOWN The cluster is down')": true,
		"return redis.error_reply('TRYAGAIN Multiple keys request')":  true,
		"return redis.error_reply('ERR no place')":                    false,
	} {
		err := rdb.Eval(ctx, script, nil).Err()
		if err == nil || StaleRoute(err) != want {
			t.Errorf("StaleRoute(%v) = %v; want %v", err, StaleRoute(err), want)
		}
	}
}
