// Package provider is the core's client of the payment provider's HTTP API
// (Stripe-like: payments, captures, voids, refunds, all under idempotency
// keys). Every call that moves money carries a key derived from the booking
// or hold, so a retry after a timeout or a crash is carried out once.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Payment is the provider's payment object.
type Payment struct {
	ID             string `json:"id"`
	Status         string `json:"status"` // pending, requires_capture, succeeded, failed, canceled
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference"`
	Method         string `json:"method"`
	AmountCaptured int64  `json:"amount_captured"`
	AmountRefunded int64  `json:"amount_refunded"`
	FailureReason  string `json:"failure_reason,omitempty"`
}

// Payment statuses.
const (
	StatusPending         = "pending"
	StatusRequiresCapture = "requires_capture"
	StatusSucceeded       = "succeeded"
	StatusFailed          = "failed"
	StatusCanceled        = "canceled"
)

// Refund is the provider's refund object.
type Refund struct {
	ID        string `json:"id"`
	PaymentID string `json:"payment_id"`
	Amount    int64  `json:"amount"`
	Status    string `json:"status"`
}

// PaymentRequest creates a payment.
type PaymentRequest struct {
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Reference    string `json:"reference"`
	Method       string `json:"method"` // upi or card
	PaymentToken string `json:"payment_token,omitempty"`
	Capture      string `json:"capture"` // automatic or manual
}

// APIError is an error answer of the provider.
type APIError struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("provider: %d %s: %s", e.Status, e.Code, e.Message)
}

// Temporary reports whether retrying the same call (same key) may succeed:
// the provider was down, overloaded or busy with the first attempt.
func Temporary(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Code == "request_in_progress"
	}
	return err != nil // transport errors and timeouts: the outcome is unknown, retry under the same key
}

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
func (c *Client) CreatePayment(ctx context.Context, key string, r PaymentRequest) (*Payment, error) {
	var p Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments", key, r, &p)
}

// Capture takes the money of an authorized payment.
func (c *Client) Capture(ctx context.Context, key, id string) (*Payment, error) {
	var p Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/capture", key, struct{}{}, &p)
}

// Cancel voids an authorization that was not captured.
func (c *Client) Cancel(ctx context.Context, key, id string) (*Payment, error) {
	var p Payment
	return &p, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/cancel", key, struct{}{}, &p)
}

// Refund refunds what was captured of a payment.
func (c *Client) Refund(ctx context.Context, key, id string) (*Refund, error) {
	var r Refund
	return &r, c.do(ctx, http.MethodPost, "/v1/payments/"+url.PathEscape(id)+"/refunds", key, struct{}{}, &r)
}

// Payment fetches a payment.
func (c *Client) Payment(ctx context.Context, id string) (*Payment, error) {
	var p Payment
	return &p, c.do(ctx, http.MethodGet, "/v1/payments/"+url.PathEscape(id), "", nil, &p)
}

// PaymentsByReference lists the payments made for an order reference.
func (c *Client) PaymentsByReference(ctx context.Context, ref string) ([]Payment, error) {
	var out struct {
		Data []Payment `json:"data"`
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
		ae := &APIError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, ae)
		return ae
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("provider %s %s: decode: %w", method, path, err)
	}
	return nil
}
