package coreclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/onsale/onsale/gateway"
)

// Dials is the core's durable record of each event's dials
// (gateway.DialsRecord): GET and PATCH /internal/v1/events/{id}/dials on
// the core over the client's reads pool. A GET (setting a room up again)
// is the gateway's own, authenticated with the gateways' service token
// (the core is given the same ONSALE_ADMIN_TOKEN); a PATCH is an
// operator's change, sent with the operator's own token, which the core
// checks and audits.
type Dials struct {
	c     *Client
	token string
}

var _ gateway.DialsRecord = (*Dials)(nil)

// NewDials returns the core's dials record for a gateway with service
// token token; nil when token is empty: no operators' API, so no dial ever
// differs from the event's defaults and there is nothing to keep.
func NewDials(c *Client, token string) gateway.DialsRecord {
	if token == "" {
		return nil
	}
	return &Dials{c: c, token: token}
}

// SavedDials implements gateway.DialsRecord.
func (d *Dials) SavedDials(ctx context.Context, event int64) (gateway.DialPatch, error) {
	b, err := d.do(ctx, fasthttp.MethodGet, event, nil, gateway.Operator{Token: d.token})
	if err != nil {
		return nil, err
	}
	var reply struct {
		Dials json.RawMessage `json:"dials"`
	}
	if err := json.Unmarshal(b, &reply); err != nil {
		return nil, fmt.Errorf("%w: core dials: %v", gateway.ErrUnavailable, err)
	}
	p, err := gateway.ParseSavedDials(reply.Dials)
	if err != nil {
		return nil, fmt.Errorf("%w: core dials: %v", gateway.ErrUnavailable, err)
	}
	return p, nil
}

// SaveDials implements gateway.DialsRecord.
func (d *Dials) SaveDials(ctx context.Context, event int64, patch gateway.DialPatch, by gateway.Operator) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = d.do(ctx, fasthttp.MethodPatch, event, body, by)
	return err
}

// do sends one request to the dials route as by: ErrNoEvent on 404; the
// core's refusal of an operator (401, 403) as EUnauthorized or EForbidden
// with the core's message; an error wrapping ErrUnavailable on any other
// failure (a core that refuses the service token is misconfigured: the
// dials cannot be kept, so the caller fails closed).
func (d *Dials) do(ctx context.Context, method string, event int64, body []byte, by gateway.Operator) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(fmt.Sprintf("%s/internal/v1/events/%d/dials", d.c.base, event))
	req.Header.SetMethod(method)
	req.Header.Set("Authorization", "Bearer "+by.Token)
	if by.RequestID != "" {
		req.Header.Set(RequestIDHeader, by.RequestID)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
	deadline := readDeadline(ctx)
	err := d.c.reads.DoDeadline(req, resp, deadline)
	switch {
	case err != nil:
		d.c.log.Warn("the core did not answer", "path", "dials", "err", err)
		return nil, fmt.Errorf("%w: core dials: %v", gateway.ErrUnavailable, err)
	case resp.StatusCode() == fasthttp.StatusNotFound:
		return nil, gateway.ErrNoEvent
	case by.Name != "" && (resp.StatusCode() == fasthttp.StatusUnauthorized || resp.StatusCode() == fasthttp.StatusForbidden):
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(resp.Body(), &e)
		code := gateway.EForbidden
		if resp.StatusCode() == fasthttp.StatusUnauthorized {
			code = gateway.EUnauthorized
		}
		return nil, gateway.Errorf(code, "the core refused operator %s: %s", by.Name, e.Message)
	case resp.StatusCode() != fasthttp.StatusOK:
		d.c.log.Error("the core refused the dials", "event", event, "method", method, "status", resp.StatusCode(), "body", string(resp.Body()))
		return nil, fmt.Errorf("%w: core dials: status %d", gateway.ErrUnavailable, resp.StatusCode())
	}
	return append([]byte(nil), resp.Body()...), nil
}
