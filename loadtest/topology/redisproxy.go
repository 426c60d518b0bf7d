package topology

import (
	"bytes"
	"net"
	"sync"
)

// ReplProxy is a TCP proxy in front of a Redis node's client port, put at
// the port the node announces (RedisOptions.Announce), so its replica and
// its clients both reach it through the proxy. It forwards everything,
// except that Stall holds back the replication connection: a connection
// on which the replica said REPLCONF or PSYNC stops moving bytes either
// way, so writes the master acknowledges from then on never reach the
// replica. On loopback a kill -9 of a master otherwise loses nothing (what
// it wrote to the socket is still delivered); with the stream held back,
// the replica that takes over lacks every write since Stall: the lost
// writes of a real failover on a real network, on purpose.
type ReplProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	resume  chan struct{} // closed by Resume
	repl    int           // replication connections seen
	conns   map[net.Conn]struct{}
	closed  bool
}

// StartReplProxy listens on listen and forwards to target.
func StartReplProxy(listen, target string) (*ReplProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &ReplProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, resume: make(chan struct{})}
	go p.serve()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *ReplProxy) Addr() string { return p.ln.Addr().String() }

// Replicating reports how many replication connections went through the
// proxy (a replica syncing from the node behind it).
func (p *ReplProxy) Replicating() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.repl
}

// Stall stops the replication stream: from now on nothing more reaches
// the replica (nor its acknowledgements the master) until Resume.
func (p *ReplProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled, p.resume = true, make(chan struct{})
	}
}

// Resume lets the held-back stream through again.
func (p *ReplProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// Close stops listening and drops every connection, without delivering
// what a stall held back.
func (p *ReplProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.stalled { // wake the held copies: they see closed and drop their bytes
		p.stalled = false
		close(p.resume)
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	return p.ln.Close()
}

func (p *ReplProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *ReplProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *ReplProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// handle forwards one connection. Both directions wait at a stall once
// the connection is known to be a replica's.
func (p *ReplProxy) handle(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	var isRepl sync.Once
	repl := make(chan struct{}) // closed once the replica said who it is
	done := make(chan struct{}, 2)
	go func() { // client -> server: spots the replica's handshake
		p.copy(server, client, repl, func(b []byte) {
			up := bytes.ToUpper(b)
			if bytes.Contains(up, []byte("REPLCONF")) || bytes.Contains(up, []byte("PSYNC")) {
				isRepl.Do(func() {
					p.mu.Lock()
					p.repl++
					p.mu.Unlock()
					close(repl)
				})
			}
		})
		done <- struct{}{}
	}()
	go func() { // server -> client
		p.copy(client, server, repl, nil)
		done <- struct{}{}
	}()
	<-done // either side ending ends both (the defers close them)
}

// copy moves bytes from src to dst; on a replication connection (repl
// closed) each chunk waits while the proxy is stalled.
func (p *ReplProxy) copy(dst, src net.Conn, repl chan struct{}, inspect func([]byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if inspect != nil {
				inspect(buf[:n])
			}
			select {
			case <-repl:
				if !p.wait() {
					return
				}
			default:
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection: the other side ends too
			return
		}
	}
}

// wait blocks while stalled; false once the proxy is closed.
func (p *ReplProxy) wait() bool {
	for {
		p.mu.Lock()
		stalled, resume, closed := p.stalled, p.resume, p.closed
		p.mu.Unlock()
		if closed {
			return false
		}
		if !stalled {
			return true
		}
		<-resume
	}
}
