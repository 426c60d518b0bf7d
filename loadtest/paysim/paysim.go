// Package paysim is a Stripe-like payment provider for tests and load runs:
// the booking core talks to it exactly as to a real provider, and the
// invariant checker reads its ledger to prove that no money is lost or
// taken twice.
//
// The API (JSON, amounts in paise, Authorization: Bearer <api key>):
//
//	POST /v1/payments                 create: UPI (pending, settles later) or card (manual: authorize; automatic: charge;
//	                                  no token, or tok_3ds: pending until the payer approves on the checkout page)
//	GET  /v1/payments/{id}            one payment
//	GET  /v1/payments?reference=ref   the payments of one merchant order
//	POST /v1/payments/{id}/capture    capture an authorization
//	POST /v1/payments/{id}/cancel     void an authorization
//	POST /v1/payments/{id}/refunds    refund all or part of what was captured
//	GET  /v1/ledger[?reference=ref]   every money movement, and totals per reference
//
// Every POST honours Idempotency-Key (scoped to API key, method and path):
// the same key with the same body replays the stored response with
// Idempotent-Replayed: true, with another body answers 422
// idempotency_key_reused, and while the first request runs answers 409
// request_in_progress. Requests refused before they run (400, 401, 503)
// store nothing.
//
// Webhooks (payment.succeeded, payment.failed, refund.succeeded) are signed
// with shared/paysig and POSTed to the webhook URL until it answers 2xx,
// with exponential backoff; every attempt is signed afresh over the same
// body. payment.succeeded is sent when money is taken (a UPI payer approves,
// a card is charged or captured) or a card is authorized on the checkout
// page, payment.failed when a payment fails (including a declined card),
// refund.succeeded for every refund. Config.Dialect = DialectStripe
// answers in Stripe's shapes instead (stripe.go).
//
// Behaviour sets the misbehaviour: slow UPI payers, failures, duplicate and
// reordered webhooks, responses delayed past the client's timeout, outages.
// The ledger is the simulator's own record, not part of the provider: it
// needs the API key but answers during outages and is never delayed.
//
// With Config.Control the handler also serves, without auth:
//
//	GET|PUT /_sim/config                 the Behaviour as JSON; PUT changes only the fields it names
//	POST    /_sim/payments/{id}/succeed  the UPI payer approves now (and the webhook is queued)
//	POST    /_sim/payments/{id}/fail     the UPI payer declines now
//	POST    /_sim/webhooks/flush         attempt every queued webhook now; answers when done
//	GET     /_sim/webhooks               every delivery with its attempts and last status
//
// The hosted checkout page stands in for the fan's UPI app, always served,
// without auth and regardless of outages (HTML, for browser tests):
//
//	GET  /checkout/{id}[?return=url]  the payment: reference, amount, status; Approve and Decline while pending
//	POST /checkout/{id}/approve       the payer approves now, as Settle; 303 to the return URL, or to the page
//	POST /checkout/{id}/decline       the payer declines now, likewise
//
// The return URL (a form field "return" in the POSTs) is followed and linked
// ("Back to the shop") only if it is an absolute http or https URL. A POST
// that finds the payment no longer pending settles nothing and sends the
// payer back to the page, which shows its status.
//
// POST /sms {"to": "+91...", "body": "..."} and GET /sms[?to=] are an SMS
// sink, without auth; GET /healthz answers 200.
package paysim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"time"
)

// Config configures a Sim.
type Config struct {
	APIKey        string // the one accepted Bearer token
	WebhookSecret string // signs webhooks (paysig)
	WebhookURL    string // where webhooks go; empty: they wait until SetWebhookURL
	Control       bool   // serve /_sim/ (runtime config and test hooks)
	Behaviour     Behaviour
	// Dialect is the API and webhook shape: DialectPaysim (the
	// simulator's own, the default), DialectStripe (Stripe's
	// PaymentIntents, Checkout Sessions, refunds, events and
	// Stripe-Signature: stripe.go) or DialectRazorpay (Razorpay's Payment
	// Links, payments, refunds, events and X-Razorpay-Signature:
	// razorpay.go). The payments, the ledger, the checkout page and the
	// misbehaviour are the same.
	Dialect string
}

// Dialects.
const (
	DialectPaysim = "paysim"
	DialectStripe = "stripe"
)

// Sim is the simulated provider. Its state lives in memory, guarded by one
// mutex; all methods are safe for concurrent use.
type Sim struct {
	log     *slog.Logger
	dialect string
	apiKey  string
	secret  []byte
	control bool
	now     func() time.Time
	client  *http.Client
	handler http.Handler

	// beforeExec, when set (by tests, before serving), runs in every
	// state-changing request just before it is carried out, after its
	// Idempotency-Key is claimed: it widens the window for races.
	beforeExec func()

	// afterDue, when set (by tests, under mu), is called by the webhook
	// scheduler each time it has looked at the queue, with mu held and
	// the number of deliveries it left queued: a test can wait for the
	// scheduler to have seen a delivery instead of sleeping.
	afterDue func(queued int)

	// Background work: the webhook scheduler and its workers, UPI
	// settlement timers, delayed responses. Close ends all of it.
	ctx  context.Context // canceled by Close
	stop context.CancelFunc
	wg   sync.WaitGroup
	wake chan struct{} // nudges the webhook scheduler
	work chan *delivery

	mu         sync.Mutex
	closed     bool
	beh        Behaviour
	webhookURL string
	payments   map[string]*Payment
	byRef      map[string][]*Payment
	all        []*Payment // in creation order
	settling   map[string]*time.Timer
	ledger     []Entry
	idem       map[idemKey]*idemRecord
	deliveries []*delivery // every delivery ever queued, in order
	queue      deliveryQueue
	refusals   map[string]int    // the Stripe dialect's error answers by code, the Razorpay dialect's by description
	calls      map[string]int    // API requests by route pattern
	linkRefs   map[string]string // a Razorpay link's reference_id: its payment id ("" while it is being made)
	sms        []SMS
	smsTo      map[string][]int // indexes into sms by number, oldest first
}

// webhookWorkers bounds concurrent webhook requests.
const webhookWorkers = 32

// New returns a Sim serving cfg, logging to log (nil: discard). It starts
// the webhook workers; Close stops them.
func New(cfg Config, log *slog.Logger) (*Sim, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch cfg.Dialect {
	case "":
		cfg.Dialect = DialectPaysim
	case DialectPaysim, DialectStripe, DialectRazorpay:
	default:
		return nil, fmt.Errorf("paysim: dialect %q: want paysim, stripe or razorpay", cfg.Dialect)
	}
	beh := cfg.Behaviour.withDefaults()
	if err := beh.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		log:        log,
		dialect:    cfg.Dialect,
		apiKey:     cfg.APIKey,
		secret:     []byte(cfg.WebhookSecret),
		control:    cfg.Control,
		now:        time.Now,
		client:     &http.Client{Timeout: 10 * time.Second, Transport: webhookTransport()},
		ctx:        ctx,
		stop:       cancel,
		wake:       make(chan struct{}, 1),
		work:       make(chan *delivery),
		beh:        beh,
		webhookURL: cfg.WebhookURL,
		payments:   make(map[string]*Payment),
		byRef:      make(map[string][]*Payment),
		settling:   make(map[string]*time.Timer),
		idem:       make(map[idemKey]*idemRecord),
		refusals:   make(map[string]int),
		calls:      make(map[string]int),
		linkRefs:   make(map[string]string),
	}
	s.handler = s.routes()
	s.wg.Add(1 + webhookWorkers)
	go s.schedule()
	for range webhookWorkers {
		go s.deliver()
	}
	return s, nil
}

// Close stops the background work and waits for it: webhook delivery,
// pending UPI settlements (those payments stay pending), responses held
// back by TimeoutRate (they are answered at once). The handler still
// answers afterwards, but nothing more happens in the background; calling
// Close before shutting the HTTP server down keeps held-back responses from
// delaying the shutdown.
func (s *Sim) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for id, t := range s.settling {
		t.Stop()
		delete(s.settling, id)
	}
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
}

// Calls counts the API requests the simulator has answered, by route
// pattern ("POST /v1/payment_intents"), the ledger and the control hooks
// apart: the provider calls a merchant makes.
func (s *Sim) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

// Behaviour returns the current behaviour.
func (s *Sim) Behaviour() Behaviour {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.beh
	b.Outages = append([]Window(nil), b.Outages...)
	return b
}

// SetBehaviour replaces the behaviour (zero fields with defaults take
// them), or returns an error and changes nothing.
func (s *Sim) SetBehaviour(b Behaviour) error {
	b = b.withDefaults()
	if err := b.Validate(); err != nil {
		return err
	}
	b.Outages = append([]Window(nil), b.Outages...)
	s.mu.Lock()
	s.beh = b
	s.mu.Unlock()
	s.nudge() // an outage may have ended
	s.log.Info("behaviour changed", "behaviour", b)
	return nil
}

// SetWebhookURL changes where webhooks go; queued ones follow.
func (s *Sim) SetWebhookURL(url string) {
	s.mu.Lock()
	s.webhookURL = url
	s.mu.Unlock()
	s.nudge()
}

// Handler returns the HTTP API (and /_sim/ with Config.Control).
func (s *Sim) Handler() http.Handler { return s.handler }

// background runs f as work that Close waits for, unless Close has begun;
// callers hold no lock.
func (s *Sim) background(f func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	f()
}

// newID returns prefix_ and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}

// webhookTransport keeps enough idle connections to the core for webhooks
// delivered at once (net/http's default keeps 2 and dials the rest).
func webhookTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	return t
}
