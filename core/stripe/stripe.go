// Package stripe is the core's card payments through Stripe
// (github.com/stripe/stripe-go): a core.PaymentProvider.
//
// A card booking is a PaymentIntent with manual capture: confirm creates it
// with the card's PaymentMethod and confirms it at once (authorize), the
// outbox captures it after the seats are booked, cancels it when the hold is
// gone, and refunds it when a show is cancelled. A card that needs 3-D
// Secure (most cards issued in India) leaves the PaymentIntent in
// requires_action with a redirect to the issuer's page: the core answers
// confirm 202 with that page as the payment's checkout_url, the fan's app
// sends the fan there, Stripe sends the fan back to the booking page, and
// the webhook payment_intent.amount_capturable_updated settles the booking.
// No Stripe script runs in onsale's pages.
//
// A card typed on Stripe's own page (confirm without a payment_token: the
// fans' web pages) is a Checkout Session in payment mode with the same
// manual capture: its id (cs_...) is the booking's payment, its url the
// page confirm answers 202 with, and checkout.session.completed (the card
// authorized) or .expired settles the booking. The adapter acts on the
// session's PaymentIntent for capture, cancel and refund; the
// PaymentIntent's own events are ignored for it (marked by its metadata),
// so a booking is settled by one payment only.
//
// Idempotency: every POST carries the core's key (booking and attempt).
// Stripe keeps a key about 24 hours while the outbox retries money jobs
// longer, so a refusal that says the PaymentIntent is no longer in the
// state the call needs is read by fetching it: captured already, cancelled
// already, refunded whole already. A retry past a day is therefore carried
// out once too: a second capture or cancel of the same PaymentIntent is
// refused by Stripe (and read as done), a refund of nothing left is refused
// (and checked against the charge), and a full refund never asks for an
// amount, so it cannot give back more than was taken.
//
// Webhooks carry Stripe-Signature, the scheme onsale's own simulator uses
// (shared/paysig: t=<unix>,v1=<HMAC-SHA256 of t.body>, 5 minutes'
// tolerance). An event of the other mode (test against live) is refused.
// Stripe sends every event of an account to every endpoint: what onsale
// makes carries its site (the public address's host) in its metadata, and
// an event of a payment without this deployment's site is acknowledged and
// ignored, never settled or refunded here; the idempotency keys carry the
// site too.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/shared/paysig"
	"github.com/stripe/stripe-go/v82"
)

// SignatureHeader carries the webhook signature.
const SignatureHeader = "Stripe-Signature"

// API is Stripe's API address.
const API = "https://api.stripe.com"

// Client is Stripe, as the core uses it.
type Client struct {
	sc            *stripe.Client
	webhookSecret []byte
	live          bool
	site          string
}

// siteMark names, in the metadata of what onsale makes at Stripe, the
// deployment that made it: Stripe sends every event of an account to every
// endpoint, and an event of another deployment's (or another program's)
// payment must not settle, or refund, anything here.
const siteMark = "onsale_site"

// key is the core's idempotency key for this deployment: keys are the
// account's, and two deployments on one account have bookings of the
// same numbers.
func (c *Client) key(k string) string { return c.site + " " + k }

// Config configures a Client.
type Config struct {
	// Key is the secret (sk_) or restricted (rk_) API key; its mode (test
	// or live) is the mode of the events the webhook accepts.
	Key string
	// WebhookSecret is the endpoint's signing secret (whsec_...).
	WebhookSecret string
	// URL is the API's address: API, or a stand-in (stripe-mock, the
	// simulator's Stripe mode) in tests.
	URL  string
	HTTP *http.Client
	// Site names this deployment (the host of its public address) in
	// what it makes at Stripe and in its idempotency keys.
	Site string
}

// New returns a client, or an error for a key that is not Stripe's.
func New(c Config) (*Client, error) {
	live, ok := keyMode(c.Key)
	if !ok {
		return nil, errors.New("stripe: the key must be a secret or restricted key (sk_test_, sk_live_, rk_test_, rk_live_)")
	}
	if !strings.HasPrefix(c.WebhookSecret, "whsec_") {
		return nil, errors.New("stripe: the webhook secret must be the endpoint's signing secret (whsec_...)")
	}
	if c.Site == "" || len(c.Site) > 100 {
		return nil, errors.New("stripe: the site (the public address's host) must be 1 to 100 bytes")
	}
	if c.URL == "" {
		c.URL = API
	}
	if c.HTTP == nil {
		c.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(c.URL),
		HTTPClient:        c.HTTP,
		MaxNetworkRetries: stripe.Int64(0), // the core and its outbox retry, under the same key
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return &Client{sc: stripe.NewClient(c.Key, stripe.WithBackends(backends)), webhookSecret: []byte(c.WebhookSecret), live: live, site: c.Site}, nil
}

// keyMode reports whether key is a live key, and whether it is Stripe's.
func keyMode(key string) (live, ok bool) {
	for _, p := range []string{"sk_", "rk_"} {
		if rest, found := strings.CutPrefix(key, p); found {
			switch {
			case strings.HasPrefix(rest, "live_") && len(rest) > 5:
				return true, true
			case strings.HasPrefix(rest, "test_") && len(rest) > 5:
				return false, true
			}
		}
	}
	return false, false
}

// Name is "stripe".
func (c *Client) Name() string { return "stripe" }

// Takes reports whether Stripe takes a method: cards only (UPI goes
// through Razorpay).
func (c *Client) Takes(method string) bool { return method == "card" }

// checkoutMark marks, in a PaymentIntent's metadata, one made by a Checkout
// Session: its events are the session's to tell.
const checkoutMark = "onsale_checkout"

// checkoutLife is how long after its booking a Checkout Session stays
// open: above Stripe's shortest (30 minutes from the create), so that a
// create retried within half an hour still asks for a valid time, and the
// same one (the booking's, not the clock's: Stripe refuses a retried key
// with other parameters). A payer who finishes after the hold is gone is
// a late payment (the authorization is cancelled); one who never does, an
// expired session.
const checkoutLife = time.Hour

// CreatePayment creates and confirms a manual-capture PaymentIntent with
// the card's PaymentMethod (r.PaymentToken, pm_...), or without a token a
// Checkout Session (the card typed on Stripe's page), under key.
func (c *Client) CreatePayment(ctx context.Context, key string, r core.PaymentRequest) (*core.Payment, error) {
	if r.Method != "card" {
		return nil, &core.ProviderError{Status: http.StatusBadRequest, Code: "method_unavailable", Message: "Stripe takes cards here"}
	}
	capture := stripe.PaymentIntentCaptureMethodManual
	if r.Capture == "automatic" {
		capture = stripe.PaymentIntentCaptureMethodAutomatic
	}
	if r.PaymentToken == "" {
		return c.checkout(ctx, key, r, capture)
	}
	p := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(r.Amount),
		Currency:           stripe.String(strings.ToLower(r.Currency)),
		CaptureMethod:      stripe.String(string(capture)),
		PaymentMethod:      stripe.String(r.PaymentToken),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		Confirm:            stripe.Bool(true),
		Description:        stripe.String(r.Reference),
		Metadata:           map[string]string{"reference": r.Reference, siteMark: c.site},
	}
	if r.ReturnURL != "" {
		p.ReturnURL = stripe.String(r.ReturnURL)
	}
	p.SetIdempotencyKey(c.key(key))
	pi, err := c.sc.V1PaymentIntents.Create(ctx, p)
	if err != nil {
		return nil, providerError(err)
	}
	return payment(pi), nil
}

// checkout creates a Checkout Session for one card payment of r.
func (c *Client) checkout(ctx context.Context, key string, r core.PaymentRequest, capture stripe.PaymentIntentCaptureMethod) (*core.Payment, error) {
	if r.ReturnURL == "" {
		return nil, errors.New("stripe: a Checkout Session needs the page to send the payer back to (ONSALE_PUBLIC_URL)")
	}
	p := &stripe.CheckoutSessionCreateParams{
		Mode:               stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID:  stripe.String(r.Reference),
		SuccessURL:         stripe.String(r.ReturnURL),
		CancelURL:          stripe.String(r.ReturnURL),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
		ExpiresAt:          stripe.Int64(since(r).Add(checkoutLife).Unix()),
		Metadata:           map[string]string{"reference": r.Reference, siteMark: c.site},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(strings.ToLower(r.Currency)),
				UnitAmount:  stripe.Int64(r.Amount),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String("Tickets, " + r.Reference)},
			},
		}},
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{
			CaptureMethod: stripe.String(string(capture)),
			Metadata:      map[string]string{"reference": r.Reference, checkoutMark: "1", siteMark: c.site},
		},
	}
	p.SetIdempotencyKey(c.key(key)) // one attempt, one object: a PaymentIntent create of the same attempt is refused
	cs, err := c.sc.V1CheckoutSessions.Create(ctx, p)
	if err != nil {
		return nil, providerError(err)
	}
	return session(cs), nil
}

// since is when r's booking was made (now, for a request without one).
func since(r core.PaymentRequest) time.Time {
	if r.Since.IsZero() {
		return time.Now()
	}
	return r.Since
}

// isSession reports whether a payment id is a Checkout Session's.
func isSession(id string) bool { return strings.HasPrefix(id, "cs_") }

// retrieveSession fetches a Checkout Session with its PaymentIntent and
// the PaymentIntent's latest charge.
func (c *Client) retrieveSession(ctx context.Context, id string) (*stripe.CheckoutSession, error) {
	p := &stripe.CheckoutSessionRetrieveParams{}
	p.AddExpand("payment_intent.latest_charge")
	cs, err := c.sc.V1CheckoutSessions.Retrieve(ctx, id, p)
	if err != nil {
		return nil, providerError(err)
	}
	return cs, nil
}

// session is a Checkout Session in the core's terms, under the session's
// id: open (the payer is on the page), expired (failed), or complete (its
// PaymentIntent's state).
func session(cs *stripe.CheckoutSession) *core.Payment {
	p := &core.Payment{ID: cs.ID, Amount: cs.AmountTotal, Currency: strings.ToUpper(string(cs.Currency)), Method: "card",
		Reference: cs.ClientReferenceID, Status: core.PaymentPending}
	switch {
	case cs.Status == stripe.CheckoutSessionStatusOpen:
		p.CheckoutURL = cs.URL
	case cs.Status == stripe.CheckoutSessionStatusExpired:
		p.Status, p.FailureReason = core.PaymentFailed, "the payer did not finish on Stripe's page"
	case cs.PaymentIntent != nil && cs.PaymentIntent.Status != "":
		pi := payment(cs.PaymentIntent)
		p.Status, p.AmountCaptured, p.AmountRefunded, p.FailureReason = pi.Status, pi.AmountCaptured, pi.AmountRefunded, pi.FailureReason
	}
	return p
}

// intentOf is the PaymentIntent a payment id acts on: itself, or a
// completed Checkout Session's ("" for a session still open or expired).
func (c *Client) intentOf(ctx context.Context, id string) (string, *stripe.CheckoutSession, error) {
	if !isSession(id) {
		return id, nil, nil
	}
	cs, err := c.retrieveSession(ctx, id)
	if err != nil {
		return "", nil, err
	}
	if cs.Status == stripe.CheckoutSessionStatusComplete && cs.PaymentIntent != nil {
		return cs.PaymentIntent.ID, cs, nil
	}
	return "", cs, nil
}

// Payment fetches a PaymentIntent with its latest charge (what was
// refunded), or a Checkout Session with its PaymentIntent.
func (c *Client) Payment(ctx context.Context, id string) (*core.Payment, error) {
	if isSession(id) {
		cs, err := c.retrieveSession(ctx, id)
		if err != nil {
			return nil, err
		}
		return session(cs), nil
	}
	p := &stripe.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	pi, err := c.sc.V1PaymentIntents.Retrieve(ctx, id, p)
	if err != nil {
		return nil, providerError(err)
	}
	return payment(pi), nil
}

// PaymentsFor fetches the booking's recorded PaymentIntent. Stripe cannot
// search PaymentIntents by metadata for accounts in India, so a booking
// that recorded none has none listed: its PaymentIntent, if Stripe made
// one, reports itself by webhook (which settles the booking, or gives the
// money back when the reconciler gave the booking up).
func (c *Client) PaymentsFor(ctx context.Context, q core.PaymentLookup) ([]core.Payment, error) {
	id := q.PaymentID
	if id == "" {
		return nil, nil
	}
	p, err := c.Payment(ctx, id)
	if err != nil {
		return nil, err
	}
	return []core.Payment{*p}, nil
}

// Capture captures the whole authorization under key.
func (c *Client) Capture(ctx context.Context, key, id string) (*core.Payment, error) {
	pid, _, err := c.intentOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if pid == "" {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state", Message: "the Checkout Session authorized nothing"}
	}
	p := &stripe.PaymentIntentCaptureParams{}
	p.SetIdempotencyKey(c.key(key))
	pi, err := c.sc.V1PaymentIntents.Capture(ctx, pid, p)
	if err != nil {
		return nil, c.stateError(ctx, pid, err)
	}
	return payment(pi), nil
}

// Cancel cancels an uncaptured PaymentIntent under key (the authorization
// is released); a Checkout Session still open is expired (the payer can no
// longer pay on it).
func (c *Client) Cancel(ctx context.Context, key, id string) (*core.Payment, error) {
	pid, cs, err := c.intentOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if pid == "" {
		if cs.Status == stripe.CheckoutSessionStatusExpired {
			return nil, &core.ProviderError{Status: http.StatusConflict, Code: "already_canceled", Message: "the Checkout Session expired"}
		}
		p := &stripe.CheckoutSessionExpireParams{}
		p.SetIdempotencyKey(c.key(key))
		cs, err := c.sc.V1CheckoutSessions.Expire(ctx, id, p)
		if err != nil {
			// Completed while we looked (the payer finished): cancel its
			// PaymentIntent instead.
			if pid, _, ferr := c.intentOf(ctx, id); ferr == nil && pid != "" {
				return c.cancelIntent(ctx, intentKey(key), pid)
			}
			return nil, providerError(err)
		}
		out := session(cs)
		out.Status = core.PaymentCanceled
		return out, nil
	}
	if cs != nil {
		key = intentKey(key)
	}
	return c.cancelIntent(ctx, key, pid)
}

// intentKey is the key of a session's PaymentIntent's cancel: Stripe's keys
// belong to one request, and the session's own expiry may have had key.
func intentKey(key string) string { return key + ":intent" }

// cancelIntent cancels an uncaptured PaymentIntent under key.
func (c *Client) cancelIntent(ctx context.Context, key, pid string) (*core.Payment, error) {
	p := &stripe.PaymentIntentCancelParams{}
	p.SetIdempotencyKey(c.key(key))
	pi, err := c.sc.V1PaymentIntents.Cancel(ctx, pid, p)
	if err != nil {
		return nil, c.stateError(ctx, pid, err)
	}
	return payment(pi), nil
}

// Refund refunds what is left of the PaymentIntent's capture under key (no
// amount: Stripe gives back the rest, never more).
func (c *Client) Refund(ctx context.Context, key, id string) (*core.Refund, error) {
	pid, _, err := c.intentOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if pid == "" {
		return nil, &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state", Message: "the Checkout Session took nothing"}
	}
	p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pid)}
	p.SetIdempotencyKey(c.key(key))
	rf, err := c.sc.V1Refunds.Create(ctx, p)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Code == stripe.ErrorCodeChargeAlreadyRefunded {
			// Nothing left: the outbox checks the charge (core's verifyRefunded).
			return nil, &core.ProviderError{Status: http.StatusConflict, Code: "refund_exceeds_capture", Message: se.Msg}
		}
		return nil, providerError(err)
	}
	return &core.Refund{ID: rf.ID, PaymentID: id, Amount: rf.Amount, Status: string(rf.Status)}, nil
}

// stateError reads Stripe's "the PaymentIntent is not in a state for this"
// by fetching it: the core's 409 already_captured, already_canceled or
// invalid_state.
func (c *Client) stateError(ctx context.Context, id string, err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) || se.Code != stripe.ErrorCodePaymentIntentUnexpectedState {
		return providerError(err)
	}
	p, ferr := c.Payment(ctx, id)
	if ferr != nil {
		return ferr
	}
	code := "invalid_state"
	switch p.Status {
	case core.PaymentSucceeded:
		code = "already_captured"
	case core.PaymentCanceled:
		code = "already_canceled"
	}
	return &core.ProviderError{Status: http.StatusConflict, Code: code, Message: se.Msg}
}

// providerError puts Stripe's error in the core's terms; a transport error
// stays as it is (temporary).
func providerError(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return err
	}
	pe := &core.ProviderError{Status: se.HTTPStatusCode, Code: string(se.Code), Message: se.Msg}
	switch {
	case se.Type == stripe.ErrorTypeCard || se.HTTPStatusCode == http.StatusPaymentRequired:
		pe.Status, pe.Code = http.StatusPaymentRequired, "card_declined"
		if se.DeclineCode != "" {
			pe.Message += " (" + string(se.DeclineCode) + ")"
		}
	case se.Code == stripe.ErrorCodeIdempotencyKeyInUse:
		pe.Status, pe.Code = http.StatusConflict, "request_in_progress" // temporary: retry under the same key
	case se.Type == stripe.ErrorTypeIdempotency:
		pe.Status, pe.Code = http.StatusUnprocessableEntity, "idempotency_key_reused"
	case pe.Code == "":
		pe.Code = string(se.Type)
	}
	return pe
}

// payment is a PaymentIntent in the core's terms.
func payment(pi *stripe.PaymentIntent) *core.Payment {
	p := &core.Payment{ID: pi.ID, Amount: pi.Amount, Currency: strings.ToUpper(string(pi.Currency)),
		Reference: pi.Metadata["reference"], Method: "card"}
	switch pi.Status {
	case stripe.PaymentIntentStatusRequiresCapture:
		p.Status = core.PaymentRequiresCapture
	case stripe.PaymentIntentStatusSucceeded:
		p.Status = core.PaymentSucceeded
		p.AmountCaptured = pi.AmountReceived
	case stripe.PaymentIntentStatusCanceled:
		p.Status = core.PaymentCanceled
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		// Confirmed once and refused (the card was declined or failed its
		// 3-D Secure step): the core's attempt is over; a new attempt is a
		// new PaymentIntent.
		p.Status = core.PaymentPending
		if pi.LastPaymentError != nil {
			p.Status, p.FailureReason = core.PaymentFailed, pi.LastPaymentError.Msg
		}
	default: // requires_confirmation, requires_action, processing
		p.Status = core.PaymentPending
	}
	if pi.LatestCharge != nil {
		p.AmountRefunded = pi.LatestCharge.AmountRefunded
		if pi.LatestCharge.Captured {
			p.AmountCaptured = pi.LatestCharge.AmountCaptured
		}
	}
	if pi.Status == stripe.PaymentIntentStatusRequiresAction && pi.NextAction != nil && pi.NextAction.RedirectToURL != nil {
		p.CheckoutURL = pi.NextAction.RedirectToURL.URL
	}
	return p
}

// Webhook verifies Stripe-Signature and reads the PaymentIntent events the
// flows need: an authorization (amount_capturable_updated) or a charge
// (succeeded) is the money being there; payment_failed and canceled are
// the attempt over. Every other event is acknowledged and ignored.
func (c *Client) Webhook(h http.Header, body []byte, now time.Time) (*core.PaymentEvent, error) {
	if err := paysig.Verify(c.webhookSecret, h.Get(SignatureHeader), body, now); err != nil {
		return nil, core.Errorf(core.EBadSignature, "%v", err)
	}
	var ev stripe.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" || ev.Data == nil {
		return nil, core.Errorf(core.EInvalid, "not a Stripe event")
	}
	if ev.Livemode != c.live {
		return nil, core.Errorf(core.EInvalid, "a %s event for a %s key: this endpoint is registered in the other mode", mode(ev.Livemode), mode(c.live))
	}
	e := &core.PaymentEvent{ID: ev.ID, Type: string(ev.Type), Outcome: core.EventIgnored}
	if ev.Created > 0 {
		e.Created = time.Unix(ev.Created, 0)
	}
	switch {
	case strings.HasPrefix(e.Type, "checkout.session."):
		var cs stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &cs); err != nil || cs.ID == "" {
			return nil, core.Errorf(core.EInvalid, "a %s event without a Checkout Session", ev.Type)
		}
		if cs.Metadata[siteMark] != c.site {
			return e, nil // another deployment's, or not onsale's
		}
		e.PaymentID, e.Reference, e.Amount, e.Currency = cs.ID, cs.ClientReferenceID, cs.AmountTotal, strings.ToUpper(string(cs.Currency))
		switch ev.Type {
		case "checkout.session.completed":
			e.Outcome = core.EventSucceeded // the card authorized (or charged) on Stripe's page
		case "checkout.session.expired":
			e.Outcome = core.EventFailed
		}
		return e, nil
	case !strings.HasPrefix(e.Type, "payment_intent."):
		return e, nil
	}
	var pi stripe.PaymentIntent
	if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil || pi.ID == "" {
		return nil, core.Errorf(core.EInvalid, "a %s event without a PaymentIntent", ev.Type)
	}
	if pi.Metadata[checkoutMark] != "" || pi.Metadata[siteMark] != c.site {
		return e, nil // a Checkout Session's (its session's events settle the booking), or another deployment's
	}
	e.PaymentID, e.Reference, e.Currency = pi.ID, pi.Metadata["reference"], strings.ToUpper(string(pi.Currency))
	switch ev.Type {
	case "payment_intent.amount_capturable_updated":
		e.Outcome, e.Amount = core.EventSucceeded, pi.AmountCapturable
	case "payment_intent.succeeded":
		e.Outcome, e.Amount = core.EventSucceeded, pi.AmountReceived
	case "payment_intent.payment_failed", "payment_intent.canceled":
		e.Outcome, e.Amount = core.EventFailed, pi.Amount
	}
	return e, nil
}

func mode(live bool) string {
	if live {
		return "live"
	}
	return "test"
}
