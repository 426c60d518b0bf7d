package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine Main started is still
// running after Close: every goroutine of the gateway has an owner and a
// way to stop. Ignored, because fasthttp and net/http own them and end
// them on their own clock: each fasthttp server's idle-worker cleaner
// (after Shutdown it sleeps out its MaxIdleWorkerDuration, 10 s, before it
// sees the stop), each HostClient's idle-connection cleaner (ends once no
// connection is left), the default dialer's DNS cache cleaner (one per
// process), and the keep-alive connections of the tests' net/http clients.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreTopFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
