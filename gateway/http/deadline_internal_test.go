package http

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// sweptPair is a connection accepted by a swept listener, and its client.
func sweptPair(t *testing.T) (*sweptConn, net.Conn) {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", TrustedProxies{}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*sweptConn), client
}

// A kept deadline ends a read or a write waiting past it, as the runtime's
// would (a sweep late at most), and a later deadline makes the connection
// usable again: the write deadline of an answer, run out while the
// connection sat idle, must not fail the next answer.
func TestSweptDeadlines(t *testing.T) {
	c, client := sweptPair(t)
	buf := make([]byte, 64)

	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline = %v; want %v", err, os.ErrDeadlineExceeded)
	}
	c.SetReadDeadline(time.Now().Add(time.Hour))
	client.Write([]byte("x"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "x" {
		t.Fatalf("read after a later deadline = %q, %v; want x", buf[:n], err)
	}

	// A write deadline that passes while nothing is written: the sweep
	// enforces it (the control: a write now fails), and the next
	// answer's deadline lifts it.
	c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	for c.past.Load()&writePast == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Write([]byte("y")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past its deadline = %v; want %v", err, os.ErrDeadlineExceeded)
	}
	c.SetWriteDeadline(time.Now().Add(time.Hour))
	if _, err := c.Write([]byte("z")); err != nil {
		t.Fatalf("write after a later deadline = %v", err)
	}
	if n, err := client.Read(buf); err != nil || string(buf[:n]) != "z" {
		t.Fatalf("client read %q, %v; want z", buf[:n], err)
	}

	// A write waiting on a client that reads nothing ends at its deadline.
	c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	big := make([]byte, 1<<20)
	var err error
	for err == nil {
		_, err = c.Write(big)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stalled write = %v; want %v", err, os.ErrDeadlineExceeded)
	}
}

// A header sent a byte at a time on Listen's listener is cut by the
// server's ReadTimeout (slowloris), the deadline kept and swept.
func TestSweptSlowHeader(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", TrustedProxies{}, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {}, ReadTimeout: 100 * time.Millisecond}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(conn)
		closed <- string(b)
	}()
	conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: "))
	// The timeout is 0.1 s and a sweep a second: cut within 1.1 s, 10 s
	// on a busy machine; a sweep late by more is a defect.
	giveUp := time.After(10 * time.Second)
	for {
		select {
		case got := <-closed:
			if first, _, _ := strings.Cut(got, "\r\n"); strings.Contains(first, " 200 ") {
				t.Errorf("the slow request was answered %q; want it refused", first)
			}
			return
		case <-giveUp:
			t.Fatal("a header sent a byte at a time kept its connection open for 10 s (ReadTimeout 0.1 s, a sweep a second)")
		case <-time.After(20 * time.Millisecond):
			conn.Write([]byte("a"))
		}
	}
}
