package http

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// fuzzTrusted is the proxies the X-Forwarded-For target trusts: a v4 and
// a v6 range and one v4 address.
var fuzzTrusted, _ = ParseTrustedProxies([]string{"10.0.0.0/8", "192.168.1.5", "2001:db8:ffff::/48"})

// FuzzClientAddr feeds the client-address rule any peer and any
// X-Forwarded-For values. The properties that make it safe to key limits
// on:
//   - the answer is a plain address (no zone, no IPv4-mapped form);
//   - from an untrusted peer the header changes nothing;
//   - the answer is the peer or an address the header names, and every
//     entry right of the one chosen (up to one that is not an address, where
//     the walk stops) is a trusted proxy: no untrusted hop was skipped;
//   - once the answer is not a trusted proxy, nothing the client writes
//     left of it (another header value prepended) changes it.
func FuzzClientAddr(f *testing.F) {
	for _, c := range []struct{ peer, xff, forged string }{
		{"203.0.113.7", "198.51.100.1", "1.1.1.1"},
		{"10.0.0.1", "1.2.3.4, 198.51.100.1, 10.9.9.9, 192.168.1.5", "10.1.1.1"},
		{"10.0.0.1", "198.51.100.1, not-an-ip", "1.1.1.1"},
		{"10.0.0.1", "<script>, 10.2.2.2", ""},
		{"::ffff:10.0.0.1", "[2001:db8::1]:443, ::ffff:10.2.2.2", "x"},
		{"2001:db8:ffff::1", "fe80::1%eth0", "10.0.0.9"},
		{"10.0.0.1", ",,,", "1.1.1.1"},
		{"192.168.1.5", "198.51.100.1:5000", "1.1.1.1, 10.0.0.2"},
	} {
		f.Add(c.peer, c.xff, c.forged)
	}
	f.Fuzz(func(t *testing.T, peerText, xff, forged string) {
		peer, err := netip.ParseAddr(peerText)
		if err != nil {
			return
		}
		hdr := [][]byte{[]byte(xff)}
		got := clientAddr(peer, hdr, fuzzTrusted)
		if got.Zone() != "" || got.Is4In6() || !got.IsValid() {
			t.Fatalf("clientAddr(%s, %q) = %v; want a plain address", peer, xff, got)
		}
		plainPeer := peer.Unmap().WithZone("")
		if !fuzzTrusted.Contains(peer) {
			if got != plainPeer {
				t.Fatalf("clientAddr(untrusted %s, %q) = %v; want the peer", peer, xff, got)
			}
			return
		}
		// where in the chain the answer came from (-1: the peer)
		hops := strings.Split(xff, ",")
		at := -1
		for i := len(hops) - 1; i >= 0; i-- {
			if a, ok := parseHop(strings.TrimSpace(hops[i])); ok && a == got {
				at = i
				break
			}
		}
		if at < 0 && got != plainPeer {
			t.Fatalf("clientAddr(%s, %q) = %v: neither the peer nor a hop", peer, xff, got)
		}
		for i := len(hops) - 1; i > at; i-- { // right of the answer, up to an entry that is no address
			h := strings.TrimSpace(hops[i])
			if h == "" {
				continue
			}
			a, ok := parseHop(h)
			if !ok {
				break
			}
			if !fuzzTrusted.Contains(a) && a != got {
				t.Fatalf("clientAddr(%s, %q) = %v, skipping the untrusted hop %q", peer, xff, got, h)
			}
		}
		if !fuzzTrusted.Contains(got) {
			if again := clientAddr(peer, [][]byte{[]byte(forged), []byte(xff)}, fuzzTrusted); again != got {
				t.Fatalf("clientAddr(%s, %q) = %v, but %v with %q written before it", peer, xff, got, again, forged)
			}
		}
	})
}

// FuzzParseTrustedProxies: the setting is refused with an error, or each
// entry it accepts is trusted itself (an address, or a range's own first
// address), and an IPv4 entry is trusted in its IPv4-mapped form too.
func FuzzParseTrustedProxies(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", " 192.168.1.5 ", "::ffff:172.16.0.0/108", "2001:db8::/32", "fe80::1%eth0",
		"10.0.0.1/33", "10.0.0.0/-1", "", "garbage", "::ffff:10.0.0.1", "0.0.0.0/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := ParseTrustedProxies([]string{s})
		if err != nil {
			return
		}
		s = strings.TrimSpace(s)
		if s == "" {
			if !tp.Empty() {
				t.Fatalf("ParseTrustedProxies(%q) trusts someone", s)
			}
			return
		}
		var a netip.Addr
		if p, err := netip.ParsePrefix(s); err == nil {
			a = p.Masked().Addr()
		} else {
			a = netip.MustParseAddr(s)
		}
		if !tp.Contains(a) {
			t.Fatalf("ParseTrustedProxies(%q) does not trust %v", s, a)
		}
		if a.Unmap().Is4() && !tp.Contains(netip.AddrFrom16(a.Unmap().As16())) {
			t.Fatalf("ParseTrustedProxies(%q) does not trust %v mapped", s, a)
		}
	})
}

// FuzzProxyHeader opens a real connection from a trusted peer (loopback)
// to Listen's PROXY-protocol listener and sends any bytes. The listener
// must agree with the PROXY protocol's reader on the same bytes: without
// a valid header the connection is refused (no byte served); with one, the
// bytes after it are served, from the header's source address when the
// header proxies a TCP connection.
func FuzzProxyHeader(f *testing.F) {
	v1 := "PROXY TCP4 198.51.100.7 10.0.0.1 40000 443\r\nGET / HTTP/1.1\r\n\r\n"
	h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 40000},
		&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 443})
	v2, _ := h.Format()
	for _, b := range [][]byte{[]byte(v1), append(v2, "GET / HTTP/1.1\r\n\r\n"...), []byte("GET / HTTP/1.1\r\n\r\n"),
		[]byte("PROXY UNKNOWN\r\nx"), []byte("PROXY TCP4 999.1.1.1 10.0.0.1 1 2\r\n"), v2[:10], []byte("PROXY TCP4 1.2.3.4 ")} {
		f.Add(b)
	}
	trusted, _ := ParseTrustedProxies([]string{"127.0.0.0/8"})
	ln, err := Listen("127.0.0.1:0", trusted, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.Write(data)
			c.(*net.TCPConn).CloseWrite()
		}()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		sc.SetDeadline(time.Now().Add(5 * time.Second)) // a hang must end the try, not the run
		served, readErr := io.ReadAll(sc)

		r := bufio.NewReader(bytes.NewReader(data))
		want, err := proxyproto.Read(r)
		if err != nil {
			if readErr == nil || len(served) > 0 {
				t.Fatalf("bytes %q without a valid PROXY header (%v) were served: %q", data, err, served)
			}
			return
		}
		rest, _ := io.ReadAll(r)
		if readErr != nil || !bytes.Equal(served, rest) {
			t.Fatalf("bytes %q: served %q, %v; want %q after the header", data, served, readErr, rest)
		}
		if src, ok := want.SourceAddr.(*net.TCPAddr); ok && want.Command.IsProxy() && want.TransportProtocol.IsStream() {
			if got, ok := sc.RemoteAddr().(*net.TCPAddr); !ok || !got.IP.Equal(src.IP) || got.Port != src.Port {
				t.Fatalf("bytes %q: remote address %v; want the header's source %v", data, sc.RemoteAddr(), src)
			}
		}
	})
}
