// Package provider is the core's client of the payment provider's HTTP API
// (Stripe-like: payments, captures, voids, refunds, all under idempotency
// keys). Every call that moves money carries a key derived from the booking
// or hold, so a retry after a timeout or a crash is carried out once.
package provider

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
)

// The provider's objects (core.Payment, core.Refund, core.PaymentRequest)
// and its errors (core.ProviderError, core.ProviderTemporary) are the
// core's vocabulary: the outbox and the HTTP layer read them without
// importing this client.

// Client calls the provider.
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// New returns a client with a bounded per-call timeout.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: baseURL, APIKey: apiKey, HTTP: &http.Client{Timeout: 10 * time.Second}}
}

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

// PaymentsByReference lists the payments made for an order reference.
func (c *Client) PaymentsByReference(ctx context.Context, ref string) ([]core.Payment, error) {
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
