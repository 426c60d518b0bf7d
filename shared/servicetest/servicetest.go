// Package servicetest decides, in one place, what a test does when a
// service it needs (PostgreSQL, Redis, Chromium) is missing: it skips, so
// `go test` works on a bare checkout, unless ONSALE_REQUIRE_SERVICES=1 (set
// by make test and CI), where it fails.
package servicetest

import (
	"os"
	"testing"
)

// Missing skips or fails the test because what is missing.
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv("ONSALE_REQUIRE_SERVICES") == "1" {
		tb.Fatalf("%s, and ONSALE_REQUIRE_SERVICES=1: the service is required", what)
	}
	tb.Skip(what)
}

// Env returns the environment variable name, or skips or fails the test
// when it is not set.
func Env(tb testing.TB, name string) string {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		Missing(tb, name+" is not set")
	}
	return v
}
