package http_test

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/shared/apitest"
)

// api is the core's OpenAPI document, loaded and validated once: every
// server these tests start checks each exchange against it (served).
var api = sync.OnceValue(func() *apitest.Doc {
	d, err := apitest.Parse(corehttp.Document)
	if err != nil {
		panic(err)
	}
	return d
})

// served is httptest.NewServer of h, each exchange checked against the
// document: a handler that drifts from it fails the test that reaches it.
func served(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(api().Handler(t, h))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenAPIDocument: the document is valid OpenAPI 3.1 and is what the
// core serves.
func TestOpenAPIDocument(t *testing.T) {
	if _, err := apitest.Parse(corehttp.Document); err != nil {
		t.Fatal(err)
	}
	srv := served(t, (&corehttp.Server{Log: slog.New(slog.DiscardHandler), Metrics: metrics.New()}).Handler())
	resp, err := http.Get(srv.URL + "/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/yaml" || !bytes.Equal(b, corehttp.Document) {
		t.Fatalf("GET /openapi.yaml = %d %q, %d bytes; want 200 application/yaml, the document's %d bytes",
			resp.StatusCode, resp.Header.Get("Content-Type"), len(b), len(corehttp.Document))
	}
}

// everyOperationReached fails a whole, passing run of the package whose
// tests left a documented operation unreached: a document nothing
// exercises is a document nothing keeps true.
func everyOperationReached(m *testing.M) int {
	code := m.Run()
	if code != 0 || testing.Short() || flag.Lookup("test.run").Value.String() != "" || flag.Lookup("test.skip").Value.String() != "" {
		return code
	}
	if left := api().Unreached(); len(left) > 0 {
		println("openapi: documented operations no test reached:")
		for _, op := range left {
			println("  " + op)
		}
		return 1
	}
	return code
}

// reachedM runs the tests, then everyOperationReached's check.
type reachedM struct{ m *testing.M }

func (r reachedM) Run() int { return everyOperationReached(r.m) }
