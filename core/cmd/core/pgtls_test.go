package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/shared/servicetest"
	"github.com/onsale/onsale/shared/tlstest"
)

// The core reaches a PostgreSQL that takes TLS only, verifying it: its
// DSN with sslmode=verify-full and sslrootcert (the CA that signed the
// server's certificate) connects and migrates, over TLS (pg_stat_ssl says
// so). The controls: a client that trusts another CA is refused (the
// certificate is checked, not only encrypted), and sslmode=disable is
// refused by the server's hostssl-only pg_hba.conf.
func TestDatabaseOverVerifiedTLS(t *testing.T) {
	ca, other := tlstest.New(t), tlstest.New(t)
	port := tlsPostgres(t, ca)
	dsn := func(params string) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?connect_timeout=5&%s", port, params)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	db, err := postgres.Open(ctx, dsn("sslmode=verify-full&sslrootcert="+ca.CertFile), postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("the core's DSN with verify-full and the CA: %v", err)
	}
	defer db.Close()
	var ssl bool
	var version string
	if err := db.Pool().QueryRow(ctx, `SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &version); err != nil {
		t.Fatal(err)
	}
	if !ssl {
		t.Fatal("pg_stat_ssl: the core's connection is not TLS")
	}
	t.Logf("the core's connection: TLS %s", version)

	for _, tc := range []struct{ name, params, want string }{
		{"a client trusting another CA", "sslmode=verify-full&sslrootcert=" + other.CertFile, "certificate"},
		{"no TLS against hostssl only", "sslmode=disable", "pg_hba.conf"},
	} {
		db, err := postgres.Open(ctx, dsn(tc.params), postgres.Options{MaxConns: 1})
		if err == nil {
			db.Close()
			t.Errorf("%s: connected; want refused", tc.name)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error about %s", tc.name, err, tc.want)
		}
	}
}

// tlsPostgres starts a throwaway PostgreSQL (initdb in a directory of the
// test's own) that listens on 127.0.0.1 with ssl on, the certificate ca
// signed, and a pg_hba.conf that takes TCP clients over TLS only
// (hostssl; no host line). It runs as the postgres OS user when the test
// is root (PostgreSQL refuses to run as root), as deploy/local/stack.sh
// does. It returns the port.
func tlsPostgres(t *testing.T, ca *tlstest.CA) int {
	t.Helper()
	bindir := pgBindir()
	if bindir == "" {
		servicetest.Missing(t, "PostgreSQL's initdb is not installed (/usr/lib/postgresql/*/bin)")
	}
	cred := pgCredential(t)
	// Not t.TempDir(): its parent is 0700 root's, which the postgres user
	// cannot enter.
	dir, err := os.MkdirTemp("", "onsale-pgtls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	// The server's certificate and key where its user can read them, 0600
	// (PostgreSQL refuses a key others can read).
	for _, f := range []struct{ from, to string }{{ca.ServerCert, "server.crt"}, {ca.ServerKey, "server.key"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	chown(t, cred, dir, filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"))
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bindir, name), args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	run("initdb", "-D", data, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
	// Local socket for nobody but the server's own user; TCP over TLS only.
	hba := "local all postgres trust\nhostssl all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	chown(t, cred, filepath.Join(data, "pg_hba.conf"))
	// The port is picked and closed before postgres binds it: another
	// process may take it in between, and then postgres exits. It is
	// started again on a new port (three tries).
	for try := 1; ; try++ {
		port, exited := startTLSPostgres(t, bindir, dir, data, cred, ca)
		if !exited {
			return port
		}
		b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
		if try == 3 {
			t.Fatalf("PostgreSQL with TLS exited before it answered, three times; its log:\n%s", b)
		}
		t.Logf("PostgreSQL with TLS on %d exited before it answered (its port taken?): again on a new port; its log:\n%s", port, b)
	}
}

// startTLSPostgres starts tlsPostgres's server on a port picked now, and
// reports whether it exited before it answered.
func startTLSPostgres(t *testing.T, bindir, dir, data string, cred *syscall.Credential, ca *tlstest.CA) (port int, exited bool) {
	t.Helper()
	port = pgFreePort(t)
	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(bindir, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "ssl=on",
		"-c", "ssl_cert_file="+filepath.Join(dir, "server.crt"), "-c", "ssl_key_file="+filepath.Join(dir, "server.key"),
		"-c", "fsync=off", "-c", "shared_buffers=16MB", "-c", "max_connections=20")
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test killed at its timeout takes its server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		<-done
	})
	// Ready when a verified TLS client gets an answer.
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=verify-full&sslrootcert=%s&connect_timeout=2", port, ca.CertFile)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), url)
		if err == nil {
			c.Close(context.Background())
			return port, false
		}
		select {
		case <-done:
			return port, true
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			t.Fatalf("PostgreSQL with TLS on %d did not answer: %v\n%s", port, err, b)
		}
		time.Sleep(100 * time.Millisecond) // poll interval while the server starts
	}
}

// pgBindir is the newest /usr/lib/postgresql/*/bin with initdb; "" if none.
func pgBindir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

// pgCredential is the postgres OS user's when the test is root (nil:
// run as ourselves).
func pgCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		servicetest.Missing(t, "running as root and there is no postgres OS user to run PostgreSQL as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func chown(t *testing.T, cred *syscall.Credential, paths ...string) {
	t.Helper()
	if cred == nil {
		return
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
}

func pgFreePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
