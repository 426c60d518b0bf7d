package notify

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/tlstest"
)

// relay is a real SMTP server (go-smtp) as a mail provider runs one: it
// offers STARTTLS (or speaks TLS from the first byte), takes AUTH PLAIN
// only over TLS, and records for each delivered message whether the
// session was encrypted and authenticated.
type relay struct {
	mu        sync.Mutex
	delivered []delivery
}

type delivery struct{ tls, auth bool }

func (r *relay) NewSession(c *smtp.Conn) (smtp.Session, error) { return &relaySession{r: r, c: c}, nil }

type relaySession struct {
	r    *relay
	c    *smtp.Conn
	auth bool
}

func (s *relaySession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *relaySession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "onsale" || pass != "relay pw" {
			return errors.New("bad credentials")
		}
		s.auth = true
		return nil
	}), nil
}
func (s *relaySession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *relaySession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *relaySession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	_, isTLS := s.c.TLSConnectionState()
	s.r.mu.Lock()
	s.r.delivered = append(s.r.delivered, delivery{tls: isTLS, auth: s.auth})
	s.r.mu.Unlock()
	return nil
}
func (s *relaySession) Reset()        {}
func (s *relaySession) Logout() error { return nil }

// startRelay serves a relay on 127.0.0.1: mode "starttls" offers the
// upgrade, "tls" is TLS from the first byte, "plain" offers no TLS at all.
func startRelay(t *testing.T, ca *tlstest.CA, mode string) (*relay, int) {
	t.Helper()
	r := &relay{}
	srv := smtp.NewServer(r)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.Server}}
	switch mode {
	case "starttls":
		srv.TLSConfig = cfg
	case "tls":
		ln = tls.NewListener(ln, cfg)
	case "plain":
		srv.AllowInsecureAuth = true // a relay that would take the password in clear
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return r, ln.Addr().(*net.TCPAddr).Port
}

// Ticket mail reaches a relay over TLS, its certificate verified (here
// against a test CA), the password sent only inside TLS. A relay that
// offers no STARTTLS gets nothing (not even the password), nor does one
// whose certificate the mailer does not trust.
func TestSendTicketsTLS(t *testing.T) {
	ca := tlstest.New(t)
	b := &core.Booking{ID: 7, Email: "fan@example.com", Quantity: 1}
	tickets := []Ticket{{Ticket: core.Ticket{ID: "t-1", Seat: "A-1", N: 1, Payload: "t1.a.b"}, PNG: []byte("\x89PNG")}}
	for _, tc := range []struct {
		name     string
		relay    string
		security Security
		trust    bool
		wantSent bool
	}{
		{"starttls", "starttls", StartTLS, true, true},
		{"implicit tls", "tls", ImplicitTLS, true, true},
		{"starttls refused by a plain relay", "plain", StartTLS, true, false},
		{"starttls to an untrusted certificate", "starttls", StartTLS, false, false},
		{"control: off sends in clear", "plain", NoTLS, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, port := startRelay(t, ca, tc.relay)
			m := &Mailer{Host: "localhost", Port: port, From: "tickets@onsale.test", Username: "onsale", Password: "relay pw",
				Security: tc.security}
			if tc.trust {
				m.RootCAs = ca.Pool
			}
			err := m.SendTickets(context.Background(), b, "Show", "", tickets)
			r.mu.Lock()
			defer r.mu.Unlock()
			if !tc.wantSent {
				if err == nil || len(r.delivered) != 0 {
					t.Fatalf("SendTickets = %v, relay got %v; want an error and nothing delivered", err, r.delivered)
				}
				return
			}
			if err != nil {
				t.Fatalf("SendTickets = %v", err)
			}
			wantTLS := tc.security != NoTLS
			if len(r.delivered) != 1 || r.delivered[0].tls != wantTLS || !r.delivered[0].auth {
				t.Fatalf("relay got %+v; want one message, authenticated, tls %v", r.delivered, wantTLS)
			}
		})
	}
}

func TestParseSecurity(t *testing.T) {
	for in, want := range map[string]Security{"starttls": StartTLS, "": StartTLS, "tls": ImplicitTLS, "off": NoTLS} {
		if got, err := ParseSecurity(in); err != nil || got != want {
			t.Errorf("ParseSecurity(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseSecurity("ssl"); err == nil {
		t.Error(`ParseSecurity("ssl") succeeded`)
	}
}
