package paysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Behaviour is how the simulated provider misbehaves. It is changed at run
// time with SetBehaviour or PUT /_sim/config and applies to what happens
// next: a UPI payment already pending keeps the delay it drew.
//
// The zero Behaviour is a well-behaved provider whose UPI payers approve at
// once. A zero TimeoutDelay, WebhookRetryBase, WebhookRetryMax or
// WebhookMaxAttempts means its default (DefaultBehaviour).
//
// In JSON (/_sim/config, ONSALE_PAYSIM_BEHAVIOUR) the fields are
// upi_delay_min, upi_delay_max, upi_slow_fraction, upi_slow_delay,
// fail_rate, duplicate_rate, reorder_window, timeout_rate, timeout_delay,
// outage ([{"start": RFC 3339, "end": RFC 3339}]), webhook_retry_base,
// webhook_retry_max and webhook_max_attempts; durations are strings such
// as "2s" or "1m30s".
type Behaviour struct {
	// A UPI payer approves after a delay drawn uniformly from
	// [UPIDelayMin, UPIDelayMax]; a UPISlowFraction (0..1) of payers take
	// UPISlowDelay instead: the long tail who approve on another phone.
	UPIDelayMin     time.Duration
	UPIDelayMax     time.Duration
	UPISlowFraction float64
	UPISlowDelay    time.Duration

	// FailRate (0..1) of payments fail: the UPI payer declines, the card
	// is declined.
	FailRate float64

	// DuplicateRate (0..1) of webhook events are delivered twice, both
	// copies at the same moment.
	DuplicateRate float64

	// ReorderWindow holds each webhook event for a random time up to this
	// long, so events close together go out in random order.
	ReorderWindow time.Duration

	// TimeoutRate (0..1) of successful state-changing API requests are
	// carried out and their response stored for Idempotency-Key replays,
	// but answered only after TimeoutDelay: long enough for the client to
	// give up. Replays and reads always answer at once, so a retry with the
	// same key (or a reconciler's GET) learns what happened.
	TimeoutRate  float64
	TimeoutDelay time.Duration

	// Outages are windows in which the API answers 503 with Retry-After
	// and no webhook is sent (they go out after the window, without
	// counting an attempt).
	Outages []Window

	// A failed webhook attempt n (1, 2, ...) is retried after
	// WebhookRetryBase * 2^(n-1), at most WebhookRetryMax; after
	// WebhookMaxAttempts attempts the delivery is given up.
	WebhookRetryBase   time.Duration
	WebhookRetryMax    time.Duration
	WebhookMaxAttempts int
}

// Window is a span of time, [Start, End).
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// DefaultBehaviour is the binary's default: UPI payers approve within 1-5
// seconds, nothing else goes wrong, webhooks are retried for about 6 minutes.
func DefaultBehaviour() Behaviour {
	return Behaviour{
		UPIDelayMin:  1 * time.Second,
		UPIDelayMax:  5 * time.Second,
		UPISlowDelay: 2 * time.Minute,
	}.withDefaults()
}

// withDefaults fills the fields whose zero value means nothing useful.
func (b Behaviour) withDefaults() Behaviour {
	if b.TimeoutDelay == 0 {
		b.TimeoutDelay = 30 * time.Second
	}
	if b.WebhookRetryBase == 0 {
		b.WebhookRetryBase = time.Second
	}
	if b.WebhookRetryMax == 0 {
		b.WebhookRetryMax = time.Minute
	}
	if b.WebhookMaxAttempts == 0 {
		b.WebhookMaxAttempts = 12
	}
	return b
}

// Validate reports a field out of range, after the defaults for zero fields.
func (b Behaviour) Validate() error {
	b = b.withDefaults()
	for name, r := range map[string]float64{"upi_slow_fraction": b.UPISlowFraction, "fail_rate": b.FailRate,
		"duplicate_rate": b.DuplicateRate, "timeout_rate": b.TimeoutRate} {
		if !(r >= 0 && r <= 1) { // also catches NaN
			return fmt.Errorf("%s must be between 0 and 1", name)
		}
	}
	for name, d := range map[string]time.Duration{"upi_delay_min": b.UPIDelayMin, "upi_delay_max": b.UPIDelayMax,
		"upi_slow_delay": b.UPISlowDelay, "reorder_window": b.ReorderWindow, "timeout_delay": b.TimeoutDelay,
		"webhook_retry_base": b.WebhookRetryBase, "webhook_retry_max": b.WebhookRetryMax} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative", name)
		}
	}
	switch {
	case b.UPIDelayMin > b.UPIDelayMax:
		return errors.New("upi_delay_min must not exceed upi_delay_max")
	case b.WebhookRetryBase > b.WebhookRetryMax:
		return errors.New("webhook_retry_base must not exceed webhook_retry_max")
	case b.WebhookMaxAttempts < 0:
		return errors.New("webhook_max_attempts must be positive")
	}
	for i, w := range b.Outages {
		if !w.End.After(w.Start) {
			return fmt.Errorf("outage %d: end must be after start", i)
		}
	}
	return nil
}

// outage returns the end of the outage window that covers t, if any.
func (b Behaviour) outage(t time.Time) (time.Time, bool) {
	for _, w := range b.Outages {
		if !t.Before(w.Start) && t.Before(w.End) {
			return w.End, true
		}
	}
	return time.Time{}, false
}

// upiDelay draws how long a UPI payer takes to approve.
func (b Behaviour) upiDelay() time.Duration {
	if rand.Float64() < b.UPISlowFraction {
		return b.UPISlowDelay
	}
	return b.UPIDelayMin + time.Duration(rand.Float64()*float64(b.UPIDelayMax-b.UPIDelayMin))
}

// backoff is the wait after failed attempt n (1, 2, ...).
func (b Behaviour) backoff(n int) time.Duration {
	d := float64(b.WebhookRetryBase) * math.Pow(2, float64(n-1))
	return time.Duration(min(d, float64(b.WebhookRetryMax)))
}

// behaviourJSON is Behaviour on the wire, with durations as strings ("2s").
// Its fields point into a Behaviour, so that decoding over one changes
// only the fields the JSON names.
type behaviourJSON struct {
	UPIDelayMin        *duration `json:"upi_delay_min"`
	UPIDelayMax        *duration `json:"upi_delay_max"`
	UPISlowFraction    *float64  `json:"upi_slow_fraction"`
	UPISlowDelay       *duration `json:"upi_slow_delay"`
	FailRate           *float64  `json:"fail_rate"`
	DuplicateRate      *float64  `json:"duplicate_rate"`
	ReorderWindow      *duration `json:"reorder_window"`
	TimeoutRate        *float64  `json:"timeout_rate"`
	TimeoutDelay       *duration `json:"timeout_delay"`
	Outages            *[]Window `json:"outage"`
	WebhookRetryBase   *duration `json:"webhook_retry_base"`
	WebhookRetryMax    *duration `json:"webhook_retry_max"`
	WebhookMaxAttempts *int      `json:"webhook_max_attempts"`
}

func wire(b *Behaviour) behaviourJSON {
	return behaviourJSON{
		UPIDelayMin:        (*duration)(&b.UPIDelayMin),
		UPIDelayMax:        (*duration)(&b.UPIDelayMax),
		UPISlowFraction:    &b.UPISlowFraction,
		UPISlowDelay:       (*duration)(&b.UPISlowDelay),
		FailRate:           &b.FailRate,
		DuplicateRate:      &b.DuplicateRate,
		ReorderWindow:      (*duration)(&b.ReorderWindow),
		TimeoutRate:        &b.TimeoutRate,
		TimeoutDelay:       (*duration)(&b.TimeoutDelay),
		Outages:            &b.Outages,
		WebhookRetryBase:   (*duration)(&b.WebhookRetryBase),
		WebhookRetryMax:    (*duration)(&b.WebhookRetryMax),
		WebhookMaxAttempts: &b.WebhookMaxAttempts,
	}
}

// MarshalJSON writes durations as Go duration strings ("1.5s").
func (b Behaviour) MarshalJSON() ([]byte, error) {
	if b.Outages == nil {
		b.Outages = []Window{}
	}
	return json.Marshal(wire(&b))
}

// UnmarshalJSON reads durations as Go duration strings and leaves the
// fields the JSON does not name as they were: decoding over the current
// Behaviour is a partial update.
func (b *Behaviour) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	w := wire(b)
	return dec.Decode(&w)
}

type duration time.Duration

func (d duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}
