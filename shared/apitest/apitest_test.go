package apitest_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/onsale/onsale/shared/apitest"
)

const doc = `openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /things:
    post:
      operationId: addThing
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties:
                name: {type: string}
              additionalProperties: false
      responses:
        "201":
          description: added
          content:
            application/json:
              schema:
                type: object
                required: [id]
                properties:
                  id: {type: integer}
        "400":
          description: refused
          content:
            application/problem+json:
              schema: {$ref: "#/components/schemas/Problem"}
components:
  schemas:
    Problem:
      type: object
      required: [type, error]
      properties:
        type: {type: string}
        error: {type: string, enum: [invalid_request, not_found, rate_limited]}
`

func exchange(method, path, body string, status int, ct, answer string, hdr ...string) apitest.Exchange {
	u, _ := url.Parse("http://svc" + path)
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	return apitest.Exchange{Method: method, URL: u, Header: h, Body: []byte(body), Status: status,
		RespHeader: http.Header{"Content-Type": {ct}}.Clone(), RespBody: []byte(answer)}
}

// Each rule of the package, with the exchange it must pass and the drift
// it must catch: a checker that passed everything would fail here.
func TestRules(t *testing.T) {
	d, err := apitest.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	const problem = "application/problem+json"
	retry := func(x apitest.Exchange) apitest.Exchange { x.RespHeader.Set("Retry-After", "1"); return x }
	for _, tc := range []struct {
		name  string
		x     apitest.Exchange
		drift string // "" for none
	}{
		{"documented answer", exchange("POST", "/things", `{"name":"a"}`, 201, "application/json", `{"id":1}`, "Content-Type", "application/json"), ""},
		{"a body of another type", exchange("POST", "/things", `name=a`, 201, "application/json", `{"id":1}`, "Content-Type", "application/x-www-form-urlencoded"), "refuses the request"},
		{"body with no Content-Type read as the operation's one type", exchange("POST", "/things", `{"name":"a"}`, 201, "application/json", `{"id":2}`), ""},
		{"answer against its schema", exchange("POST", "/things", `{"name":"a"}`, 201, "application/json", `{"id":"one"}`), "departs"},
		{"undocumented status", exchange("POST", "/things", `{"name":"a"}`, 200, "application/json", `{"id":1}`), "status is not supported"},
		{"undocumented content type", exchange("POST", "/things", `{"name":"a"}`, 201, "text/plain", `1`), "departs"},
		{"a refused request refused", exchange("POST", "/things", `{"nom":"a"}`, 400, problem, `{"type":"x","error":"invalid_request"}`), ""},
		{"a refused request accepted", exchange("POST", "/things", `{"nom":"a"}`, 201, "application/json", `{"id":3}`), "refuses the request"},
		{"an error code the document does not know", exchange("POST", "/things", `{}`, 400, problem, `{"type":"x","error":"oops"}`), "departs"},
		{"unrouted, 404 problem", exchange("GET", "/nothing", "", 404, problem, `{"type":"x","error":"not_found"}`), ""},
		{"unrouted, 404 in plain text", exchange("GET", "/nothing", "", 404, "text/plain", `404 page not found`), "want application/problem+json"},
		{"unrouted, answered 200", exchange("GET", "/nothing", "", 200, "application/json", `{}`), "not in the document"},
		{"unrouted method, 405 problem", exchange("GET", "/things", "", 405, problem, `{"type":"x","error":"not_found"}`), ""},
		{"unrouted, 429 with Retry-After", retry(exchange("GET", "/nothing", "", 429, problem, `{"type":"x","error":"rate_limited"}`)), ""},
		{"unrouted, 429 without Retry-After", exchange("GET", "/nothing", "", 429, problem, `{"type":"x","error":"rate_limited"}`), "without Retry-After"},
	} {
		err := d.Check(tc.x)
		switch {
		case tc.drift == "" && err != nil:
			t.Errorf("%s: %v; want no drift", tc.name, err)
		case tc.drift != "" && (err == nil || !strings.Contains(err.Error(), tc.drift)):
			t.Errorf("%s: %v; want drift %q", tc.name, err, tc.drift)
		}
	}
	if left := d.Unanswered(); len(left) != 0 {
		t.Errorf("unanswered after a documented 201: %v", left)
	}
	fresh, _ := apitest.Parse([]byte(doc))
	fresh.Check(exchange("POST", "/things", `{"nom":"a"}`, 400, problem, `{"type":"x","error":"invalid_request"}`))
	if left := fresh.Unanswered(); !slices.Equal(left, []string{"POST /things"}) {
		t.Errorf("unanswered after refusals only = %v; want POST /things (a refusal shows nothing working)", left)
	}
	outside, _ := apitest.Parse([]byte(doc))
	outside.Outside(func(_, path string) bool { return path == "/page" })
	if err := outside.Check(exchange("GET", "/page", "", 200, "text/html", "<p>")); err != nil {
		t.Errorf("a route declared outside: %v", err)
	}
}

// A document that is not OpenAPI 3.1, or not valid, is refused.
func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{strings.Replace(doc, "3.1.0", "3.0.3", 1), strings.Replace(doc, "operationId: addThing", "operationId: [x]", 1), "not: [yaml"} {
		if _, err := apitest.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse accepted %.60q", bad)
		}
	}
}
