package http

import (
	"net/netip"
	"testing"
)

// The X-Forwarded-For rule: believed only from a trusted peer, read from the
// right up to the first address that is not a trusted proxy. The controls:
// the same headers from an untrusted peer, and with no one trusted, name the
// peer, and the leftmost entry (what a naive reader takes) is a lie the
// client wrote.
func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies([]string{"10.0.0.0/8", " 192.168.1.5 ", "2001:db8:ffff::/48", "::ffff:172.16.0.0/108"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		trusted    TrustedProxies
		want       string
	}{
		{"untrusted peer, no header", "203.0.113.7", nil, trusted, "203.0.113.7"},
		{"untrusted peer: its header is ignored", "203.0.113.7", []string{"198.51.100.1"}, trusted, "203.0.113.7"},
		{"untrusted peer claiming a chain", "203.0.113.7", []string{"198.51.100.1, 10.0.0.1"}, trusted, "203.0.113.7"},
		{"no one trusted: the header is ignored", "10.0.0.1", []string{"198.51.100.1"}, TrustedProxies{}, "10.0.0.1"},
		{"trusted peer, no header: the peer", "10.0.0.1", nil, trusted, "10.0.0.1"},
		{"trusted peer, empty header: the peer", "10.0.0.1", []string{""}, trusted, "10.0.0.1"},
		{"trusted peer, one hop", "10.0.0.1", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"single trusted address", "192.168.1.5", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"an address beside the single trusted one is not trusted", "192.168.1.6", []string{"198.51.100.1"}, trusted, "192.168.1.6"},
		{"client's forged entries left of the real one", "10.0.0.1", []string{"1.2.3.4, 5.6.7.8, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"chain of trusted proxies", "10.0.0.1", []string{"1.2.3.4, 198.51.100.1, 10.9.9.9, 192.168.1.5"}, trusted, "198.51.100.1"},
		{"several headers are one list", "10.0.0.1", []string{"1.2.3.4", "198.51.100.1, 10.2.2.2"}, trusted, "198.51.100.1"},
		{"all trusted: the leftmost", "10.0.0.1", []string{"10.3.3.3, 10.2.2.2"}, trusted, "10.3.3.3"},
		{"garbage at the right: the trusted peer", "10.0.0.1", []string{"198.51.100.1, not-an-ip"}, trusted, "10.0.0.1"},
		{"garbage behind trusted hops: the last trusted hop", "10.0.0.1", []string{"<script>, 10.2.2.2"}, trusted, "10.2.2.2"},
		{"garbage left of the client is never read", "10.0.0.1", []string{"garbage, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"empty entries are skipped", "10.0.0.1", []string{"198.51.100.1, , 10.2.2.2"}, trusted, "198.51.100.1"},
		{"address with a port", "10.0.0.1", []string{"198.51.100.1:5555"}, trusted, "198.51.100.1"},
		{"IPv6 client", "10.0.0.1", []string{"2001:db8::1"}, trusted, "2001:db8::1"},
		{"IPv6 client with a port", "10.0.0.1", []string{"[2001:db8::1]:443"}, trusted, "2001:db8::1"},
		{"IPv6 trusted peer", "2001:db8:ffff::2", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"IPv6 untrusted peer", "2001:db8:eeee::2", []string{"198.51.100.1"}, trusted, "2001:db8:eeee::2"},
		{"IPv6 trusted hop", "10.0.0.1", []string{"2001:db8::1, 2001:db8:ffff::9"}, trusted, "2001:db8::1"},
		{"IPv4-mapped peer counts as IPv4", "::ffff:10.0.0.1", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"IPv4-mapped trusted range", "172.16.3.4", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"zone dropped", "10.0.0.1", []string{"fe80::1%eth0"}, trusted, "fe80::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var xff [][]byte
			for _, h := range tc.xff {
				xff = append(xff, []byte(h))
			}
			if got := clientAddr(netip.MustParseAddr(tc.peer), xff, tc.trusted); got.String() != tc.want {
				t.Errorf("clientAddr(%s, %q) = %s; want %s", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0", "fe80::1%eth0", "10.0.0.1/8/8"} {
		if _, err := ParseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("ParseTrustedProxies(%q) = nil error; want refused", bad)
		}
	}
	tp, err := ParseTrustedProxies([]string{"", " "})
	if err != nil || !tp.Empty() {
		t.Errorf("ParseTrustedProxies(blank) = %v, %v; want empty", tp, err)
	}
}
