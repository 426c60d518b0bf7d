package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine Main started is still
// running after Close: every goroutine of the binary has an owner and a
// way to stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
