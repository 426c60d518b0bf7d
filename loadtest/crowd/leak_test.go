package crowd_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running when they end: the crowd's own (fans, bots, operators, the
// sampler) each end with their run. Ignored, because they are fasthttp's
// and end by themselves or live for the process:
//   - the Date header's clock of the tests' fasthttp servers
//     (updateServerDate) and the default dialer's DNS cache cleaner
//     (tcpAddrsClean): one each per process;
//   - each HostClient's idle-connection cleaner (connsCleaner: the crowd's
//     pools are HostClients) and the default Client's (mCleaner: seat maps
//     are read with fasthttp.GetTimeout): each ends once its connections
//     have been idle for its MaxIdleConnDuration (the pools' 30 s, the
//     default Client's 10 s); fasthttp cannot stop it sooner;
//   - each pipelined connection's worker, reader and writer (the fans'
//     polls are pipelined: NewPipe): they end once the connection has
//     been idle for its MaxIdleConnDuration (30 s), as the pools' do;
//   - the worker-pool cleaner of the tests' servers (fakegateway_test.go,
//     client_test.go): their cleanup calls Shutdown, and the cleaner sees
//     it only after its sleep (MaxIdleWorkerDuration, 10 s).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreTopFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*pipelineConnClient).worker"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*pipelineConnClient).reader"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*pipelineConnClient).writer"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	)
}
