package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// holdClient is one benchmark client's HTTP/1.1 connection to the core,
// kept alive across its requests: each request goes out in one write, and
// of the answer only the status, Content-Length and Connection are read.
// The API is measured beside pgbench, a C client spending about 15 µs of
// CPU per transaction on the same two cores; net/http's client spent 53 µs
// per hold (three goroutines per request, a header map per answer), CPU
// that the core and PostgreSQL under test did not get.
type holdClient struct {
	addr string // host:port
	head []byte // the request line and headers up to the Content-Length value
	conn net.Conn
	r    *bufio.Reader
	w    []byte
}

// newHoldClient posts to base (http://host:port) + path with the bearer
// token tok; it dials on the first post.
func newHoldClient(base, path, tok string) (*holdClient, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("core URL %q: want http://host:port", base)
	}
	head := "POST " + u.Path + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + tok +
		"\r\nContent-Type: application/json\r\nContent-Length: "
	return &holdClient{addr: u.Host, head: []byte(head)}, nil
}

// post sends body and returns the answer's status code, the body read and
// dropped.
func (c *holdClient) post(body []byte) (int, error) {
	if c.conn == nil {
		conn, err := net.DialTimeout("tcp", c.addr, 10*time.Second)
		if err != nil {
			return 0, err
		}
		c.conn, c.r = conn, bufio.NewReaderSize(conn, 4096)
	}
	c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	c.w = append(c.w[:0], c.head...)
	c.w = strconv.AppendInt(c.w, int64(len(body)), 10)
	c.w = append(c.w, "\r\n\r\n"...)
	c.w = append(c.w, body...)
	code, err := c.exchange()
	if err != nil {
		c.Close()
	}
	return code, err
}

func (c *holdClient) exchange() (int, error) {
	if _, err := c.conn.Write(c.w); err != nil {
		return 0, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("answer starts %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, fmt.Errorf("answer starts %q", line)
	}
	length, closing := -1, false
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, fmt.Errorf("Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			closing = true
		}
	}
	if length < 0 {
		return 0, errors.New("an answer without Content-Length")
	}
	if _, err := c.r.Discard(length); err != nil {
		return 0, err
	}
	if closing {
		c.Close()
	}
	return code, nil
}

// Close closes the connection; the next post dials again.
func (c *holdClient) Close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.r = nil, nil
	}
}
