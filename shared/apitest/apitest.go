// Package apitest holds a service's HTTP tests to its OpenAPI document: each
// exchange a test makes is checked against the document with kin-openapi, so
// a handler that drifts from the document fails the test that exercises it.
//
// The rules, per exchange:
//   - a documented operation's answer must match one of its documented
//     responses (status, content type, body schema, headers); an answer
//     with a status the document does not list is drift;
//   - a request the document refuses (a missing credential or parameter, a
//     body against the schema) must be refused: any 2xx or 3xx answer to
//     it is drift;
//   - a request to an undocumented route must be answered 404 or 405 (or
//     429 with Retry-After: a limit may refuse it first) with a problem the
//     document's Problem schema describes, unless the test declared the
//     route outside the document (Doc.Outside).
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// Doc is a loaded, validated OpenAPI document and the operations the
// exchanges checked so far have answered.
type Doc struct {
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema
	outside func(method, path string) bool

	mu       sync.Mutex
	answered map[string]bool // "METHOD /path/template": a 2xx exchange the document accepts
}

// Load reads and validates the OpenAPI document at file. Its servers are
// dropped, so that routes match whatever host a test server listens on.
func Load(file string) (*Doc, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse is Load of a document in memory.
func Parse(data []byte) (*Doc, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("openapi: the document is not valid: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return nil, fmt.Errorf("openapi: the document is OpenAPI %s; want 3.1", doc.OpenAPI)
	}
	doc.Servers = nil
	for _, item := range doc.Paths.Map() {
		item.Servers = nil
		for _, op := range item.Operations() {
			op.Servers = nil
		}
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	d := &Doc{doc: doc, router: router, answered: map[string]bool{}, outside: func(string, string) bool { return false }}
	if p := doc.Components.Schemas["Problem"]; p != nil {
		d.problem = p.Value
	}
	return d, nil
}

// Outside declares the routes the document leaves out on purpose (pages,
// paths another service's document describes): exchanges on them are not
// checked.
func (d *Doc) Outside(f func(method, path string) bool) *Doc {
	d.outside = f
	return d
}

// Exchange is one request and its answer.
type Exchange struct {
	Method     string
	URL        *url.URL
	Header     http.Header
	Body       []byte
	Status     int
	RespHeader http.Header
	RespBody   []byte
}

// Check says how the exchange departs from the document, or nil.
func (d *Doc) Check(x Exchange) error {
	ctx := context.Background()
	req, err := http.NewRequestWithContext(ctx, x.Method, x.URL.String(), bytes.NewReader(x.Body))
	if err != nil {
		return err
	}
	req.Header = x.Header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	what := fmt.Sprintf("%s %s answered %d", x.Method, x.URL.RequestURI(), x.Status)
	route, params, err := d.router.FindRoute(req)
	if err != nil {
		if d.outside(x.Method, x.URL.Path) {
			return nil
		}
		switch x.Status {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
		case http.StatusTooManyRequests: // a limit counts every request, routed or not
			if x.RespHeader.Get("Retry-After") == "" {
				return fmt.Errorf("%s without Retry-After", what)
			}
		default:
			return fmt.Errorf("%s: the route is not in the document (%v)", what, err)
		}
		return d.checkProblem(what, x)
	}
	// The services read a body as the operation's one media type whatever
	// its label: a body sent without Content-Type is checked as that.
	if rb := route.Operation.RequestBody; len(x.Body) > 0 && req.Header.Get("Content-Type") == "" && rb != nil && rb.Value != nil && len(rb.Value.Content) == 1 {
		for mt := range rb.Value.Content {
			req.Header.Set("Content-Type", mt)
		}
	}

	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			RejectWhenRequestBodyNotSpecified: true,
			IncludeResponseStatus:             true,
			MultiError:                        true,
			AuthenticationFunc:                credentialPresent,
		},
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil && x.Status < 400 {
		return fmt.Errorf("%s, but the document refuses the request: %v", what, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: x.Status, Header: x.RespHeader, Options: in.Options}
	out.SetBodyBytes(x.RespBody)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s: the answer departs from the document: %v", what, err)
	}
	if x.Status >= 200 && x.Status < 300 {
		d.mu.Lock()
		d.answered[x.Method+" "+route.Path] = true
		d.mu.Unlock()
	}
	return nil
}

// checkProblem checks an unrouted answer is a problem the document's
// Problem schema describes.
func (d *Doc) checkProblem(what string, x Exchange) error {
	if ct := x.RespHeader.Get("Content-Type"); ct != "application/problem+json" {
		return fmt.Errorf("%s with Content-Type %q; want application/problem+json", what, ct)
	}
	if d.problem == nil {
		return fmt.Errorf("%s: the document has no Problem schema", what)
	}
	var v any
	if err := jsonDecode(x.RespBody, &v); err != nil {
		return fmt.Errorf("%s: %v", what, err)
	}
	if err := d.problem.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("%s: the problem departs from the document: %v", what, err)
	}
	return nil
}

// credentialPresent passes a security requirement when the request carries
// the credential it names (an Authorization bearer, a header or a cookie):
// whether the credential is good is the service's to say, and the tests'.
func credentialPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s, r := in.SecurityScheme, in.RequestValidationInput.Request
	switch {
	case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
		if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			return nil
		}
	case s.Type == "apiKey" && s.In == "header":
		if r.Header.Get(s.Name) != "" {
			return nil
		}
	case s.Type == "apiKey" && s.In == "cookie":
		if _, err := r.Cookie(s.Name); err == nil {
			return nil
		}
	default:
		return fmt.Errorf("security scheme %q: type %q is not checked here", in.SecuritySchemeName, s.Type)
	}
	return in.NewError(errors.New("no " + in.SecuritySchemeName + " credential"))
}

// Unanswered lists the documented operations no checked exchange showed
// working (a 2xx answer the document accepts), as "METHOD /path": an
// operation exercised only by refusals has its success undescribed.
func (d *Doc) Unanswered() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			if !d.answered[method+" "+path] {
				out = append(out, method+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Covered runs a test binary's tests (TestMain's m), then fails a whole
// run that passed but left an operation of the document unanswered
// (Unanswered): what no test shows working, no test keeps true. Only a
// whole run with its services is judged (ONSALE_REQUIRE_SERVICES=1, as
// make test runs; no -run, -skip, -list or -short): a quick run skips the
// tests that need a database, and a partial one reaches only part.
func Covered(m interface{ Run() int }, doc func() *Doc) int {
	code := m.Run()
	if code != 0 || testing.Short() || os.Getenv("ONSALE_REQUIRE_SERVICES") != "1" {
		return code
	}
	for _, name := range []string{"test.run", "test.skip", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return code
		}
	}
	if left := doc().Unanswered(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "openapi: no test shows these operations working (a 2xx answer the document accepts): %s\n", strings.Join(left, ", "))
		return 1
	}
	return code
}

// Transport returns a RoundTripper that checks each exchange through next
// (nil: http.DefaultTransport) and fails t on drift.
func (d *Doc) Transport(t testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &transport{t: t, d: d, next: next}
}

type transport struct {
	t    testing.TB
	d    *Doc
	next http.RoundTripper
}

func (c *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	if err := c.d.Check(Exchange{Method: req.Method, URL: req.URL, Header: req.Header, Body: body,
		Status: resp.StatusCode, RespHeader: resp.Header, RespBody: rb}); err != nil {
		c.t.Errorf("openapi: %s", short(err))
	}
	return resp, nil
}

func jsonDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// Handler returns h with each exchange it serves checked, failing t on
// drift: the server side of Transport, for tests whose clients are many.
func (d *Doc) Handler(t testing.TB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("openapi: read the request: %v", err)
				return
			}
			body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		x := Exchange{Method: r.Method, URL: &u, Header: r.Header.Clone(), Body: body}
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		x.Status, x.RespHeader, x.RespBody = rec.status, w.Header(), rec.body.Bytes()
		if err := d.Check(x); err != nil {
			t.Errorf("openapi: %s", short(err))
		}
	})
}

type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// short is err's message cut to a readable length: kin-openapi's messages
// quote the whole schema and value.
func short(err error) string {
	const max = 1500
	if m := err.Error(); len(m) > max {
		return m[:max] + " [...]"
	}
	return err.Error()
}
