package paysim_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/razorpay/razorpay-go/utils"
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
		for _, c := range []struct{ button, status string }{{"approve", "succeeded"}, {"decline", "failed"}} {
			pi, err := e.create(t, "k-"+c.button, "pm_card_threeDSecure2Required", 1000)
			if err != nil {
				t.Fatal(err)
			}
			q := sendBack(t, e.url, pi.ID, c.button, shop).Query()
			if q.Get("lang") != "hi" || q.Get("payment_intent") != pi.ID || !strings.HasPrefix(q.Get("payment_intent_client_secret"), pi.ID+"_secret_") ||
				q.Get("redirect_status") != c.status {
				t.Fatalf("%s: back with %v; want the shop's query, the PaymentIntent, its client secret, redirect_status %s", c.button, q, c.status)
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
