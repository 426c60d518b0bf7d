package main

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/shared/admission"
	"github.com/onsale/onsale/shared/startup"
)

// A core started while PostgreSQL has no primary (a failover at the moment
// systemd starts it) waits for one and then serves, instead of exiting: a
// unit whose restarts run out inside a 10 s election would stay failed.
// The database is behind a proxy that drops every connection until the
// test lets them through.
func TestMainWaitsForDatabase(t *testing.T) {
	dbURL := postgrestest.NewURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// every connection the proxy opened is closed, and its goroutines have
	// returned, before the test ends (the package's leak check sees them)
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool // by the cleanup: a connection tracked later is closed at once
		wg     sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			c.Close()
			return
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	var open atomic.Bool
	target := u.Host
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !open.Load() {
				c.Close() // no primary: the connection dies at once
				continue
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				track(s)
				defer s.Close()
				wg.Add(1)
				go func() {
					defer wg.Done()
					io.Copy(s, c)
					s.Close()
				}()
				io.Copy(c, s)
			}()
		}
	}()
	u.Host = ln.Addr().String()

	priv, err := admission.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "admit.pub")
	if err := admission.WritePublicKeyFile(keyFile, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	startup.FirstDelay, startup.MaxDelay = 50*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { startup.FirstDelay, startup.MaxDelay = 500*time.Millisecond, 10*time.Second })

	m := NewMain()
	if err := m.ParseFlags([]string{"-addr", "127.0.0.1:0", "-database-url", u.String(), "-admit-public-key", keyFile}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	m.Log = slog.New(slog.NewJSONHandler(logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	// a few refused attempts first, each logged
	for strings.Count(logs.String(), "not reachable at start-up") < 3 {
		select {
		case err := <-done:
			t.Fatalf("Run returned while the database was unreachable: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	open.Store(true)
	addr := make(chan net.Addr, 1)
	go func() { addr <- m.Addr() }()
	var base string
	select {
	case err := <-done:
		t.Fatalf("Run returned: %v", err)
	case a := <-addr:
		base = "http://" + a.String()
	case <-time.After(60 * time.Second):
		t.Fatal("the core did not start once the database answered")
	}
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz = %d; want 200", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: %v", err)
	}
}

// A malformed database URL is not waited for: the core exits at once.
func TestMainBadDatabaseURLExits(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "admit.pub")
	priv, _ := admission.GenerateKey()
	if err := admission.WritePublicKeyFile(keyFile, priv.Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	m := NewMain()
	if err := m.ParseFlags([]string{"-addr", "127.0.0.1:0", "-database-url", "postgres://x:1:2:3/db?sslmode=bogus", "-admit-public-key", keyFile}); err != nil {
		t.Fatal(err)
	}
	m.Log = slog.New(slog.DiscardHandler)
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run with a malformed URL = nil")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept retrying a malformed database URL")
	}
}
