// Package lagproxy is a TCP proxy that makes a PostgreSQL replica lag on
// command, for the failover tests' controls. A member advertises the proxy
// as its replication address (topology.PGOptions.ReplicationAddr), so its
// replicas stream through it. Freeze stops forwarding the primary's bytes to
// the replicas (they wait in the proxy and the kernel's buffers); Drop, when
// the primary has died, closes every connection without forwarding them:
// what the primary committed meanwhile never reached a replica, as when a
// primary dies with a slow network in front of its standbys.
package lagproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards connections from its address to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	gen    int // Drop increments it: bytes held back under an older generation are discarded
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New listens on listen (host:port) and forwards to upstream.
func New(listen, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops forwarding upstream-to-client bytes (the primary's WAL to its
// replicas) on every connection, present and future. Client-to-upstream
// bytes (the replicas' feedback) still flow.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw forwards again whatever was held back, and what follows.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Drop closes every connection, discarding the bytes held back by Freeze
// (never forwarded). It leaves the proxy frozen or not as it was.
func (p *Proxy) Drop() {
	p.mu.Lock()
	p.gen++
	for c := range p.conns {
		c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Drop()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { // client -> upstream: never held back
		io.Copy(up, client)
		up.(*net.TCPConn).CloseWrite()
		done <- struct{}{}
	}()
	go func() { // upstream -> client: through the gate
		p.forward(client, up, gen)
		client.Close()
		up.Close()
		done <- struct{}{}
	}()
	<-done
	client.Close()
	up.Close()
	<-done
}

// forward copies src to dst, waiting at the gate before each write while
// the proxy is frozen; a Drop meanwhile discards the chunk and ends it.
func (p *Proxy) forward(dst, src net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		if !p.gate(gen) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(gen) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gate waits while frozen; false when the connection's generation was
// dropped.
func (p *Proxy) gate(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.frozen && p.gen == gen && !p.closed {
		p.cond.Wait()
	}
	return p.gen == gen && !p.closed
}
