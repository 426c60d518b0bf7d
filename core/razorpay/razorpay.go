// Package razorpay is the core's UPI payments through Razorpay: a
// core.PaymentProvider over Razorpay's REST API (a small net/http client of
// its own: razorpay-go loses HTTP statuses, takes no context and cannot be
// given a timeout, and the adapter needs six calls).
//
// A UPI booking is a Payment Link (https://razorpay.com/docs/api/payments/
// payment-links/) whose reference_id is made from the booking's payment key
// (its hold's id and attempt: unique across deployments and restores),
// whose notes name the booking's reference and this deployment's site (the
// public address's host), and whose page offers UPI alone: its id (plink_...) is the booking's payment, its
// short_url the page the fan is sent to (Razorpay's own: no Razorpay script
// runs in onsale's pages), its callback_url the show's booking page.
// Razorpay captures a link's payment itself. payment_link.paid settles the
// booking as paid, payment_link.expired and .cancelled as failed; a failed
// UPI attempt (payment.failed) is not the end of a link (the payer may try
// again on it), so the payment.* events are acknowledged and left to the
// link's. A standard link limited to UPI rather than a UPI link
// (upi_link: true): UPI links work in live mode only and do not send the
// payer back on Android.
//
// Idempotency. Razorpay has an idempotency key for refunds only
// (X-Refund-Idempotency, kept for a time it does not say), so every call
// that moves money is made safe by looking its effect up first:
//   - a link: reference_id is unique at Razorpay ("payment link creation
//     with reference ID already attempted"), one booking one link, so a
//     retry of the create finds the link the first attempt made and
//     returns it (only when its notes, amount and currency are this
//     booking's): never two links, never two payments, for a booking;
//   - a refund: the payment is read first; when it is refunded whole the
//     refund is done (the outbox's check), else it is asked for whole
//     (no amount: Razorpay refunds the rest, never more) under the key.
//     Two workers racing past the read send the same key: Razorpay
//     answers the second with the first's refund or 409 (in flight);
//     after the key is forgotten, Razorpay itself refuses to refund a
//     payment refunded whole;
//   - a cancel (a link not paid): cancelling twice is refused as an
//     expired link, read as done; a link paid meanwhile is refused as paid,
//     read as captured (the outbox refunds it).
//
// Webhooks carry X-Razorpay-Signature, the hex HMAC-SHA256 of the raw body
// with the webhook's secret (compared in constant time, in lower-case hex
// as Razorpay sends it: razorpay-go's own check is the test's oracle), and
// X-Razorpay-Event-Id, the de-duplication key. An event of a link without
// this deployment's site in its notes is acknowledged and ignored (Razorpay
// sends an account's events to each of its webhooks). Razorpay signs no time: a
// body replayed later verifies, and is harmless (an event for a booking
// settled already changes nothing; the event id makes a repeat a
// duplicate).
package razorpay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/onsale/onsale/core"
)

// Header names of Razorpay's webhooks and refunds.
const (
	SignatureHeader   = "X-Razorpay-Signature"
	EventIDHeader     = "X-Razorpay-Event-Id"
	IdempotencyHeader = "X-Refund-Idempotency"
)

// API is Razorpay's API address.
const API = "https://api.razorpay.com"

// linkLife is how long a link stays payable: Razorpay's shortest is 15
// minutes ahead; a payer who pays after the hold is gone is a late payment
// (refunded), one who never does an expired link (failed).
const linkLife = 16 * time.Minute

// Config configures a Client.
type Config struct {
	KeyID     string // rzp_test_... or rzp_live_...
	KeySecret string
	// WebhookSecret is the secret typed in when the webhook was added on
	// the Dashboard (not the key secret).
	WebhookSecret string
	// URL is the API's address: API, or a stand-in (the simulator's
	// Razorpay mode) in tests.
	URL  string
	HTTP *http.Client
	// Site names this deployment (the host of its public address) in the
	// notes of its links.
	Site string
}

// Client is Razorpay, as the core uses it.
type Client struct {
	c Config
}

// New returns a client, or an error for a key id that is not Razorpay's.
func New(c Config) (*Client, error) {
	if !strings.HasPrefix(c.KeyID, "rzp_test_") && !strings.HasPrefix(c.KeyID, "rzp_live_") {
		return nil, errors.New("razorpay: the key id must start rzp_test_ or rzp_live_")
	}
	if c.KeySecret == "" || c.WebhookSecret == "" {
		return nil, errors.New("razorpay: the key secret and the webhook secret are required")
	}
	if c.Site == "" || len(c.Site) > 250 {
		return nil, errors.New("razorpay: the site (the public address's host) must be 1 to 250 bytes")
	}
	if c.URL == "" {
		c.URL = API
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	c.URL = strings.TrimRight(c.URL, "/")
	return &Client{c: c}, nil
}

// Name is "razorpay".
func (c *Client) Name() string { return "razorpay" }

// Takes reports whether Razorpay takes a method here: UPI only (cards go
// through Stripe).
func (c *Client) Takes(method string) bool { return method == "upi" }

// link is Razorpay's Payment Link entity, as far as the adapter reads it.
type link struct {
	ID          string `json:"id"`
	Amount      int64  `json:"amount"`
	AmountPaid  int64  `json:"amount_paid"`
	Currency    string `json:"currency"`
	Status      string `json:"status"` // created, partially_paid, paid, expired, cancelled
	ReferenceID string `json:"reference_id"`
	ShortURL    string `json:"short_url"`
	// Notes is an object, or null or [] in some of Razorpay's answers.
	Notes json.RawMessage `json:"notes"`
	// Payments lists the captured payments (null until one is).
	Payments []struct {
		PaymentID string `json:"payment_id"`
		Amount    int64  `json:"amount"`
		Status    string `json:"status"`
	} `json:"payments"`
}

// rzpPayment is Razorpay's payment entity, as far as the adapter reads it.
type rzpPayment struct {
	ID             string `json:"id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Status         string `json:"status"` // created, authorized, captured, refunded, failed
	AmountRefunded int64  `json:"amount_refunded"`
}

// notes reads a link's notes.
func (l *link) notes() map[string]string {
	var n map[string]string
	_ = json.Unmarshal(l.Notes, &n) // null or []: none
	return n
}

// referenceID is the link's reference_id for a payment key
// (charge:<hold>[:<attempt>]): the hold's id without its dashes and the
// attempt, at most 40 characters, unique wherever the link is made.
func referenceID(key string) string {
	k := strings.ReplaceAll(strings.TrimPrefix(key, "charge:"), "-", "")
	k = strings.ReplaceAll(k, ":", "_")
	if len(k) > 40 {
		sum := sha256.Sum256([]byte(key))
		k = hex.EncodeToString(sum[:20])
	}
	return k
}

// ours reports whether l is this deployment's link for ref ("": any).
func (c *Client) ours(l *link, ref string) bool {
	n := l.notes()
	return n["site"] == c.c.Site && (ref == "" || n["reference"] == ref)
}

// CreatePayment creates the booking's Payment Link, or finds the one an
// earlier attempt made (reference_id is unique at Razorpay). key names the
// link (referenceID): Razorpay has no idempotency key for links.
func (c *Client) CreatePayment(ctx context.Context, key string, r core.PaymentRequest) (*core.Payment, error) {
	if r.Method != "upi" {
		return nil, &core.ProviderError{Status: http.StatusBadRequest, Code: "method_unavailable", Message: "Razorpay takes UPI here"}
	}
	body := map[string]any{
		"amount": r.Amount, "currency": r.Currency, "accept_partial": false, "reference_id": referenceID(key),
		"description": "Tickets, " + r.Reference, "notify": map[string]bool{"sms": false, "email": false},
		"expire_by": time.Now().Add(linkLife).Unix(), "notes": map[string]string{"reference": r.Reference, "site": c.c.Site},
		"options": map[string]any{"checkout": map[string]any{"method": map[string]bool{"upi": true, "card": false, "netbanking": false, "wallet": false}}},
	}
	if r.ReturnURL != "" {
		body["callback_url"], body["callback_method"] = r.ReturnURL, "get"
	}
	var l link
	err := c.do(ctx, http.MethodPost, "/v1/payment_links", nil, body, &l)
	var pe *core.ProviderError
	if errors.As(err, &pe) && pe.Status == http.StatusBadRequest {
		// Most likely a retry: the first attempt made the link (its answer
		// was lost), and Razorpay refuses its reference_id ("payment link
		// creation with reference ID already attempted"; any 400 is looked
		// up, not only that wording).
		links, ferr := c.linksOf(ctx, referenceID(key))
		if ferr != nil || len(links) == 0 {
			return nil, err // Razorpay's refusal, as it said it
		}
		l = links[0]
		if !c.ours(&l, r.Reference) || l.Amount != r.Amount || !strings.EqualFold(l.Currency, r.Currency) {
			return nil, &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state",
				Message: fmt.Sprintf("link %s named %s is not this booking's (notes %s, %d %s)", l.ID, referenceID(key), l.Notes, l.Amount, l.Currency)}
		}
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return c.linkPayment(ctx, &l)
}

// linksOf lists the links of a reference_id.
func (c *Client) linksOf(ctx context.Context, ref string) ([]link, error) {
	var out struct {
		Links []link `json:"payment_links"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/payment_links?reference_id="+url.QueryEscape(ref), nil, nil, &out)
	return out.Links, err
}

// linkPayment is a link in the core's terms; a paid link's refunds are
// read from its payment.
func (c *Client) linkPayment(ctx context.Context, l *link) (*core.Payment, error) {
	p := &core.Payment{ID: l.ID, Amount: l.Amount, Currency: strings.ToUpper(l.Currency), Reference: l.notes()["reference"], Method: "upi"}
	switch l.Status {
	case "paid":
		p.Status, p.AmountCaptured = core.PaymentSucceeded, l.AmountPaid
		if pid := paidWith(l); pid != "" {
			var rp rzpPayment
			if err := c.do(ctx, http.MethodGet, "/v1/payments/"+url.PathEscape(pid), nil, nil, &rp); err != nil {
				return nil, err
			}
			p.AmountRefunded = rp.AmountRefunded
		}
	case "expired":
		p.Status, p.FailureReason = core.PaymentFailed, "the link expired unpaid"
	case "cancelled":
		p.Status = core.PaymentCanceled
	default: // created, partially_paid
		p.Status, p.CheckoutURL = core.PaymentPending, l.ShortURL
	}
	return p, nil
}

// paidWith is the payment that paid a link: captured, or refunded since.
func paidWith(l *link) string {
	for _, p := range l.Payments {
		if p.Status != "failed" && p.PaymentID != "" {
			return p.PaymentID
		}
	}
	return ""
}

// Payment fetches a link.
func (c *Client) Payment(ctx context.Context, id string) (*core.Payment, error) {
	var l link
	if err := c.do(ctx, http.MethodGet, "/v1/payment_links/"+url.PathEscape(id), nil, nil, &l); err != nil {
		return nil, err
	}
	return c.linkPayment(ctx, &l)
}

// PaymentsFor lists the booking's link: the recorded one, or the one made
// under its payment key (Razorpay can search links by reference_id).
func (c *Client) PaymentsFor(ctx context.Context, q core.PaymentLookup) ([]core.Payment, error) {
	if q.PaymentID != "" {
		p, err := c.Payment(ctx, q.PaymentID)
		if err != nil {
			return nil, err
		}
		return []core.Payment{*p}, nil
	}
	links, err := c.linksOf(ctx, referenceID(q.Key))
	if err != nil {
		return nil, err
	}
	out := make([]core.Payment, 0, len(links))
	for i := range links {
		if !c.ours(&links[i], q.Reference) {
			continue
		}
		p, err := c.linkPayment(ctx, &links[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *p)
	}
	return out, nil
}

// Capture: a link's payment is captured by Razorpay itself; a paid link
// is already captured.
func (c *Client) Capture(ctx context.Context, _, id string) (*core.Payment, error) {
	p, err := c.Payment(ctx, id)
	if err != nil {
		return nil, err
	}
	if p.Status == core.PaymentSucceeded {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "already_captured", Message: "Razorpay captured the link's payment"}
	}
	return nil, &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state", Message: "the link is " + p.Status}
}

// Cancel cancels a link not yet paid, so that nobody pays on it any more.
func (c *Client) Cancel(ctx context.Context, _, id string) (*core.Payment, error) {
	var l link
	err := c.do(ctx, http.MethodPost, "/v1/payment_links/"+url.PathEscape(id)+"/cancel", nil, nil, &l)
	var pe *core.ProviderError
	switch {
	case err == nil:
		return c.linkPayment(ctx, &l)
	case errors.As(err, &pe) && pe.Status == http.StatusBadRequest:
		// Razorpay words it ("cannot cancel or expire an already paid/
		// partially paid link", "... an expired link"); the link's state
		// says it in any wording.
		p, ferr := c.Payment(ctx, id)
		if ferr != nil {
			return nil, ferr
		}
		switch p.Status {
		case core.PaymentSucceeded:
			return nil, &core.ProviderError{Status: http.StatusConflict, Code: "already_captured", Message: pe.Message}
		case core.PaymentCanceled, core.PaymentFailed:
			return nil, &core.ProviderError{Status: http.StatusConflict, Code: "already_canceled", Message: pe.Message}
		}
	}
	return nil, err
}

// Refund gives back the link's payment whole, once: it is read first (a
// payment refunded whole is done), then refunded under key.
func (c *Client) Refund(ctx context.Context, key, id string) (*core.Refund, error) {
	var l link
	if err := c.do(ctx, http.MethodGet, "/v1/payment_links/"+url.PathEscape(id), nil, nil, &l); err != nil {
		return nil, err
	}
	pid := paidWith(&l)
	if pid == "" {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state", Message: "the link is " + l.Status + ": nothing was taken"}
	}
	var rp rzpPayment
	if err := c.do(ctx, http.MethodGet, "/v1/payments/"+url.PathEscape(pid), nil, nil, &rp); err != nil {
		return nil, err
	}
	if rp.AmountRefunded >= rp.Amount {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "refund_exceeds_capture", Message: "refunded whole already"}
	}
	var rf struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
		Status string `json:"status"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(pid)+"/refund", map[string]string{IdempotencyHeader: refundKey(key)},
		map[string]any{"notes": map[string]string{"reference": l.notes()["reference"]}}, &rf)
	var pe *core.ProviderError
	if errors.As(err, &pe) && pe.Status == http.StatusBadRequest && strings.Contains(strings.ToLower(pe.Message), "refunded already") {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "refund_exceeds_capture", Message: pe.Message}
	}
	if err != nil {
		return nil, err
	}
	return &core.Refund{ID: rf.ID, PaymentID: id, Amount: rf.Amount, Status: rf.Status}, nil
}

// refundKey is the core's key as Razorpay takes it: at least 10 letters,
// digits, hyphens and underscores.
func refundKey(key string) string {
	k := "onsale_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, key)
	return k
}

// rzpError is Razorpay's error envelope.
type rzpError struct {
	Error struct {
		Code        string `json:"code"`
		Description string `json:"description"`
		Reason      string `json:"reason"`
	} `json:"error"`
}

// do sends one request with Basic auth and reads the answer into out; an
// error answer is a *core.ProviderError with Razorpay's status (409 in
// flight is temporary for the core, as 429 and 5xx are).
func (c *Client) do(ctx context.Context, method, path string, hdr map[string]string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.c.URL+path, body)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.c.KeyID, c.c.KeySecret)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("razorpay %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("razorpay %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e rzpError
		_ = json.Unmarshal(b, &e)
		pe := &core.ProviderError{Status: resp.StatusCode, Code: strings.ToLower(e.Error.Code), Message: e.Error.Description}
		if resp.StatusCode == http.StatusConflict {
			pe.Code = "request_in_progress" // the same refund key still in flight: retry
		}
		return pe
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("razorpay %s %s: decode: %w", method, path, err)
	}
	return nil
}

// event is Razorpay's webhook envelope, as far as the adapter reads it.
type event struct {
	Entity    string `json:"entity"`
	Event     string `json:"event"`
	CreatedAt int64  `json:"created_at"`
	Payload   struct {
		PaymentLink *struct {
			Entity link `json:"entity"`
		} `json:"payment_link"`
		Payment *struct {
			Entity rzpPayment `json:"entity"`
		} `json:"payment"`
	} `json:"payload"`
}

// Verify reports whether signature is the hex HMAC-SHA256 of body with
// secret, in constant time.
func Verify(secret, body []byte, signature string) bool {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal([]byte(signature), []byte(hex.EncodeToString(m.Sum(nil))))
}

// Webhook verifies X-Razorpay-Signature and reads the link events:
// payment_link.paid (the money taken), .expired and .cancelled (the link
// over unpaid). Every other event is acknowledged and ignored.
func (c *Client) Webhook(h http.Header, body []byte, _ time.Time) (*core.PaymentEvent, error) {
	sig := h.Get(SignatureHeader)
	if sig == "" {
		return nil, core.Errorf(core.EBadSignature, "no %s header", SignatureHeader)
	}
	if !Verify([]byte(c.c.WebhookSecret), body, sig) {
		return nil, core.Errorf(core.EBadSignature, "the %s does not match the body", SignatureHeader)
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.Entity != "event" || ev.Event == "" {
		return nil, core.Errorf(core.EInvalid, "not a Razorpay event")
	}
	id := h.Get(EventIDHeader)
	if id == "" {
		// Razorpay always names the event; without the header a body is
		// de-duplicated by itself.
		sum := sha256.Sum256(body)
		id = "sha256:" + hex.EncodeToString(sum[:])
	}
	e := &core.PaymentEvent{ID: id, Type: ev.Event, Outcome: core.EventIgnored}
	if ev.CreatedAt > 0 {
		e.Created = time.Unix(ev.CreatedAt, 0)
	}
	if !strings.HasPrefix(ev.Event, "payment_link.") {
		return e, nil
	}
	if ev.Payload.PaymentLink == nil || ev.Payload.PaymentLink.Entity.ID == "" {
		return nil, core.Errorf(core.EInvalid, "a %s event without its payment link", ev.Event)
	}
	l := ev.Payload.PaymentLink.Entity
	if !c.ours(&l, "") {
		return e, nil // another deployment's link, or not onsale's
	}
	e.PaymentID, e.Reference, e.Amount, e.Currency = l.ID, l.notes()["reference"], l.Amount, strings.ToUpper(l.Currency)
	switch ev.Event {
	case "payment_link.paid":
		e.Outcome = core.EventSucceeded
		if p := ev.Payload.Payment; p != nil && p.Entity.ID != "" {
			e.Amount, e.Currency = p.Entity.Amount, strings.ToUpper(p.Entity.Currency) // what was taken
		}
	case "payment_link.expired", "payment_link.cancelled":
		e.Outcome = core.EventFailed
	}
	return e, nil
}
