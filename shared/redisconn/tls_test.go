package redisconn

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onsale/onsale/shared/servicetest"
	"github.com/onsale/onsale/shared/tlstest"
)

// tlsRedis starts a redis-server that speaks only TLS (no plain port),
// with a certificate of a CA made for the test, a user alice (password
// "secret pw") and the default user off, so a client without TLS or
// without the credentials is refused. cluster makes it a Redis Cluster of
// one node that owns every slot and announces its TLS port. It returns
// host:port.
func tlsRedis(t *testing.T, ca *tlstest.CA, cluster bool) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		servicetest.Missing(t, "redis-server is not installed")
	}
	dir := t.TempDir()
	// The ports are picked and closed before redis-server binds them:
	// another process may take one in between, and then redis-server
	// exits. It is started again on new ports (three tries).
	for try := 1; ; try++ {
		addr, exited := startTLSRedis(t, bin, dir, ca, cluster)
		if !exited {
			return addr
		}
		if try == 3 {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server with TLS exited before it answered, three times; its log:\n%s", log)
		}
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		t.Logf("redis-server with TLS on %s exited before it answered (its port taken?): again on a new port; its log:\n%s", addr, log)
	}
}

// startTLSRedis starts tlsRedis's server on a port picked now, and reports
// whether it exited before it answered.
func startTLSRedis(t *testing.T, bin, dir string, ca *tlstest.CA, cluster bool) (addr string, exited bool) {
	t.Helper()
	port := freePort(t)
	os.Remove(filepath.Join(dir, "nodes.conf"))
	args := []string{"--port", "0", "--tls-port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--tls-cert-file", ca.ServerCert, "--tls-key-file", ca.ServerKey, "--tls-ca-cert-file", ca.CertFile,
		"--tls-auth-clients", "no", "--user", "default", "off", "--user", "alice", "on", ">secret pw", "~*", "&*", "+@all"}
	if cluster {
		// The cluster bus's port is named: by default it is the TLS port +
		// 10000, which redis-server refuses above 55535 (a fifth of the
		// ports the kernel hands out here).
		args = append(args, "--cluster-enabled", "yes", "--cluster-port", freePort(t), "--tls-cluster", "yes", "--tls-replication", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-announce-ip", "127.0.0.1")
	}
	cmd := exec.Command(bin, append(args, "--logfile", filepath.Join(dir, "redis.log"))...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	addr = "127.0.0.1:" + port
	// A direct, verified TLS client to wait for the server and, for a
	// cluster, to give the one node every slot.
	admin := goredis.NewClient(&goredis.Options{Addr: addr, Username: "alice", Password: "secret pw", TLSConfig: ca.ClientConfig()})
	defer admin.Close()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for admin.Ping(ctx).Err() != nil {
		select {
		case <-done:
			return addr, true
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS on %s did not answer: %v", addr, admin.Ping(ctx).Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if cluster {
		if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			t.Fatal(err)
		}
		for {
			info, err := admin.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the one-node cluster is not ok: %q %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return addr, false
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// trustCA makes Open trust only the test CA (a deployment trusts its
// system roots, or SSL_CERT_FILE); it keeps the TLS that Options chose
// and adds none.
func trustCA(ca *tlstest.CA) func(*goredis.UniversalOptions) {
	return func(o *goredis.UniversalOptions) {
		if o.TLSConfig != nil {
			o.TLSConfig.RootCAs = ca.Pool
		}
	}
}

// rediss:// to one server: TLS verified against the CA, with the URL's
// credentials. The controls: the same server refuses redis:// (no TLS),
// and a client that does not trust the CA is refused.
func TestOpenTLS(t *testing.T) {
	ca := tlstest.New(t)
	addr := tlsRedis(t, ca, false)
	ctx := context.Background()
	rdb, err := Open(ctx, "rediss://alice:secret%20pw@"+addr+"/0", trustCA(ca))
	if err != nil {
		t.Fatalf("Open(rediss://) = %v", err)
	}
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS = %v", err)
	}
	if rdb, err := Open(ctx, "redis://alice:secret%20pw@"+addr+"/0"); err == nil {
		rdb.Close()
		t.Error("Open(redis://) of a TLS-only server succeeded: the test server is not TLS-only")
	}
	if rdb, err := Open(ctx, "rediss://alice:secret%20pw@"+addr+"/0"); err == nil {
		rdb.Close()
		t.Error("Open(rediss://) trusting only the system roots succeeded: the certificate is not verified")
	}
}

// rediss://user:password@seed, to a Redis Cluster: every node is reached
// over TLS with the URL's user and password (the cluster client reads the
// slot map, then talks to the node that owns a key). The control: the bare
// seed list (no credentials, no TLS) is refused.
func TestOpenClusterTLS(t *testing.T) {
	ca := tlstest.New(t)
	addr := tlsRedis(t, ca, true)
	ctx := context.Background()
	rdb, err := Open(ctx, "rediss://alice:secret%20pw@"+addr+",", trustCA(ca))
	if err != nil {
		t.Fatalf("Open(rediss:// cluster) = %v", err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*goredis.ClusterClient); !ok {
		t.Fatalf("Open(rediss://...,) = %T; want a cluster client", rdb)
	}
	for _, k := range []string{"a", "b", "{e1}c"} {
		if err := rdb.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s over the TLS cluster = %v", k, err)
		}
	}
	if rdb, err := Open(ctx, addr+","); err == nil {
		rdb.Close()
		t.Error("Open(bare seed list) of a TLS cluster with a password succeeded")
	}
}
