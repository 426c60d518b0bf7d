package http_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
)

// /metrics is the operators': the fans' handler answers it 404 in JSON
// like any unknown route, AdminHandler serves it (the operators' own
// listener, ONSALE_CORE_ADMIN_ADDR).
func TestMetricsOnlyOnTheOperatorsHandler(t *testing.T) {
	s := &corehttp.Server{Log: slog.New(slog.DiscardHandler), Metrics: metrics.New()}
	get := func(h http.Handler, path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	if code, body := get(api().Handler(t, s.Handler()), "/metrics"); code != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("fans' GET /metrics = %d %s; want 404 not_found", code, body)
	}
	if code, body := get(api().Handler(t, s.AdminHandler()), "/metrics"); code != 200 || !strings.Contains(body, "onsale_core_") {
		t.Errorf("operators' GET /metrics = %d %.200s; want 200 with onsale_core_ metrics", code, body)
	}
	// The operators' listener serves none of the API (nor the document's
	// problems: its mux answers in plain text).
	if code, _ := get(s.AdminHandler(), "/v1/events"); code != 404 {
		t.Errorf("operators' GET /v1/events = %d; want 404 (the API is the fans' listener's)", code)
	}
}
