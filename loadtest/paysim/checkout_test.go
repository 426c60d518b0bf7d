package paysim_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// noRedirect answers redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// element is one HTML start tag found by id: its offset in the page, its
// attributes and the text up to the next tag, unescaped.
type element struct {
	at    int
	attrs map[string]string
	text  string
}

var attrRE = regexp.MustCompile(`([a-zA-Z-]+)="([^"]*)"`)

// find returns the elements of page matching a start-tag pattern (an id
// selector "#x", or a tag name such as "form").
func find(page []byte, sel string) []element {
	var re *regexp.Regexp
	if id, ok := strings.CutPrefix(sel, "#"); ok {
		re = regexp.MustCompile(`<[a-zA-Z]+\s[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)`)
	} else {
		re = regexp.MustCompile(`<` + sel + `\b[^>]*>([^<]*)`)
	}
	var out []element
	for _, m := range re.FindAllSubmatchIndex(page, -1) {
		tag := string(page[m[0]:m[1]])
		el := element{at: m[0], attrs: map[string]string{}, text: html.UnescapeString(strings.TrimSpace(string(page[m[2]:m[3]])))}
		for _, a := range attrRE.FindAllStringSubmatch(tag[:strings.IndexByte(tag, '>')], -1) {
			el.attrs[a[1]] = html.UnescapeString(a[2])
		}
		out = append(out, el)
	}
	return out
}

// one returns the single element #id, failing if there is not exactly one.
func one(tb testing.TB, page []byte, id string) element {
	tb.Helper()
	els := find(page, "#"+id)
	if len(els) != 1 {
		tb.Fatalf("page has %d elements #%s; want 1:\n%s", len(els), id, page)
	}
	return els[0]
}

// click submits the form holding button #id as a browser would: to its
// action, with its hidden fields, without following the redirect.
func (e *env) click(tb testing.TB, page []byte, id string) response {
	tb.Helper()
	button := one(tb, page, id)
	var form element
	for _, f := range find(page, "form") {
		if f.at < button.at {
			form = f
		}
	}
	if form.attrs["method"] != "post" || form.attrs["action"] == "" {
		tb.Fatalf("#%s is in no POST form: %+v", id, form)
	}
	fields := url.Values{}
	for _, in := range find(page[form.at:button.at], "input") {
		if in.attrs["type"] == "hidden" {
			fields.Add(in.attrs["name"], in.attrs["value"])
		}
	}
	return e.submit(tb, form.attrs["action"], fields)
}

// submit POSTs a form to path without following the redirect.
func (e *env) submit(tb testing.TB, path string, fields url.Values) response {
	tb.Helper()
	r, err := e.try(noRedirect, "POST", path, fields.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// open GETs a checkout page and checks that it is a self-contained HTML
// page with status code want.
func (e *env) open(tb testing.TB, path string, want int) response {
	tb.Helper()
	r, err := e.try(noRedirect, "GET", path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if r.status != want || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		tb.Fatalf("GET %s = %d %s; want %d text/html", path, r.status, r.header.Get("Content-Type"), want)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		tb.Errorf("GET %s: Content-Security-Policy %q allows outside resources", path, csp)
	}
	for _, outside := range []string{"<script", "<link", "<img", "<iframe", " src=", "@import", "url("} {
		if strings.Contains(string(r.body), outside) {
			tb.Errorf("GET %s: page contains %q", path, outside)
		}
	}
	return r
}

// pageURL is a checkout page with an optional return URL.
func pageURL(id, ret string) string {
	if ret == "" {
		return "/checkout/" + id
	}
	return "/checkout/" + id + "?" + url.Values{"return": {ret}}.Encode()
}

// TestCheckoutPage: the page shows reference, amount in rupees and status;
// buttons only while a UPI payment is pending; the back link and the
// hidden return field only for an http(s) return URL; everything escaped.
func TestCheckoutPage(t *testing.T) {
	const shop = "https://shop.example/orders/17?paid=1&x=%22%3E"
	tests := []struct {
		name       string
		req        paysim.PaymentRequest
		settle     *bool // settle the UPI payment first
		ret        string
		wantAmount string
		wantStatus string
		wantBack   string // "" : no back link
	}{
		{"pending upi", upi("booking-17", 1500000), nil, "", "₹15,000.00", paysim.StatusPending, ""},
		{"https return", upi("booking-17", 1500000), nil, shop, "₹15,000.00", paysim.StatusPending, shop},
		{"http return", upi("booking-17", 250050), nil, "http://127.0.0.1:8080/back", "₹2,500.50", paysim.StatusPending, "http://127.0.0.1:8080/back"},
		{"javascript return ignored", upi("booking-17", 100), nil, "javascript:alert(document.cookie)", "₹1.00", paysim.StatusPending, ""},
		{"data return ignored", upi("booking-17", 100), nil, "data:text/html,hi", "₹1.00", paysim.StatusPending, ""},
		{"scheme-relative return ignored", upi("booking-17", 100), nil, "//evil.example/x", "₹1.00", paysim.StatusPending, ""},
		{"relative return ignored", upi("booking-17", 100), nil, "/orders/17", "₹1.00", paysim.StatusPending, ""},
		{"lakh grouping", upi("booking-17", 15000000), nil, "", "₹1,50,000.00", paysim.StatusPending, ""},
		{"reference escaped", upi(`<script>alert("x")</script> & co`, 100), nil, "", "₹1.00", paysim.StatusPending, ""},
		{"approved", upi("booking-17", 1500000), ptr(true), "", "₹15,000.00", paysim.StatusSucceeded, ""},
		{"approved, with return", upi("booking-17", 1500000), ptr(true), shop, "₹15,000.00", paysim.StatusSucceeded, shop},
		{"declined", upi("booking-17", 1500000), ptr(false), "", "₹15,000.00", paysim.StatusFailed, ""},
		{"card charged", card("booking-17", 5000, paysim.CaptureAuto), nil, "", "₹50.00", paysim.StatusSucceeded, ""},
		{"card authorized", card("booking-17", 5000, paysim.CaptureManual), nil, "", "₹50.00", paysim.StatusRequiresCapture, ""},
	}
	e := newEnv(t, quiet, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := e.pay(t, tc.req)
			if tc.settle != nil {
				if _, err := e.sim.Settle(p.ID, *tc.settle); err != nil {
					t.Fatal(err)
				}
			}
			path := pageURL(p.ID, tc.ret)
			page := e.open(t, path, http.StatusOK).body
			if got := one(t, page, "reference").text; got != tc.req.Reference {
				t.Errorf("GET %s: #reference %q; want %q", path, got, tc.req.Reference)
			}
			if got := one(t, page, "amount").text; got != tc.wantAmount {
				t.Errorf("GET %s: #amount %q; want %q", path, got, tc.wantAmount)
			}
			if got := one(t, page, "status").text; got != tc.wantStatus {
				t.Errorf("GET %s: #status %q; want %q", path, got, tc.wantStatus)
			}
			if strings.Contains(string(page), "<script>") || strings.Contains(string(page), "javascript:") {
				t.Errorf("GET %s: unescaped input in the page:\n%s", path, page)
			}

			pending := tc.wantStatus == paysim.StatusPending
			for _, b := range []struct{ id, label, action string }{
				{"approve", "Approve", "/checkout/" + p.ID + "/approve"},
				{"decline", "Decline", "/checkout/" + p.ID + "/decline"},
			} {
				els := find(page, "#"+b.id)
				if !pending {
					if len(els) != 0 {
						t.Errorf("GET %s: %s payment shows #%s", path, tc.wantStatus, b.id)
					}
					continue
				}
				if len(els) != 1 || els[0].text != b.label || els[0].attrs["type"] != "submit" {
					t.Fatalf("GET %s: #%s = %+v; want one %q submit button", path, b.id, els, b.label)
				}
				var form element
				for _, f := range find(page, "form") {
					if f.at < els[0].at {
						form = f
					}
				}
				if form.attrs["method"] != "post" || form.attrs["action"] != b.action {
					t.Errorf("GET %s: #%s posts %+v; want POST %s", path, b.id, form.attrs, b.action)
				}
			}

			back := find(page, "#back")
			switch {
			case tc.wantBack == "" && len(back) != 0:
				t.Errorf("GET %s: #back %+v; want none", path, back)
			case tc.wantBack != "" && (len(back) != 1 || back[0].attrs["href"] != tc.wantBack || back[0].text != "Back to the shop"):
				t.Errorf("GET %s: #back %+v; want a link to %s", path, back, tc.wantBack)
			}
			var hidden []string
			for _, in := range find(page, "input") {
				if in.attrs["type"] == "hidden" && in.attrs["name"] == "return" {
					hidden = append(hidden, in.attrs["value"])
				}
			}
			wantHidden := []string(nil)
			if pending && tc.wantBack != "" {
				wantHidden = []string{tc.wantBack, tc.wantBack}
			}
			if !slices.Equal(hidden, wantHidden) {
				t.Errorf("GET %s: hidden return fields %q; want %q", path, hidden, wantHidden)
			}
		})
	}
}

// TestCheckoutSettle: Approve and Decline settle the payment as Settle
// does (ledger, signed webhook) and redirect to the return URL, or to the
// page when there is none or it is not http(s).
func TestCheckoutSettle(t *testing.T) {
	const shop = "https://shop.example/orders/17?paid=1"
	tests := []struct {
		name       string
		button     string
		ret        string     // opened with ?return=
		forged     url.Values // POSTed directly instead of clicking
		wantReturn bool       // redirected to ret (or forged's return); otherwise to the page
		wantStatus string
		wantEvent  string
		wantLedger []string
	}{
		{"approve", "approve", "", nil, false, paysim.StatusSucceeded, paysim.EventPaymentSucceeded, []string{paysim.EntryCharge}},
		{"decline", "decline", "", nil, false, paysim.StatusFailed, paysim.EventPaymentFailed, nil},
		{"approve, https return", "approve", shop, nil, true, paysim.StatusSucceeded, paysim.EventPaymentSucceeded, []string{paysim.EntryCharge}},
		{"decline, http return", "decline", "http://127.0.0.1:8080/back", nil, true, paysim.StatusFailed, paysim.EventPaymentFailed, nil},
		{"approve, javascript return", "approve", "javascript:alert(1)", nil, false, paysim.StatusSucceeded, paysim.EventPaymentSucceeded, []string{paysim.EntryCharge}},
		{"forged javascript return", "approve", "", url.Values{"return": {"javascript:alert(1)"}}, false, paysim.StatusSucceeded, paysim.EventPaymentSucceeded, []string{paysim.EntryCharge}},
		{"forged scheme-relative return", "decline", "", url.Values{"return": {"//evil.example/x"}}, false, paysim.StatusFailed, paysim.EventPaymentFailed, nil},
		{"forged https return", "approve", "", url.Values{"return": {shop}}, true, paysim.StatusSucceeded, paysim.EventPaymentSucceeded, []string{paysim.EntryCharge}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, quiet, nil)
			p := e.pay(t, upi("booking-17", 1500000))
			var r response
			if tc.forged != nil {
				r = e.submit(t, "/checkout/"+p.ID+"/"+tc.button, tc.forged)
			} else {
				r = e.click(t, e.open(t, pageURL(p.ID, tc.ret), http.StatusOK).body, tc.button)
			}
			want := "/checkout/" + p.ID
			if tc.wantReturn {
				want = tc.ret + tc.forged.Get("return")
			}
			if got := r.header.Get("Location"); r.status != http.StatusSeeOther || got != want {
				t.Fatalf("%s = %d Location %q; want 303 %q", tc.button, r.status, got, want)
			}

			if got := e.call(t, "GET", "/v1/payments/"+p.ID, nil).payment(t); got.Status != tc.wantStatus {
				t.Errorf("after %s the payment is %s; want %s", tc.button, got.Status, tc.wantStatus)
			}
			if got := entryTypes(e.sim.Ledger(), "booking-17"); !slices.Equal(got, tc.wantLedger) {
				t.Errorf("ledger = %v; want %v", got, tc.wantLedger)
			}
			ev := e.recv.wait(t, 1)[0]
			if ev.verifyErr != nil || ev.event.Type != tc.wantEvent || object[paysim.Payment](t, ev.event).ID != p.ID {
				t.Errorf("webhook %s for %s (verify: %v); want %s for %s", ev.event.Type, object[paysim.Payment](t, ev.event).ID, ev.verifyErr, tc.wantEvent, p.ID)
			}

			if !tc.wantReturn { // the page the fan lands on shows the outcome
				page := e.open(t, want, http.StatusOK).body
				if got := one(t, page, "status").text; got != tc.wantStatus {
					t.Errorf("GET %s: #status %q; want %q", want, got, tc.wantStatus)
				}
				if n := len(find(page, "#approve")) + len(find(page, "#decline")) + len(find(page, "#back")); n != 0 {
					t.Errorf("GET %s: %d buttons or links; want none", want, n)
				}
			}
		})
	}
}

// TestCheckoutTwice: a payment is settled once, whatever is clicked after:
// a second click, the other button, many clicks at once, or a click on a
// payment that is not pending UPI. They settle nothing and send the fan
// back to the page, return URL kept for the back link.
func TestCheckoutTwice(t *testing.T) {
	const shop = "https://shop.example/orders/17"
	e := newEnv(t, quiet, nil)

	p := e.pay(t, upi("booking-17", 1500000))
	page := e.open(t, pageURL(p.ID, shop), http.StatusOK).body
	if r := e.click(t, page, "approve"); r.status != http.StatusSeeOther || r.header.Get("Location") != shop {
		t.Fatalf("first approve = %d %q; want 303 %s", r.status, r.header.Get("Location"), shop)
	}
	again := pageURL(p.ID, shop)
	for _, button := range []string{"approve", "decline", "approve"} { // the stale page, clicked again
		r := e.click(t, page, button)
		if got := r.header.Get("Location"); r.status != http.StatusSeeOther || got != again {
			t.Errorf("%s after approve = %d %q; want 303 %s", button, r.status, got, again)
		}
	}
	landed := e.open(t, again, http.StatusOK).body
	if got := one(t, landed, "status").text; got != paysim.StatusSucceeded || len(find(landed, "#approve")) != 0 || one(t, landed, "back").attrs["href"] != shop {
		t.Errorf("GET %s: status %q, buttons %d, back %+v; want succeeded, none, %s", again, got, len(find(landed, "#approve")), find(landed, "#back"), shop)
	}

	// Many clicks at once: exactly one charge.
	p2 := e.pay(t, upi("booking-18", 1500000))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			r, err := e.try(noRedirect, "POST", "/checkout/"+p2.ID+"/approve", "")
			if err != nil || r.status != http.StatusSeeOther {
				t.Errorf("concurrent approve = %d, %v; want 303", r.status, err)
			}
		})
	}
	wg.Wait()

	// A card payment is not the payer's to settle here.
	c := e.pay(t, card("booking-19", 5000, paysim.CaptureManual))
	if r := e.submit(t, "/checkout/"+c.ID+"/approve", url.Values{"return": {shop}}); r.status != http.StatusSeeOther || r.header.Get("Location") != pageURL(c.ID, shop) {
		t.Errorf("approve of a card = %d %q; want 303 to its page", r.status, r.header.Get("Location"))
	}

	for ref, want := range map[string][]string{
		"booking-17": {paysim.EntryCharge},
		"booking-18": {paysim.EntryCharge},
		"booking-19": {paysim.EntryAuthorization},
	} {
		if got := entryTypes(e.sim.Ledger(), ref); !slices.Equal(got, want) {
			t.Errorf("ledger of %s = %v; want %v", ref, got, want)
		}
	}
	e.recv.wait(t, 2)
	e.sim.FlushWebhooks()
	if d := e.sim.Deliveries(); len(d) != 2 || len(e.recv.all()) != 2 {
		t.Errorf("%d deliveries, %d received; want one payment.succeeded each for two payments", len(d), len(e.recv.all()))
	}
}

// TestCheckoutNotFound: an unknown payment is a 404 HTML page, with the
// id from the path escaped.
func TestCheckoutNotFound(t *testing.T) {
	e := newEnv(t, quiet, nil)
	tests := []struct{ method, path string }{
		{"GET", "/checkout/pay_nope"},
		{"GET", "/checkout/pay_nope?return=https://shop.example/"},
		{"POST", "/checkout/pay_nope/approve"},
		{"POST", "/checkout/pay_nope/decline"},
		{"GET", "/checkout/%3Cscript%3Ealert(1)%3C%2Fscript%3E"},
	}
	for _, tc := range tests {
		r, err := e.try(noRedirect, tc.method, tc.path, "return=https%3A%2F%2Fshop.example%2F", "Content-Type", "application/x-www-form-urlencoded")
		if err != nil {
			t.Fatal(err)
		}
		if r.status != http.StatusNotFound || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s %s = %d %s; want 404 text/html", tc.method, tc.path, r.status, r.header.Get("Content-Type"))
		}
		if body := string(r.body); strings.Contains(body, "<script>") || !strings.Contains(body, "Payment not found") || strings.Contains(body, `id="status"`) {
			t.Errorf("%s %s: page\n%s\nwants an escaped not-found page", tc.method, tc.path, body)
		}
	}
	if n := len(e.sim.Ledger().Entries) + len(e.sim.Deliveries()); n != 0 {
		t.Errorf("unknown payments moved money or sent webhooks: %d", n)
	}
}

// TestCheckoutAlwaysServed: the page is the payer's, not the API: served
// without Control and during an outage, when the API answers 503.
func TestCheckoutAlwaysServed(t *testing.T) {
	sim, err := paysim.New(paysim.Config{APIKey: testKey, Behaviour: quiet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		sim.Close()
		srv.Close()
	})
	e := &env{sim: sim, url: srv.URL}
	p := e.pay(t, upi("booking-17", 1500000))
	out := quiet
	out.Outages = []paysim.Window{{Start: time.Now().Add(-time.Minute), End: time.Now().Add(time.Hour)}}
	if err := sim.SetBehaviour(out); err != nil {
		t.Fatal(err)
	}
	if r := e.call(t, "GET", "/v1/payments/"+p.ID, nil); r.status != http.StatusServiceUnavailable {
		t.Fatalf("API during the outage = %d; want 503", r.status)
	}
	page := e.open(t, pageURL(p.ID, ""), http.StatusOK).body
	if r := e.click(t, page, "approve"); r.status != http.StatusSeeOther {
		t.Fatalf("approve = %d %s; want 303", r.status, r.body)
	}
	if got := entryTypes(sim.Ledger(), "booking-17"); !slices.Equal(got, []string{paysim.EntryCharge}) {
		t.Errorf("ledger = %v; want one charge", got)
	}
}

func ptr[T any](v T) *T { return &v }
