package razorpay_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/razorpay/razorpay-go/utils"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/razorpay"
)

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// onsale's check of X-Razorpay-Signature agrees with razorpay-go's own
// (utils.VerifyWebhookSignature, the oracle): what it accepts, onsale
// accepts; what it rejects, onsale rejects. The cases are Razorpay's
// signature and every way a forger or a proxy could change it, and
// random ones.
func TestSignatureAgreesWithRazorpayGo(t *testing.T) {
	const secret = "webhook secret"
	body := `{"entity":"event","event":"payment_link.paid","payload":{},"created_at":1}`
	good := sign(secret, body)
	cases := []struct {
		name, body, sig string
		want            bool
	}{
		{"Razorpay's signature", body, good, true},
		{"upper-case hex", body, strings.ToUpper(good), false},
		{"another secret", body, sign("other", body), false},
		{"the key secret's, not the webhook's", body, sign("rzp key secret", body), false},
		{"a changed body", body + " ", good, false},
		{"the body re-encoded", strings.ReplaceAll(body, ":", ": "), good, false},
		{"truncated", body, good[:63], false},
		{"padded", body, good + " ", false},
		{"base64, not hex", body, base64.StdEncoding.EncodeToString(mustHex(good)), false},
		{"empty", body, "", false},
		{"an empty body signed", "", sign(secret, ""), true},
		{"unicode body", `{"note":"टिकट"}`, sign(secret, `{"note":"टिकट"}`), true},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 { // random bodies with right, flipped and foreign signatures
		b := make([]byte, r.IntN(300))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		s := sign(secret, string(b))
		switch i % 3 {
		case 1:
			x := []byte(s)
			x[r.IntN(len(x))] ^= 1
			s = string(x)
		case 2:
			s = sign(secret+"x", string(b))
		}
		cases = append(cases, struct {
			name, body, sig string
			want            bool
		}{"random", string(b), s, i%3 == 0})
	}
	for _, c := range cases {
		oracle := utils.VerifyWebhookSignature(c.body, c.sig, secret)
		ours := razorpay.Verify([]byte(secret), []byte(c.body), c.sig)
		if oracle != c.want {
			t.Fatalf("%s: razorpay-go says %v; the case expects %v", c.name, oracle, c.want)
		}
		if ours != oracle {
			t.Errorf("%s: onsale says %v, razorpay-go %v", c.name, ours, oracle)
		}
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// The webhook refuses, with the core's codes, a body that does not verify
// and one that is no Razorpay event; it reads a paid link as the money
// taken (the payment's amount), an expired one as failed, and acknowledges
// the payment.* events without settling anything.
func TestWebhookEvents(t *testing.T) {
	c, err := razorpay.New(razorpay.Config{KeyID: "rzp_test_x", KeySecret: "k", WebhookSecret: "whs", Site: "tickets.example"})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(body, sig, id string) (*core.PaymentEvent, error) {
		h := http.Header{}
		if sig != "" {
			h.Set(razorpay.SignatureHeader, sig)
		}
		if id != "" {
			h.Set(razorpay.EventIDHeader, id)
		}
		return c.Webhook(h, []byte(body), time.Now())
	}
	paid := `{"entity":"event","event":"payment_link.paid","created_at":1700000000,"contains":["payment_link","order","payment"],` +
		`"payload":{"payment_link":{"entity":{"id":"plink_1","amount":50000,"currency":"INR","status":"paid","reference_id":"abc","notes":{"reference":"booking-7","site":"tickets.example"}}},` +
		`"payment":{"entity":{"id":"pay_1","amount":50000,"currency":"INR","status":"captured"}}}}`
	if _, err := deliver(paid, sign("other", paid), "evt_1"); core.ErrorCode(err) != core.EBadSignature {
		t.Errorf("a forged webhook = %v; want %s", err, core.EBadSignature)
	}
	if _, err := deliver(paid, "", "evt_1"); core.ErrorCode(err) != core.EBadSignature {
		t.Errorf("an unsigned webhook = %v; want %s", err, core.EBadSignature)
	}
	if _, err := deliver(`{"entity":"collection"}`, sign("whs", `{"entity":"collection"}`), "evt_1"); core.ErrorCode(err) != core.EInvalid {
		t.Errorf("not an event = %v; want %s", err, core.EInvalid)
	}
	e, err := deliver(paid, sign("whs", paid), "evt_1")
	if err != nil || e.ID != "evt_1" || e.Outcome != core.EventSucceeded || e.PaymentID != "plink_1" || e.Reference != "booking-7" ||
		e.Amount != 50000 || e.Currency != "INR" || e.Created.Unix() != 1700000000 {
		t.Fatalf("payment_link.paid = %+v %v", e, err)
	}
	expired := `{"entity":"event","event":"payment_link.expired","payload":{"payment_link":{"entity":{"id":"plink_2","amount":100,"currency":"INR","status":"expired","reference_id":"def","notes":{"reference":"booking-8","site":"tickets.example"}}}}}`
	if e, err := deliver(expired, sign("whs", expired), "evt_2"); err != nil || e.Outcome != core.EventFailed || e.PaymentID != "plink_2" {
		t.Errorf("payment_link.expired = %+v %v", e, err)
	}
	other := strings.Replace(paid, "tickets.example", "staging.example", 1) // another deployment's link on the same account
	if e, err := deliver(other, sign("whs", other), "evt_3"); err != nil || e.Outcome != core.EventIgnored || e.PaymentID != "" {
		t.Errorf("another deployment's payment_link.paid = %+v %v; want ignored", e, err)
	}
	noNotes := strings.Replace(paid, `"notes":{"reference":"booking-7","site":"tickets.example"}`, `"notes":[]`, 1)
	if e, err := deliver(noNotes, sign("whs", noNotes), "evt_4"); err != nil || e.Outcome != core.EventIgnored {
		t.Errorf("a link without onsale's notes = %+v %v; want ignored", e, err)
	}
	failed := `{"entity":"event","event":"payment.failed","payload":{"payment":{"entity":{"id":"pay_3","amount":100,"currency":"INR","status":"failed"}}}}`
	if e, err := deliver(failed, sign("whs", failed), ""); err != nil || e.Outcome != core.EventIgnored || !strings.HasPrefix(e.ID, "sha256:") {
		t.Errorf("payment.failed without an event id = %+v %v; want ignored, named by its body", e, err)
	}
}
