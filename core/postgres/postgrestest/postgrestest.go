// Package postgrestest gives each test its own freshly migrated database on
// the server named by DATABASE_URL. Without DATABASE_URL a test skips,
// unless ONSALE_REQUIRE_SERVICES=1 (set by make test and CI), where a
// missing or unreachable server fails the test.
package postgrestest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/shared/servicetest"
)

// URL returns the server URL tests use, skipping or failing as the package
// comment says when there is none.
func URL(tb testing.TB) string {
	tb.Helper()
	return servicetest.Env(tb, "DATABASE_URL")
}

// NewURL creates an empty database for the test, dropped at cleanup, and
// returns its URL.
func NewURL(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to %s: %v", redact(base), err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "onsale_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		tb.Fatalf("create database: %v", err)
	}
	admin.Close(ctx)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// ConnectTimeout is how long a test's store waits for a new connection.
// The core's 2 s is for finding a new primary fast; the tests' server is
// shared by packages running beside each other under -race on two cores,
// where a race test's pool opening its 40 connections at once saw one take
// over 2 s (TestRaceGA, on a fresh-clone make test). A test of the timeout
// itself sets its own.
const ConnectTimeout = 15 * time.Second

// NewDB opens a migrated store on a fresh database, closed at cleanup
// (with ConnectTimeout unless o names one).
func NewDB(tb testing.TB, o postgres.Options) *postgres.DB {
	tb.Helper()
	u := NewURL(tb)
	if o.MaxConns == 0 {
		o.MaxConns = 40
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = ConnectTimeout
	}
	db, err := postgres.Open(context.Background(), u, o)
	if err != nil {
		tb.Fatalf("open %s: %v", redact(u), err)
	}
	tb.Cleanup(db.Close)
	return db
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}
