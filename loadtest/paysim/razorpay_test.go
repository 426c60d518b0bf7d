package paysim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/razorpay/razorpay-go/utils"

	"github.com/onsale/onsale/loadtest/paysim"
)

// razorpayEnv is the simulator in its Razorpay dialect and a receiver of
// its webhooks.
type razorpayEnv struct{ *dialectEnv }

func newRazorpayEnv(t *testing.T) *razorpayEnv {
	return &razorpayEnv{newDialectEnv(t, paysim.DialectRazorpay)}
}

// call sends a request with Basic auth (key id, the API key as secret).
func (e *razorpayEnv) call(t *testing.T, method, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.SetBasicAuth("rzp_test_onsale", testKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func rzpError(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	return fmt.Sprint(e["code"], ": ", e["description"])
}

// The Razorpay dialect answers as Razorpay's API reference says: a link
// per reference_id (a second is refused, as Razorpay refuses it), the
// link's page, its payment once paid, refunds under X-Refund-Idempotency
// (replayed for the same key and body, refused for another body or a key
// too short), a payment refunded whole refused, an unknown id 400, a
// wrong key 401, a link cancelled once.
func TestRazorpayDialect(t *testing.T) {
	e := newRazorpayEnv(t)
	link := `{"amount":50000,"currency":"INR","accept_partial":false,"reference_id":"booking-1","description":"Tickets",` +
		`"notify":{"sms":false,"email":false},"callback_url":"https://shop.example/back","callback_method":"get",` +
		`"expire_by":` + fmt.Sprint(time.Now().Add(20*time.Minute).Unix()) + `,"notes":{"reference":"booking-1"},` +
		`"options":{"checkout":{"method":{"upi":true,"card":false,"netbanking":false,"wallet":false}}}}`
	st, l := e.call(t, "POST", "/v1/payment_links", link)
	id, _ := l["id"].(string)
	if st != 200 || !strings.HasPrefix(id, "plink_") || l["status"] != "created" || !strings.Contains(fmt.Sprint(l["short_url"]), "/checkout/"+id) {
		t.Fatalf("create = %d %v", st, l)
	}
	if st, out := e.call(t, "POST", "/v1/payment_links", link); st != 400 || !strings.Contains(rzpError(out), "reference ID already attempted") {
		t.Fatalf("the same reference_id again = %d %v; want 400, already attempted", st, out)
	}
	if st, out := e.call(t, "GET", "/v1/payment_links?reference_id=booking-1", ""); st != 200 || len(out["payment_links"].([]any)) != 1 {
		t.Fatalf("links of booking-1 = %d %v", st, out)
	}
	if _, err := e.sim.Settle(id, true); err != nil { // the payer pays on the link's page
		t.Fatal(err)
	}
	_, l = e.call(t, "GET", "/v1/payment_links/"+id, "")
	pays, _ := l["payments"].([]any)
	if l["status"] != "paid" || len(pays) != 1 {
		t.Fatalf("the paid link = %v", l)
	}
	pay := pays[0].(map[string]any)["payment_id"].(string)
	if st, p := e.call(t, "GET", "/v1/payments/"+pay, ""); st != 200 || p["status"] != "captured" || p["amount"] != 50000.0 || p["order_id"] == nil {
		t.Fatalf("its payment = %d %v", st, p)
	}
	if st, out := e.call(t, "POST", "/v1/payment_links/"+id+"/cancel", ""); st != 400 || !strings.Contains(rzpError(out), "already paid") {
		t.Fatalf("cancel of a paid link = %d %v", st, out)
	}
	refund := func(key, body string) (int, map[string]any) {
		return e.call(t, "POST", "/v1/payments/"+pay+"/refund", body, "X-Refund-Idempotency", key)
	}
	if st, out := refund("short", `{}`); st != 400 || !strings.Contains(rzpError(out), "at least 10 characters") {
		t.Fatalf("a key too short = %d %v", st, out)
	}
	st, r1 := refund("onsale_refund_1", `{}`)
	if st != 200 || r1["status"] != "processed" || r1["amount"] != 50000.0 || !strings.HasPrefix(fmt.Sprint(r1["id"]), "rfnd_") {
		t.Fatalf("refund = %d %v", st, r1)
	}
	if st, r2 := refund("onsale_refund_1", `{}`); st != 200 || r2["id"] != r1["id"] {
		t.Fatalf("the same key and body again = %d %v; want the first refund %v", st, r2, r1["id"])
	}
	if st, out := refund("onsale_refund_1", `{"amount":100}`); st != 400 || !strings.Contains(rzpError(out), "Different request") {
		t.Fatalf("the same key, another body = %d %v", st, out)
	}
	if st, out := refund("onsale_refund_2", `{}`); st != 400 || !strings.Contains(rzpError(out), "fully refunded already") {
		t.Fatalf("a second refund under another key = %d %v; want 400 fully refunded", st, out)
	}
	if tot := e.sim.Ledger().Totals["booking-1"]; tot.Charged != 50000 || tot.Refunded != 50000 {
		t.Fatalf("ledger %+v; want one charge and one refund", tot)
	}
	if st, out := e.call(t, "GET", "/v1/payment_links/plink_nope", ""); st != 400 || !strings.Contains(rzpError(out), "does not exist") {
		t.Fatalf("an unknown link = %d %v; want 400 (Razorpay's answer)", st, out)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/payment_links/"+id, nil)
	req.SetBasicAuth("rzp_test_onsale", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a wrong key secret = %d; want 401", resp.StatusCode)
	}
	// A link not paid is cancelled once; the second is refused as Razorpay does.
	_, l2 := e.call(t, "POST", "/v1/payment_links", strings.Replace(link, "booking-1", "booking-2", -1))
	id2 := l2["id"].(string)
	if st, out := e.call(t, "POST", "/v1/payment_links/"+id2+"/cancel", ""); st != 200 || out["status"] != "cancelled" {
		t.Fatalf("cancel = %d %v", st, out)
	}
	if st, out := e.call(t, "POST", "/v1/payment_links/"+id2+"/cancel", ""); st != 400 || !strings.Contains(rzpError(out), "expired link") {
		t.Fatalf("cancel again = %d %v", st, out)
	}
	if st, out := e.call(t, "POST", "/v1/payment_links", strings.Replace(link, `"upi":true`, `"upi":false`, 1)); st != 400 {
		t.Fatalf("a link without UPI = %d %v; want 400", st, out)
	}
}

// The dialect's webhooks verify with razorpay-go's own utility (the
// signature in X-Razorpay-Signature with the webhook secret), name their
// event in X-Razorpay-Event-Id, and come in Razorpay's envelope: a paid
// link is payment.captured and payment_link.paid, its refund
// refund.processed.
func TestRazorpayDialectWebhooks(t *testing.T) {
	e := newRazorpayEnv(t)
	_, l := e.call(t, "POST", "/v1/payment_links", `{"amount":1000,"reference_id":"booking-9","options":{"checkout":{"method":{"upi":true}}}}`)
	id := l["id"].(string)
	if _, err := e.sim.Settle(id, true); err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, h := range e.delivered(2) {
		body := string(h.body)
		if !utils.VerifyWebhookSignature(body, h.header.Get("X-Razorpay-Signature"), testSecret) {
			t.Fatalf("razorpay-go refuses the simulator's webhook %s", body)
		}
		if utils.VerifyWebhookSignature(body, h.header.Get("X-Razorpay-Signature"), "another secret") {
			t.Fatal("a webhook verified with another secret") // the control
		}
		if h.header.Get("X-Razorpay-Event-Id") == "" {
			t.Fatalf("no X-Razorpay-Event-Id on %s", body)
		}
		var ev struct {
			Entity, Event string
			Payload       map[string]json.RawMessage
		}
		if err := json.NewDecoder(bytes.NewReader([]byte(body))).Decode(&ev); err != nil || ev.Entity != "event" {
			t.Fatalf("not a Razorpay event: %s", body)
		}
		events = append(events, ev.Event)
	}
	slices.Sort(events) // delivered concurrently: in any order, as Razorpay's
	if got := strings.Join(events, " "); got != "payment.captured payment_link.paid" {
		t.Fatalf("webhooks %s; want payment.captured and payment_link.paid", got)
	}
}
