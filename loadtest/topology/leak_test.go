package topology

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running when they end (each one has an owner and a way to stop).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
