// Package paysim is the core's client of onsale's payment simulator
// (loadtest/paysim: payments, captures, voids, refunds, all under
// idempotency keys, and webhooks signed with shared/paysig), one of the
// core.PaymentProvider adapters beside core/stripe and core/razorpay. Every
// call that moves money carries a key derived from the booking or hold, so
// a retry after a timeout or a crash is carried out once; the simulator
// keeps its keys for as long as it runs.
package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/paysig"
)

// The provider's objects (core.Payment, core.Refund, core.PaymentRequest)
// and its errors (core.ProviderError, core.ProviderTemporary) are the
// core's vocabulary: the outbox and the HTTP layer read them without
// importing this client.

// Client calls the simulator.
type Client struct {
	BaseURL       string
	APIKey        string
	WebhookSecret []byte // verifies the Payment-Signature of webhooks
	HTTP          *http.Client
}

// New returns a client with a bounded per-call timeout.
func New(baseURL, apiKey string, webhookSecret []byte) *Client {
	return &Client{BaseURL: baseURL, APIKey: apiKey, WebhookSecret: webhookSecret, HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Name is "paysim".
func (c *Client) Name() string { return "paysim" }

// Takes reports true: the simulator takes UPI and cards.
func (c *Client) Takes(string) bool { return true }

// CreatePayment creates (or, under the same key, returns) a payment.
func (c *Client) CreatePayment(ctx context.Context, key string, r core.PaymentRequest) (*core.Payment, error) {
	var p core.Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments", key, r, &p)
}

// Capture takes the money of an authorized payment.
func (c *Client) Capture(ctx context.Context, key, id string) (*core.Payment, error) {
	var p core.Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/capture", key, struct{}{}, &p)
}

// Cancel voids an authorization that was not captured.
func (c *Client) Cancel(ctx context.Context, key, id string) (*core.Payment, error) {
	var p core.Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/cancel", key, struct{}{}, &p)
}

// Refund refunds what was captured of a payment.
func (c *Client) Refund(ctx context.Context, key, id string) (*core.Refund, error) {
	var r core.Refund
	return &r, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/refunds", key, struct{}{}, &r)
}

// Payment fetches a payment.
func (c *Client) Payment(ctx context.Context, id string) (*core.Payment, error) {
	var p core.Payment
	return &p, c.do(ctx, http.MethodGet, "/v1/payments/"+url.PathEscape(id), "", nil, &p)
}

// PaymentsFor lists the payments made for an order reference (the
// simulator searches by reference: id is not needed).
func (c *Client) PaymentsFor(ctx context.Context, q core.PaymentLookup) ([]core.Payment, error) {
	ref := q.Reference
	var out struct {
		Data []core.Payment `json:"data"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/payments?reference="+url.QueryEscape(ref), "", nil, &out)
	return out.Data, err
}

func (c *Client) do(ctx context.Context, method, path, key string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("provider %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("provider %s %s: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		ae := &core.ProviderError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, ae)
		return ae
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("provider %s %s: decode: %w", method, path, err)
	}
	return nil
}

// event is the simulator's webhook envelope.
type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"` // unix seconds: when the simulator made the event
	Data    struct {
		Object struct {
			ID        string `json:"id"`
			PaymentID string `json:"payment_id"`
			Status    string `json:"status"`
			Reference string `json:"reference"`
			Amount    int64  `json:"amount"`
			Currency  string `json:"currency"`
		} `json:"object"`
	} `json:"data"`
}

// Webhook verifies the Payment-Signature (constant time, 5-minute
// tolerance) and reads the event: payment.succeeded and payment.failed
// settle a booking, anything else (refund.succeeded) is ignored.
func (c *Client) Webhook(h http.Header, body []byte, now time.Time) (*core.PaymentEvent, error) {
	if err := paysig.Verify(c.WebhookSecret, h.Get(paysig.Header), body, now); err != nil {
		return nil, core.Errorf(core.EBadSignature, "%v", err)
	}
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" {
		return nil, core.Errorf(core.EInvalid, "not a payment event")
	}
	obj := ev.Data.Object
	e := &core.PaymentEvent{ID: ev.ID, Type: ev.Type, Outcome: core.EventIgnored, PaymentID: obj.ID, Reference: obj.Reference,
		Amount: obj.Amount, Currency: obj.Currency}
	if ev.Created > 0 {
		e.Created = time.Unix(ev.Created, 0)
	}
	switch ev.Type {
	case "payment.succeeded":
		e.Outcome = core.EventSucceeded
	case "payment.failed":
		e.Outcome = core.EventFailed
	}
	return e, nil
}
