package http_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running when they end (each one has an owner and a way to stop), or if
// a whole run left an operation of the OpenAPI document unshown working
// (apitest.Covered).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(covered{m})
}
