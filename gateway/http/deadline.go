package http

import (
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A fasthttp.Server with ReadTimeout, WriteTimeout and IdleTimeout moves a
// connection's deadlines three times a request (the wait for the next
// request, its header, its answer), and each move re-arms one of the
// runtime's timers: on a status poll, as much of the gateway's CPU as the
// per-token limit. The fans' listener (Listen) keeps the deadlines its
// connections are given as numbers instead, and one sweep a second
// enforces them: a connection found past its read (or write) deadline has
// the real one set in the past, which ends its waiting read (write) as the
// deadline would have, and fasthttp closes it. A deadline is so kept up to
// a sweep late, never early: a slow client (slowloris) is cut within
// ReadTimeout and a second, a stalled reader of its answers within
// WriteTimeout and a second. A connection whose deadline a sweep enforced
// and that is given a new one (a write deadline that ran out while the
// connection sat idle, before its next answer) gets its real deadline
// lifted: as with the runtime's, a later deadline makes the connection
// usable again. The sweep looks at each open connection once a second
// (an atomic read each), and runs until the listener is closed and its
// last connection with it.

// sweepEvery is how late a swept deadline may be enforced.
const sweepEvery = time.Second

// connShards spreads the open connections' set over locks: an accept or a
// close waits only for its shard's sweep.
const connShards = 16

// sweptListener hands out connections whose deadlines its sweep enforces.
type sweptListener struct {
	net.Listener
	base   time.Time // deadlines are kept as monotonic nanoseconds since base
	shards [connShards]connShard
	next   atomic.Uint32 // the shard of the next connection
	open   atomic.Int64  // connections not yet closed
	closed atomic.Bool   // the listener is
	wake   chan struct{} // a sweep now: the listener closed, or its last connection after it
	once   sync.Once
}

type connShard struct {
	mu    sync.Mutex
	conns map[*sweptConn]struct{}
}

// sweepDeadlines wraps ln: its connections' deadlines are swept.
func sweepDeadlines(ln net.Listener) net.Listener {
	l := &sweptListener{Listener: ln, base: time.Now(), wake: make(chan struct{}, 1)}
	for i := range l.shards {
		l.shards[i].conns = map[*sweptConn]struct{}{}
	}
	go l.sweep()
	return l
}

func (l *sweptListener) Accept() (net.Conn, error) {
	// Counted open before the accept: a sweep that sees the listener
	// closed while a connection is being accepted goes on for it.
	l.open.Add(1)
	c, err := l.Listener.Accept()
	if err != nil {
		if l.open.Add(-1) == 0 && l.closed.Load() {
			l.poke()
		}
		return nil, err
	}
	sc := &sweptConn{Conn: c, ln: l, shard: &l.shards[l.next.Add(1)%connShards]}
	sc.shard.mu.Lock()
	sc.shard.conns[sc] = struct{}{}
	sc.shard.mu.Unlock()
	return sc, nil
}

// Close closes the listener; the sweep goes on while connections it
// accepted are open.
func (l *sweptListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		l.closed.Store(true)
		l.poke()
	})
	return err
}

func (l *sweptListener) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// at is t as kept: nanoseconds since base, plus one (0 is no deadline).
func (l *sweptListener) at(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	d := t.Sub(l.base) // saturates: a deadline centuries away stays far, not past
	if d == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(1, int64(d)+1)
}

func (l *sweptListener) sweep() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-l.wake:
		}
		if l.closed.Load() && l.open.Load() == 0 {
			return
		}
		now := int64(time.Since(l.base)) + 1
		for i := range l.shards {
			sh := &l.shards[i]
			sh.mu.Lock()
			for c := range sh.conns {
				c.sweep(now)
			}
			sh.mu.Unlock()
		}
	}
}

// sweptConn is a connection whose deadlines are kept, and enforced by its
// listener's sweep.
type sweptConn struct {
	net.Conn
	ln          *sweptListener
	shard       *connShard
	read, write atomic.Int64 // the deadlines as kept (sweptListener.at)
	// past says which real deadlines a sweep set in the past (readPast,
	// writePast); mu orders a sweep's setting them against a new
	// deadline's lifting them.
	past   atomic.Int32
	mu     sync.Mutex
	closed atomic.Bool
}

const (
	readPast int32 = 1 << iota
	writePast
)

// longAgo is a deadline that has passed: it ends a waiting read or write.
var longAgo = time.Unix(1, 0)

func (c *sweptConn) SetDeadline(t time.Time) error {
	d := c.ln.at(t)
	c.read.Store(d)
	c.write.Store(d)
	return c.lift()
}

func (c *sweptConn) SetReadDeadline(t time.Time) error {
	c.read.Store(c.ln.at(t))
	return c.lift()
}

func (c *sweptConn) SetWriteDeadline(t time.Time) error {
	c.write.Store(c.ln.at(t))
	return c.lift()
}

// lift, after a deadline is kept, lifts a real deadline a sweep set in the
// past if the kept one has not passed. (A sweep marks past before it reads
// the kept deadline: either it reads the new one, or lift sees the mark.)
func (c *sweptConn) lift() error {
	if c.past.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := int64(time.Since(c.ln.base)) + 1
	var err error
	if c.past.Load()&readPast != 0 && !passed(c.read.Load(), now) {
		c.past.And(^readPast)
		err = c.Conn.SetReadDeadline(time.Time{})
	}
	if c.past.Load()&writePast != 0 && !passed(c.write.Load(), now) {
		c.past.And(^writePast)
		if e := c.Conn.SetWriteDeadline(time.Time{}); err == nil {
			err = e
		}
	}
	return err
}

func passed(d, now int64) bool { return d != 0 && d <= now }

// sweep enforces the deadlines that have passed at now.
func (c *sweptConn) sweep(now int64) {
	r := passed(c.read.Load(), now) && c.past.Load()&readPast == 0
	w := passed(c.write.Load(), now) && c.past.Load()&writePast == 0
	if !r && !w {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r {
		c.past.Or(readPast)
		if passed(c.read.Load(), now) {
			c.Conn.SetReadDeadline(longAgo)
		} else {
			c.past.And(^readPast) // a new deadline came meanwhile
		}
	}
	if w {
		c.past.Or(writePast)
		if passed(c.write.Load(), now) {
			c.Conn.SetWriteDeadline(longAgo)
		} else {
			c.past.And(^writePast)
		}
	}
}

func (c *sweptConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.shard.mu.Lock()
		delete(c.shard.conns, c)
		c.shard.mu.Unlock()
		if c.ln.open.Add(-1) == 0 && c.ln.closed.Load() {
			c.ln.poke()
		}
	}
	return c.Conn.Close()
}

// rawConn is the connection c wraps, if the listener swept its deadlines.
func rawConn(c net.Conn) net.Conn {
	if sc, ok := c.(*sweptConn); ok {
		return sc.Conn
	}
	return c
}
