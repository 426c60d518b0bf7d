package paysim_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/razorpay/razorpay-go/utils"
	"github.com/stripe/stripe-go/v82"
)

// sendBack posts the checkout page's button for payment id with a return
// URL and returns where the provider sends the payer (the 303's Location).
func sendBack(t *testing.T, sim, id, button, ret string) *url.URL {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(sim+"/checkout/"+id+"/"+button, url.Values{"return": {ret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("%s %s = %d Location %q; want 303 to the shop", button, id, resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc
}

// The payer comes back from a provider's page with what that provider adds
// to the shop's URL (the shop's own query kept): Stripe, after a 3-D
// Secure step, the PaymentIntent, its client secret and redirect_status;
// Razorpay, after a paid link, its ids, status and a signature that
// razorpay-go's own verifier accepts with the API key (and refuses with
// another). The simulator's own dialect sends the payer back to the URL as
// given (TestCheckoutSettle).
func TestProviderReturn(t *testing.T) {
	const shop = "https://shop.example/events/7/book?lang=hi"
	t.Run("stripe 3-D Secure", func(t *testing.T) {
		e := newStripeEnv(t)
		for _, c := range []struct {
			button, capture, status string
		}{{"approve", "manual", "succeeded"}, {"decline", "manual", "failed"}, {"approve", "automatic", "succeeded"}} {
			p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("inr"),
				CaptureMethod: stripe.String(c.capture), PaymentMethod: stripe.String("pm_card_threeDSecure2Required"), Confirm: stripe.Bool(true),
				Metadata: map[string]string{"reference": "booking-1"}, ReturnURL: stripe.String(shop)}
			p.SetIdempotencyKey("k-" + c.button + "-" + c.capture)
			pi, err := e.sc.V1PaymentIntents.Create(context.Background(), p)
			if err != nil || pi.Status != stripe.PaymentIntentStatusRequiresAction {
				t.Fatalf("%s: %+v %v; want a PaymentIntent waiting for 3-D Secure", c.capture, pi, err)
			}
			q := sendBack(t, e.url, pi.ID, c.button, shop).Query()
			if q.Get("lang") != "hi" || q.Get("payment_intent") != pi.ID || !strings.HasPrefix(q.Get("payment_intent_client_secret"), pi.ID+"_secret_") ||
				q.Get("redirect_status") != c.status {
				t.Fatalf("%s (%s capture): back with %v; want the shop's query, the PaymentIntent, its client secret, redirect_status %s", c.button, c.capture, q, c.status)
			}
		}
	})
	t.Run("razorpay link paid", func(t *testing.T) {
		e := newRazorpayEnv(t)
		_, l := e.call(t, "POST", "/v1/payment_links", `{"amount":1000,"currency":"INR","reference_id":"booking-9-1","options":{"checkout":{"method":{"upi":true}}}}`)
		id, _ := l["id"].(string)
		back := sendBack(t, e.url, id, "approve", shop)
		q := back.Query()
		if back.Host != "shop.example" || q.Get("lang") != "hi" || q.Get("razorpay_payment_link_id") != id ||
			q.Get("razorpay_payment_link_reference_id") != "booking-9-1" || q.Get("razorpay_payment_link_status") != "paid" ||
			!strings.HasPrefix(q.Get("razorpay_payment_id"), "pay_") {
			t.Fatalf("back with %v; want the shop's query and the link's ids and status", back.String())
		}
		params := map[string]any{"payment_link_id": q.Get("razorpay_payment_link_id"), "payment_link_reference_id": q.Get("razorpay_payment_link_reference_id"),
			"payment_link_status": q.Get("razorpay_payment_link_status"), "razorpay_payment_id": q.Get("razorpay_payment_id")}
		if !utils.VerifyPaymentLinkSignature(params, q.Get("razorpay_signature"), testKey) {
			t.Fatalf("razorpay-go refuses the return's signature %q with the API key", q.Get("razorpay_signature"))
		}
		if utils.VerifyPaymentLinkSignature(params, q.Get("razorpay_signature"), testKey+"x") {
			t.Fatal("control: razorpay-go accepts the return's signature with another key")
		}
	})
}

// A failed attempt on a page that stays open (a Stripe Checkout Session's,
// a Razorpay link's) keeps the payer on it, told so, with the buttons to
// try again; the paid attempt then sends the payer back (to a session's
// success URL as given, with a link's parameters).
func TestFailedAttemptStaysOnPage(t *testing.T) {
	const shop = "https://shop.example/events/7/book"
	retryPage := func(t *testing.T, sim, id string) {
		t.Helper()
		back := sendBack(t, sim, id, "decline", shop)
		if back.Path != "/checkout/"+id || back.Query().Get("attempt") != "failed" || back.Query().Get("return") != shop {
			t.Fatalf("a failed attempt sent the payer to %s; want its page again, told, with the return kept", back)
		}
		resp, err := http.Get(sim + back.String())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`id="attempt"`, `id="approve"`, `id="decline"`} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("the page after a failed attempt has no %s:\n%s", want, body)
			}
		}
	}
	t.Run("stripe checkout session", func(t *testing.T) {
		e := newStripeEnv(t)
		p := &stripe.CheckoutSessionCreateParams{Mode: stripe.String("payment"), SuccessURL: stripe.String(shop), ClientReferenceID: stripe.String("booking-2"),
			LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{Quantity: stripe.Int64(1), PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency: stripe.String("inr"), UnitAmount: stripe.Int64(1000), ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String("Tickets")}}}}}
		cs, err := e.sc.V1CheckoutSessions.Create(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		id := "pi_" + strings.TrimPrefix(cs.ID, "cs_")
		retryPage(t, e.url, id)
		if back := sendBack(t, e.url, id, "approve", shop); back.String() != shop {
			t.Fatalf("paid on the session's page: back to %s; want the success URL as given", back)
		}
	})
	t.Run("razorpay link", func(t *testing.T) {
		e := newRazorpayEnv(t)
		_, l := e.call(t, "POST", "/v1/payment_links", `{"amount":1000,"currency":"INR","reference_id":"booking-9-2","options":{"checkout":{"method":{"upi":true}}}}`)
		id, _ := l["id"].(string)
		retryPage(t, e.url, id)
		if back := sendBack(t, e.url, id, "approve", shop); back.Query().Get("razorpay_payment_link_status") != "paid" {
			t.Fatalf("paid on the link's page: back to %s; want the link's parameters", back)
		}
	})
}
