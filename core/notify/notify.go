// Package notify delivers tickets to fans: email through SMTP (go-mail
// composes the MIME message with one QR PNG per ticket) and SMS through an
// HTTP gateway. Both are called from the outbox, which retries them.
package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/onsale/onsale/core"
)

// Ticket is a ticket ready to send: its signed payload and QR image.
type Ticket struct {
	core.Ticket
	PNG []byte
}

// Security is how a Mailer protects its connection to the relay.
type Security int

// The zero Security is StartTLS: a relay on the internet (the submission
// port, 587) speaks plain SMTP first and upgrades, and a mailer that sent
// anyway when the upgrade is missing would hand fans' tickets and the
// relay password to whoever sits on the path.
const (
	StartTLS    Security = iota // STARTTLS required: no upgrade, no mail
	ImplicitTLS                 // TLS from the first byte (port 465)
	NoTLS                       // plain: a relay on the same host or a test sink only
)

// ParseSecurity reads the ONSALE_SMTP_TLS setting: starttls, tls or off.
func ParseSecurity(s string) (Security, error) {
	switch s {
	case "starttls", "":
		return StartTLS, nil
	case "tls":
		return ImplicitTLS, nil
	case "off":
		return NoTLS, nil
	}
	return 0, fmt.Errorf("smtp tls %q: want starttls, tls or off", s)
}

// Mailer sends ticket emails over SMTP.
type Mailer struct {
	Host     string
	Port     int
	From     string
	Username string // empty: no authentication
	Password string
	Security Security
	// RootCAs verifies the relay's certificate (for Host); nil: the system
	// roots.
	RootCAs *x509.CertPool
}

// SendTickets mails a booking's tickets to the booking's email address.
// link opens the tickets in a browser (TicketLink).
func (m *Mailer) SendTickets(ctx context.Context, b *core.Booking, event, link string, tickets []Ticket) error {
	msg := mail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := msg.To(b.Email); err != nil {
		return fmt.Errorf("mail to: %w", err)
	}
	msg.Subject(fmt.Sprintf("Your tickets: %s (booking %d)", event, b.ID))
	var body strings.Builder
	fmt.Fprintf(&body, "Booking %d is confirmed: %d ticket(s) for %s.\n\n", b.ID, len(tickets), event)
	for _, t := range tickets {
		seat := t.Seat
		if seat == "" {
			seat = fmt.Sprintf("general admission #%d", t.N)
		}
		fmt.Fprintf(&body, "Ticket %s, %s\n  %s\n\n", t.ID, seat, t.Payload)
	}
	body.WriteString("Show the QR code of each ticket at the gate. It works offline.\n")
	if link != "" {
		fmt.Fprintf(&body, "\nYour tickets online: %s\n", link)
	}
	msg.SetBodyString(mail.TypeTextPlain, body.String())
	for _, t := range tickets {
		if err := msg.AttachReader("ticket-"+t.ID+".png", bytes.NewReader(t.PNG)); err != nil {
			return fmt.Errorf("attach: %w", err)
		}
	}
	return m.send(ctx, msg)
}

// SendCancellation tells a booking's holder by email that the show was
// cancelled, why, and that the whole amount is going back to how they paid
// (refunded; a card authorization never captured is released). link opens
// the booking's page.
func (m *Mailer) SendCancellation(ctx context.Context, b *core.Booking, event, reason, link string) error {
	msg := mail.NewMsg()
	if err := msg.From(m.From); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	if err := msg.To(b.Email); err != nil {
		return fmt.Errorf("mail to: %w", err)
	}
	subject := "your money is on its way back"
	if b.Flow == core.FlowSync && !b.Captured {
		subject = "nothing was charged"
	}
	msg.Subject(fmt.Sprintf("Cancelled: %s (booking %d): %s", event, b.ID, subject))
	msg.SetBodyString(mail.TypeTextPlain, CancelText(b, event, reason, link))
	return m.send(ctx, msg)
}

// CancelText is the message of a cancelled show's booking.
func CancelText(b *core.Booking, event, reason, link string) string {
	var body strings.Builder
	fmt.Fprintf(&body, "%s has been cancelled.", event)
	if reason != "" {
		fmt.Fprintf(&body, " %s", reason)
	}
	// A booking whose money was never taken (paid as the show was
	// cancelled, or a card not yet captured) was never given tickets.
	tickets := fmt.Sprintf("your %d ticket(s) are no longer valid", b.Quantity)
	if !b.Captured {
		tickets = "no ticket will be issued"
	}
	if b.Flow == core.FlowSync && !b.Captured {
		// A card authorized, not charged: the hold on it is released.
		fmt.Fprintf(&body, "\n\nBooking %d: %s, and nothing was charged: the Rs %d.%02d held on your card is being released. ",
			b.ID, tickets, b.AmountPaise/100, b.AmountPaise%100)
		body.WriteString("Banks usually show it within a few working days. You need to do nothing.\n")
	} else {
		fmt.Fprintf(&body, "\n\nBooking %d: %s, and the full amount, Rs %d.%02d, is being refunded to the account you paid from. ",
			b.ID, tickets, b.AmountPaise/100, b.AmountPaise%100)
		body.WriteString("Banks usually show it within 5 to 7 working days. You need to do nothing.\n")
	}
	if link != "" {
		fmt.Fprintf(&body, "\nYour booking: %s\n", link)
	}
	return body.String()
}

// CancelSMS is the text message of a cancelled show's booking.
func CancelSMS(b *core.Booking, event, link string) string {
	tickets := "your tickets are void"
	if !b.Captured {
		tickets = "no ticket will be issued"
	}
	money := "is being refunded to you"
	if b.Flow == core.FlowSync && !b.Captured {
		money = "held on your card is being released, nothing charged"
	}
	return fmt.Sprintf("onsale: %s is CANCELLED. Booking %d: Rs %d.%02d %s; %s. Details: %s",
		event, b.ID, b.AmountPaise/100, b.AmountPaise%100, money, tickets, link)
}

// send delivers one message through the relay.
func (m *Mailer) send(ctx context.Context, msg *mail.Msg) error {
	opts := []mail.Option{mail.WithPort(m.Port), mail.WithTimeout(10 * time.Second),
		mail.WithTLSConfig(&tls.Config{ServerName: m.Host, RootCAs: m.RootCAs, MinVersion: tls.VersionTLS12})}
	switch m.Security {
	case StartTLS:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case ImplicitTLS:
		opts = append(opts, mail.WithSSL(), mail.WithPort(m.Port))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	}
	if m.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(m.Username), mail.WithPassword(m.Password))
	}
	c, err := mail.NewClient(m.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("smtp send: %w", err)
	}
	return nil
}

// SMS posts text messages to an HTTP SMS gateway as {"to": ..., "body": ...}.
type SMS struct {
	URL  string
	HTTP *http.Client
}

// Send sends one message; any non-2xx answer is an error (to retry).
func (s *SMS) Send(ctx context.Context, to, text string) error {
	b, _ := json.Marshal(map[string]string{"to": to, "body": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := s.HTTP
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("sms: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("sms: gateway answered %s", resp.Status)
	}
	return nil
}

// TicketSMS is the text message of a confirmed booking.
func TicketSMS(b *core.Booking, event, link string) string {
	return fmt.Sprintf("onsale: booking %d confirmed, %d ticket(s) for %s. Your QR tickets: %s", b.ID, b.Quantity, event, link)
}

// TicketLink is the address of a booking's tickets page on the gateway's
// public address, with the ticket-link token in the fragment (never sent
// to a server; empty: no fragment).
func TicketLink(publicURL string, booking int64, token string) string {
	link := strings.TrimRight(publicURL, "/") + "/tickets/" + strconv.FormatInt(booking, 10)
	if token != "" {
		link += "#" + token
	}
	return link
}
