package paysim

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/onsale/onsale/shared/paysig"
)

// Webhook event types.
const (
	EventPaymentSucceeded = "payment.succeeded"
	EventPaymentFailed    = "payment.failed"
	EventRefundSucceeded  = "refund.succeeded"

	// Sent by providers of other shapes only (Stripe's
	// amount_capturable_updated and canceled): the simulator's own shape
	// says nothing when a card is authorized or voided.
	eventAuthorized = "payment.authorized"
	eventCanceled   = "payment.canceled"
	// eventAuthorizedByPayer: a card authorized on the checkout page. The
	// simulator's own shape tells it as payment.succeeded (the money is
	// there, for the merchant to capture), since no answer of the
	// merchant's own call did.
	eventAuthorizedByPayer = "payment.authorized_by_payer"
	// eventAttemptFailed: a payer's attempt failed on a page that stays
	// open (a Stripe Checkout Session, a Razorpay link).
	eventAttemptFailed = "payment.attempt_failed"
)

// Event is a webhook body. Every delivery of one event, retry or
// duplicate, carries the same bytes.
type Event struct {
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Created int64     `json:"created"` // unix seconds
	Data    EventData `json:"data"`
}

// EventData holds the payment (payment.*) or refund (refund.*) object.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

// Delivery states.
const (
	DeliveryQueued    = "queued"    // waiting for its time, an outage or a webhook URL
	DeliverySending   = "sending"   // an attempt is under way
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryFailed    = "failed"    // given up after WebhookMaxAttempts
)

// Delivery is one copy of an event on its way to the receiver (a
// duplicated event has two, Copy 1 and 2).
type Delivery struct {
	EventID     string    `json:"event_id"`
	Type        string    `json:"type"`
	Copy        int       `json:"copy"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	LastStatus  int       `json:"last_status"` // HTTP status of the last attempt; 0: none or no answer
	LastError   string    `json:"last_error,omitempty"`
	NextAttempt time.Time `json:"next_attempt,omitzero"` // while queued
}

type delivery struct {
	Delivery
	body  []byte
	index int // in the queue heap
}

// deliveryQueue is a min-heap of queued deliveries by NextAttempt.
type deliveryQueue []*delivery

func (q deliveryQueue) Len() int { return len(q) }
func (q deliveryQueue) Less(i, j int) bool {
	return q[i].NextAttempt.Before(q[j].NextAttempt)
}
func (q deliveryQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *deliveryQueue) Push(x any) {
	d := x.(*delivery)
	d.index = len(*q)
	*q = append(*q, d)
}
func (q *deliveryQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return d
}

// emit queues a webhook event about obj; s.mu is held. The duplicate and
// reorder misbehaviour is drawn here.
func (s *Sim) emit(typ string, obj any) {
	now := s.now()
	var out []outgoing
	var err error
	switch s.dialect {
	case DialectStripe:
		out, err = stripeEvent(typ, obj, now)
	case DialectRazorpay:
		out, err = razorpayEvents(typ, obj, now)
	default:
		switch typ {
		case eventAuthorized, eventCanceled, eventAttemptFailed:
			return
		case eventAuthorizedByPayer:
			typ = EventPaymentSucceeded
		}
		var data, body []byte
		if data, err = json.Marshal(obj); err == nil {
			id := newID("evt")
			body, err = json.Marshal(Event{ID: id, Type: typ, Created: now.Unix(), Data: EventData{Object: data}})
			out = []outgoing{{id: id, typ: typ, body: body}}
		}
	}
	if err != nil {
		panic(fmt.Sprintf("paysim: encode %s event: %v", typ, err))
	}
	for _, ev := range out {
		copies := 1
		if rand.Float64() < s.beh.DuplicateRate {
			copies = 2
		}
		at := now
		if s.beh.ReorderWindow > 0 {
			at = at.Add(time.Duration(rand.Float64() * float64(s.beh.ReorderWindow)))
		}
		for c := 1; c <= copies; c++ {
			d := &delivery{Delivery: Delivery{EventID: ev.id, Type: ev.typ, Copy: c, State: DeliveryQueued, NextAttempt: at}, body: ev.body}
			s.deliveries = append(s.deliveries, d)
			heap.Push(&s.queue, d)
		}
	}
	s.nudge()
}

// outgoing is one event in the dialect's shape, to be delivered.
type outgoing struct {
	id, typ string
	body    []byte
}

// nudge wakes the scheduler to look at the queue again.
func (s *Sim) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// schedule hands deliveries to the workers when they fall due, unless an
// outage is on or there is no webhook URL. Copies due together (the two
// of a duplicate) go to different workers, so they are sent concurrently.
func (s *Sim) schedule() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, wait := s.due()
		for _, d := range due {
			select {
			case s.work <- d:
			case <-s.ctx.Done():
				return
			}
		}
		if len(due) > 0 {
			continue
		}
		var fire <-chan time.Time
		if wait >= 0 {
			timer.Reset(wait)
			fire = timer.C
		}
		select {
		case <-fire:
		case <-s.wake:
		case <-s.ctx.Done():
			return
		}
		timer.Stop()
	}
}

// due takes the deliveries due now off the queue, marked sending, or
// says how long to wait (-1: until nudged).
func (s *Sim) due() ([]*delivery, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.afterDue != nil {
		defer func() { s.afterDue(len(s.queue)) }()
	}
	now := s.now()
	if s.webhookURL == "" {
		return nil, -1
	}
	if end, ok := s.beh.outage(now); ok {
		return nil, end.Sub(now)
	}
	var due []*delivery
	for len(s.queue) > 0 && !s.queue[0].NextAttempt.After(now) {
		due = append(due, s.take())
	}
	if len(due) == 0 && len(s.queue) > 0 {
		return nil, s.queue[0].NextAttempt.Sub(now)
	}
	return due, -1
}

// take pops the earliest delivery and marks it sending; s.mu is held.
func (s *Sim) take() *delivery {
	d := heap.Pop(&s.queue).(*delivery)
	d.State = DeliverySending
	d.NextAttempt = time.Time{}
	return d
}

// deliver is a webhook worker.
func (s *Sim) deliver() {
	defer s.wg.Done()
	for {
		select {
		case d := <-s.work:
			s.attempt(d)
		case <-s.ctx.Done():
			return
		}
	}
}

// attempt sends d once, signed now, and records the outcome: delivered,
// queued again after the backoff, or given up.
func (s *Sim) attempt(d *delivery) {
	s.mu.Lock()
	url := s.webhookURL
	s.mu.Unlock()
	code, err := s.post(url, d.EventID, d.body)

	s.mu.Lock()
	defer s.mu.Unlock()
	d.Attempts++
	d.LastStatus, d.LastError = code, ""
	if err == nil && code/100 == 2 {
		d.State = DeliveryDelivered
		s.log.Debug("webhook delivered", "event", d.EventID, "type", d.Type, "copy", d.Copy, "attempts", d.Attempts)
		return
	}
	if err != nil {
		d.LastError = err.Error()
	} else {
		d.LastError = http.StatusText(code)
	}
	if d.Attempts >= s.beh.WebhookMaxAttempts {
		d.State = DeliveryFailed
		s.log.Warn("webhook given up", "event", d.EventID, "type", d.Type, "attempts", d.Attempts, "last_status", code, "last_error", d.LastError)
		return
	}
	d.State = DeliveryQueued
	d.NextAttempt = s.now().Add(s.beh.backoff(d.Attempts))
	heap.Push(&s.queue, d)
	s.nudge()
	s.log.Debug("webhook attempt failed", "event", d.EventID, "attempts", d.Attempts, "status", code, "err", err, "next", d.NextAttempt)
}

// post sends one signed webhook request and returns the status.
func (s *Sim) post(url, eventID string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "onsale-paysim")
	if s.dialect == DialectRazorpay {
		req.Header.Set("X-Razorpay-Signature", razorpaySignature(s.secret, body))
		req.Header.Set("X-Razorpay-Event-Id", eventID)
	} else {
		req.Header.Set(s.signatureHeader(), paysig.Sign(s.secret, s.now(), body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// FlushWebhooks attempts every queued delivery now, whatever its time,
// concurrently, and returns when all attempts are done, with how many
// there were. Failed attempts are queued again as usual. During an outage,
// or with no webhook URL, it sends nothing.
func (s *Sim) FlushWebhooks() int {
	s.mu.Lock()
	var due []*delivery
	if _, out := s.beh.outage(s.now()); !out && s.webhookURL != "" {
		for len(s.queue) > 0 {
			due = append(due, s.take())
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range due {
		wg.Go(func() { s.attempt(d) })
	}
	wg.Wait()
	return len(due)
}

// Deliveries lists every webhook delivery so far, oldest first.
func (s *Sim) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Delivery, len(s.deliveries))
	for i, d := range s.deliveries {
		out[i] = d.Delivery
	}
	return out
}
