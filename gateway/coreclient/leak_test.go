package coreclient_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running when they end (each one has an owner and a way to stop), except
// fasthttp's own: each HostClient's connsCleaner (it closes idle
// connections and ends by itself once none is left, seconds after the
// last request; fasthttp has no way to stop it sooner) and the default
// dialer's DNS cache cleaner (one per process, for its life).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, fasthttpIgnores...)
}

// fasthttpIgnores are the goroutines fasthttp's client starts and owns.
var fasthttpIgnores = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
	goleak.IgnoreTopFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
}
