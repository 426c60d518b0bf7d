// Package redistest connects tests to the Redis named by REDIS_URL (or a
// cluster named by REDIS_CLUSTER_ADDRS). Without it a test skips, unless
// ONSALE_REQUIRE_SERVICES=1 (make test, CI), where it fails.
package redistest

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/onsale/onsale/gateway/redis"
	"github.com/onsale/onsale/shared/servicetest"
)

// Addrs returns the Redis address to test against: the cluster when
// REDIS_CLUSTER_ADDRS is set and cluster is true, else REDIS_URL.
func Addrs(tb testing.TB, cluster bool) string {
	tb.Helper()
	name := "REDIS_URL"
	if cluster {
		name = "REDIS_CLUSTER_ADDRS"
	}
	return servicetest.Env(tb, name)
}

// NewStore opens a store, closed at cleanup.
func NewStore(tb testing.TB, cluster bool) *redis.Store {
	tb.Helper()
	s, err := redis.Open(context.Background(), Addrs(tb, cluster))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Event returns an event id no other test uses, its keys deleted at cleanup.
func Event(tb testing.TB, s *redis.Store) int64 {
	tb.Helper()
	id := 1_000_000_000 + rand.Int64N(1<<40)
	tb.Cleanup(func() { s.Forget(context.Background(), id) })
	return id
}
