package paysim

import (
	"bytes"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The hosted checkout page is the fan's UPI app: a browser test opens
// /checkout/{id} and approves or declines the payment the way a fan would.
// It is the payer's side, not the merchant's API, so it needs no API key,
// is served without Control, and ignores outages and TimeoutRate.

//go:embed checkout.html
var checkoutHTML string

var checkoutTmpl = template.Must(template.New("checkout").Parse(checkoutHTML))

// checkoutCSP forbids every outside resource: the page is self-contained.
// form-action is left open because the form's answer redirects to the
// shop's return URL, and browsers apply form-action to that redirect.
const checkoutCSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'"

// maxReturnLen bounds the return URL carried through the page.
const maxReturnLen = 2048

// checkoutView is what the page shows: a payment, or a Problem.
type checkoutView struct {
	ID        string
	Reference string
	Amount    string // in rupees, "₹15,000.00"
	Status    string
	Pending   bool   // a pending payment: the buttons are shown
	Card      bool   // a card (its 3-D Secure step, or the card typed here), not UPI
	Return    string // a followable return URL, or ""
	Retry     bool   // the last attempt failed and the page stays open

	Problem string // an error page's heading; empty for a payment
	Detail  string
}

// checkoutPage serves GET /checkout/{id}[?return=url].
func (s *Sim) checkoutPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := s.payment(id)
	if err != nil {
		s.checkoutError(w, r, err)
		return
	}
	s.renderCheckout(w, http.StatusOK, checkoutView{
		ID:        p.ID,
		Reference: p.Reference,
		Amount:    rupees(p.Amount),
		Status:    p.Status,
		Pending:   p.Status == StatusPending, // UPI, or a card's 3-D Secure step
		Card:      p.Method == MethodCard,
		Return:    returnURL(r.URL.Query().Get("return")),
		Retry:     p.Status == StatusPending && r.URL.Query().Get("attempt") == "failed",
	})
}

// checkoutSettle serves POST /checkout/{id}/approve (ok) and /decline: it
// settles the payment as Settle does and answers 303 to the form's return
// URL, or to the page when there is none. A payment this request did not
// settle (already settled, or not UPI) sends the fan back to the page,
// which shows what happened instead; so does a second click.
func (s *Sim) checkoutSettle(ok bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		if err := r.ParseForm(); err != nil {
			s.renderCheckout(w, http.StatusBadRequest, checkoutView{Problem: "Bad request", Detail: "The form could not be read."})
			return
		}
		ret := returnURL(r.PostFormValue("return"))
		p, err := s.Settle(id, ok)
		// A failed attempt on a page that stays open (a Checkout Session's,
		// a Razorpay link's): the payer stays on it, told, to try again.
		retry := err == nil && p.Status == StatusPending
		var e *Error
		switch {
		case err == nil && ret != "" && !retry:
			http.Redirect(w, r, s.providerReturn(p, ret), http.StatusSeeOther)
		case err == nil || errors.As(err, &e) && e.Code == EInvalidState:
			q := url.Values{}
			if ret != "" {
				q.Set("return", ret)
			}
			if retry {
				q.Set("attempt", "failed")
			}
			page := "/checkout/" + url.PathEscape(id)
			if len(q) > 0 {
				page += "?" + q.Encode()
			}
			http.Redirect(w, r, page, http.StatusSeeOther)
		default:
			s.checkoutError(w, r, err)
		}
	}
}

// checkoutError answers an HTML page for err: 404 for an unknown payment.
func (s *Sim) checkoutError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.asError(r, err)
	v := checkoutView{Problem: "Something went wrong", Detail: "The payment could not be shown."}
	if e.Code == ENotFound {
		v = checkoutView{Problem: "Payment not found", Detail: "There is no payment " + r.PathValue("id") + "."}
	}
	s.renderCheckout(w, status[e.Code], v)
}

// renderCheckout writes the page whole, or a plain 500 if it cannot be
// rendered.
func (s *Sim) renderCheckout(w http.ResponseWriter, code int, v checkoutView) {
	var b bytes.Buffer
	if err := checkoutTmpl.Execute(&b, v); err != nil {
		s.log.Error("render checkout page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	h.Set("Cache-Control", "no-store") // the status changes
	h.Set("Content-Security-Policy", checkoutCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// providerReturn is ret (a URL returnURL accepted) with what the dialect's
// provider adds when it sends the payer back: Stripe, after a
// PaymentIntent's 3-D Secure step, the PaymentIntent, its client secret
// and redirect_status (a Checkout Session's payer goes to its success URL
// as given); Razorpay, after a Payment Link is paid, the payment, the link,
// its reference_id and status, and a signature over them with the API key.
// The shop's page must need none of them (the webhook brings the answer),
// and should not keep them: a client secret reads its payment.
func (s *Sim) providerReturn(p Payment, ret string) string {
	var add url.Values
	switch {
	case s.dialect == DialectStripe && !p.session:
		status := "failed" // as Stripe says it: the PaymentIntent needs another payment method
		if p.Status == StatusRequiresCapture || p.Status == StatusSucceeded {
			status = "succeeded" // authorized (manual capture) or charged
		}
		add = url.Values{"payment_intent": {p.ID}, "payment_intent_client_secret": {p.ID + "_secret_" + strings.TrimPrefix(p.ID, "pi_")},
			"redirect_status": {status}}
	case s.dialect == DialectRazorpay && p.Status == StatusSucceeded:
		pay := payOf(p.ID)
		add = url.Values{"razorpay_payment_id": {pay}, "razorpay_payment_link_id": {p.ID},
			"razorpay_payment_link_reference_id": {p.referenceID}, "razorpay_payment_link_status": {"paid"},
			"razorpay_signature": {razorpaySignature([]byte(s.apiKey), []byte(p.ID+"|"+p.referenceID+"|paid|"+pay))}}
	default:
		return ret
	}
	u, err := url.Parse(ret)
	if err != nil {
		return ret
	}
	q := u.Query()
	for k, v := range add {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// returnURL returns raw if it is an absolute http or https URL with a
// host, and "" otherwise: anything else (javascript:, data:, relative or
// scheme-relative URLs) is never linked to or followed.
func returnURL(raw string) string {
	if raw == "" || len(raw) > maxReturnLen {
		return ""
	}
	u, err := url.Parse(raw) // refuses control characters, so no header injection
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return raw
}

// rupees formats paise as rupees with Indian digit grouping, as a UPI app
// shows them: 1500000 is "₹15,000.00", 15000000 is "₹1,50,000.00".
func rupees(paise int64) string {
	sign, n := "", uint64(paise)
	if paise < 0 {
		sign, n = "-", -n
	}
	digits := strconv.FormatUint(n/100, 10)
	var b []byte
	if k := len(digits); k > 3 {
		head := digits[:k-3]
		for i, c := range []byte(head) {
			if i > 0 && (len(head)-i)%2 == 0 {
				b = append(b, ',')
			}
			b = append(b, c)
		}
		b = append(b, ',')
		digits = digits[k-3:]
	}
	b = append(b, digits...)
	cents := n % 100
	return sign + "₹" + string(b) + "." + string([]byte{byte('0' + cents/10), byte('0' + cents%10)})
}
