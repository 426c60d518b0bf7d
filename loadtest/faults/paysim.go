package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Paysim is the payment simulator's control API (loadtest/paysim,
// /_sim/): an outage is a window in its behaviour, during which its API
// answers 503 with Retry-After, as a real provider's does, and its webhooks
// wait and go out after the window.
type Paysim struct {
	URL string // its base URL
	Key string // its API key (to ask whether the API answers)
}

// Outage adds the window [start, end) to the simulator's outages.
func (p Paysim) Outage(ctx context.Context, start, end time.Time) error {
	type window struct {
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	}
	var cur struct {
		Outage []window `json:"outage"`
	}
	if err := p.call(ctx, "GET", "/_sim/config", nil, &cur); err != nil {
		return err
	}
	body := map[string]any{"outage": append(cur.Outage, window{start, end})}
	return p.call(ctx, "PUT", "/_sim/config", body, nil)
}

// Up says whether the API answers (anything but a 503 or no answer).
func (p Paysim) Up(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", p.URL+"/v1/payments?reference=faults-probe", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+p.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode != http.StatusServiceUnavailable
}

// Held is how many webhook deliveries are queued (waiting for their time,
// an outage's end or a retry).
func (p Paysim) Held(ctx context.Context) (int, error) {
	var d struct {
		Deliveries []struct {
			State string `json:"state"`
		} `json:"deliveries"`
	}
	if err := p.call(ctx, "GET", "/_sim/webhooks", nil, &d); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range d.Deliveries {
		if x.State == "queued" {
			n++
		}
	}
	return n, nil
}

func (p Paysim) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("paysim %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("paysim %s %s: %s %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
