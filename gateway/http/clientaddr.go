package http

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/valyala/fasthttp"
)

// The client address is what the per-address limits count, what the core is
// told in X-Onsale-Client-Addr (its per-address sign-in limits) and what the
// logs name. Behind a load balancer the TCP peer is the balancer, so every
// fan would share one bucket; two ways tell the gateway who is behind it,
// both only from peers the operator listed as trusted proxies:
//
//   - PROXY protocol (v1 or v2, HAProxy's send-proxy-v2): Listen wraps the
//     listener so that a trusted peer's connection must open with the header
//     and its source becomes the connection's peer address; anyone else's
//     connection is served as it is, and a PROXY header from them is refused
//     (the connection is closed), so a fan cannot claim another address.
//   - X-Forwarded-For (an HTTP-mode balancer): believed only when the peer
//     (after PROXY protocol) is trusted; see clientAddr.

// TrustedProxies is the set of addresses whose PROXY headers and
// X-Forwarded-For the gateway believes. The zero value trusts no one.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// ParseTrustedProxies reads CIDRs ("10.0.0.0/8", "2001:db8::/32") and single
// addresses ("10.1.2.3", "::1"); it refuses anything else, naming it. IPv4
// addresses written as IPv4-mapped IPv6 count as IPv4.
func ParseTrustedProxies(list []string) (TrustedProxies, error) {
	var t TrustedProxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				return TrustedProxies{}, fmt.Errorf("trusted proxy %q: not an address or CIDR", s)
			}
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
		} else {
			a, err := netip.ParseAddr(s)
			if err != nil || a.Zone() != "" {
				return TrustedProxies{}, fmt.Errorf("trusted proxy %q: not an address or CIDR", s)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Empty reports whether no one is trusted.
func (t TrustedProxies) Empty() bool { return len(t.prefixes) == 0 }

// Contains reports whether a is a trusted proxy.
func (t TrustedProxies) Contains(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr decides the client's address from the connection's peer (after
// PROXY protocol) and the X-Forwarded-For values, in the order received
// (several headers are one list).
//
// From an untrusted peer the header is ignored: anyone can write it. From a
// trusted peer the chain is read from the right, where each trusted proxy
// appended the peer it saw: the first address that is not itself trusted is
// the client; entries left of it were written by the client and prove
// nothing. If the walk meets an entry that is not an address, it stops at the
// last trusted hop (the nearest address the gateway can vouch for); if every
// entry is trusted, the leftmost is the client (a request from inside).
func clientAddr(peer netip.Addr, xff [][]byte, trusted TrustedProxies) netip.Addr {
	peer = peer.Unmap().WithZone("")
	if !trusted.Contains(peer) {
		return peer
	}
	var hops [][]byte
	for _, h := range xff {
		hops = append(hops, bytes.Split(h, []byte{','})...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		h := bytes.TrimSpace(hops[i])
		if len(h) == 0 {
			continue // "a,,b" or an empty header: no hop written
		}
		a, ok := parseHop(string(h))
		if !ok {
			break
		}
		client = a
		if !trusted.Contains(a) {
			break
		}
	}
	return client
}

// parseHop reads one X-Forwarded-For entry: an address, or an address with
// a port ("192.0.2.1:5000", "[2001:db8::1]:443"), as some proxies write.
func parseHop(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

// clientIP is the request's client address (clientAddr): every per-address
// limit, the core's X-Onsale-Client-Addr and the logs go through it.
func (s *Server) clientIP(ctx *fasthttp.RequestCtx) string {
	peer, ok := netip.AddrFromSlice(ctx.RemoteIP())
	if !ok {
		return ctx.RemoteIP().String()
	}
	if s.cfg.TrustedProxies.Empty() {
		return peer.Unmap().String()
	}
	return clientAddr(peer, ctx.Request.Header.PeekAll(fasthttp.HeaderXForwardedFor), s.cfg.TrustedProxies).String()
}

// upstreamAddr is the address of the peer of the request's connection
// itself: under PROXY protocol (Listen) the balancer that sent the header,
// not the source the header named (which RemoteIP gives); otherwise the
// peer RemoteIP gives.
func upstreamAddr(ctx *fasthttp.RequestCtx) (netip.Addr, bool) {
	if pc, ok := rawConn(ctx.Conn()).(*proxyproto.Conn); ok {
		if tcp, ok := pc.Raw().RemoteAddr().(*net.TCPAddr); ok {
			return tcp.AddrPort().Addr().Unmap(), true
		}
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(ctx.RemoteIP())
	return a.Unmap(), ok
}

// Listen listens on addr (TCP). With proxyProtocol, a connection from a
// trusted proxy must open with a PROXY protocol header (v1 or v2) whose
// source becomes the connection's remote address, and is closed without it;
// a connection from anyone else is served as it is, and closed if it sends a
// PROXY header. proxyProtocol with no trusted proxies is refused: no one
// could send the header. The connections' deadlines are kept and enforced
// by a sweep a second (deadline.go): setting them costs a request nothing.
func Listen(addr string, trusted TrustedProxies, proxyProtocol bool) (net.Listener, error) {
	if proxyProtocol && trusted.Empty() {
		return nil, fmt.Errorf("listen %s: PROXY protocol needs trusted proxies", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if !proxyProtocol {
		return sweepDeadlines(ln), nil
	}
	return sweepDeadlines(&proxyproto.Listener{Listener: ln, ReadHeaderTimeout: 10 * time.Second,
		ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
			if tcp, ok := o.Upstream.(*net.TCPAddr); ok && trusted.Contains(tcp.AddrPort().Addr()) {
				return proxyproto.REQUIRE, nil
			}
			return proxyproto.REJECT, nil
		}}), nil
}
