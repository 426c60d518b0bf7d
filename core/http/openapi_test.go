package http_test

import (
	"bytes"
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

// covered runs the tests, then apitest.Covered's check of the document.
type covered struct{ m *testing.M }

func (c covered) Run() int { return apitest.Covered(c.m, api) }
