package notify

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/onsale/onsale/core"
)

// smtpSink is an in-process SMTP server that keeps what it receives.
type smtpSink struct {
	mu   sync.Mutex
	msgs []string
	rcpt []string
}

func (s *smtpSink) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }

type session struct{ s *smtpSink }

func (x *session) Mail(string, *smtp.MailOptions) error { return nil }
func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.s.mu.Lock()
	x.s.rcpt = append(x.s.rcpt, to)
	x.s.mu.Unlock()
	return nil
}
func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, string(b))
	x.s.mu.Unlock()
	return err
}
func (x *session) Reset()        {}
func (x *session) Logout() error { return nil }

func TestSendTickets(t *testing.T) {
	sink := &smtpSink{}
	srv := smtp.NewServer(sink)
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	m := &Mailer{Host: "127.0.0.1", Port: port, From: "tickets@onsale.test", Security: NoTLS}
	b := &core.Booking{ID: 17, Email: "fan@example.com", Quantity: 2}
	tickets := []Ticket{
		{Ticket: core.Ticket{ID: "t-1", Seat: "NL1-J-14", N: 1, Payload: "t1.aaa.bbb"}, PNG: []byte("\x89PNG-1")},
		{Ticket: core.Ticket{ID: "t-2", Seat: "NL1-J-15", N: 2, Payload: "t1.ccc.ddd"}, PNG: []byte("\x89PNG-2")},
	}
	if err := m.SendTickets(context.Background(), b, "Arijit Singh Live", "http://onsale.test/tickets/1#tok", tickets); err != nil {
		t.Fatalf("SendTickets: %v", err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.msgs) != 1 || len(sink.rcpt) != 1 || sink.rcpt[0] != "fan@example.com" {
		t.Fatalf("sink got %d messages to %v", len(sink.msgs), sink.rcpt)
	}
	msg := sink.msgs[0]
	for _, want := range []string{"booking 17", "t1.aaa.bbb", "t1.ccc.ddd", `filename="ticket-t-1.png"`, `filename="ticket-t-2.png"`, "NL1-J-15"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q", want)
		}
	}
}

func TestSMS(t *testing.T) {
	var got map[string]string
	fail := true
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer gw.Close()
	s := &SMS{URL: gw.URL}
	if err := s.Send(context.Background(), "+919800000000", "hi"); err == nil {
		t.Fatal("Send succeeded against a failing gateway; the outbox would not retry")
	}
	fail = false
	if err := s.Send(context.Background(), "+919800000000", "hi"); err != nil || got["to"] != "+919800000000" || got["body"] != "hi" {
		t.Fatalf("Send = %v, gateway got %v", err, got)
	}
}

// The cancellation's words follow where the money is: tickets issued (the
// money taken) or none, refunded or (a card never charged) released.
func TestCancelWords(t *testing.T) {
	for _, tc := range []struct {
		flow     core.Flow
		captured bool
		want     []string
		not      []string
	}{
		{core.FlowAsync, true, []string{"2 ticket(s) are no longer valid", "is being refunded"}, []string{"no ticket will be issued", "released"}},
		{core.FlowAsync, false, []string{"no ticket will be issued", "is being refunded"}, []string{"no longer valid", "released"}},
		{core.FlowSync, true, []string{"2 ticket(s) are no longer valid", "is being refunded"}, []string{"released"}},
		{core.FlowSync, false, []string{"no ticket will be issued", "nothing was charged", "released"}, []string{"refunded to the account"}},
	} {
		b := &core.Booking{ID: 7, Quantity: 2, AmountPaise: 150000, Flow: tc.flow, Captured: tc.captured}
		text := CancelText(b, "Dune", "The projector failed.", "https://t.example/b/7")
		sms := CancelSMS(b, "Dune", "https://t.example/b/7")
		for _, w := range tc.want {
			if !strings.Contains(text, w) && !strings.Contains(sms, w) {
				t.Errorf("%s captured=%v: neither the email nor the SMS says %q:\n%s\n%s", tc.flow, tc.captured, w, text, sms)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(text, w) || strings.Contains(sms, w) {
				t.Errorf("%s captured=%v: says %q:\n%s\n%s", tc.flow, tc.captured, w, text, sms)
			}
		}
		if !strings.Contains(sms, "CANCELLED") || !strings.Contains(sms, "Rs 1500.00") {
			t.Errorf("SMS = %q", sms)
		}
	}
}
