package http_test

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
)

// fakeHolds answers every hold at once: what the benchmark measures is the
// HTTP side of a hold (routing, token, JSON, grant, metrics), not the store.
type fakeHolds struct{ core.Holds }

func (fakeHolds) CreateHold(ctx context.Context, p core.HoldParams) (*core.Hold, error) {
	now := time.Now()
	return &core.Hold{ID: "0b6c3c1e-8f9a-4b7e-9c1d-2e3f4a5b6c7d", EventID: p.EventID, Account: p.Account, Seats: p.Request.Seats,
		Quantity: len(p.Request.Seats), Status: core.HoldActive, Version: 1, ExpiresAt: now.Add(8 * time.Minute), CreatedAt: now,
		AmountPaise: 600000, EventStartsAt: now.Add(24 * time.Hour)}, nil
}

// BenchmarkCreateHoldHTTP is the core's Go work of one hold answered by a
// store that costs nothing: the request through the handler as cmd/core
// wires it (admit token cached after the first request, hold grant signed).
func BenchmarkCreateHoldHTTP(b *testing.B) {
	priv, _ := admission.GenerateKey()
	signer := admission.NewSigner(priv)
	_, coreKey, _ := ed25519.GenerateKey(nil)
	s := &corehttp.Server{Holds: fakeHolds{}, Verifier: admission.NewVerifierFromPublicKeys(signer.PublicKey()),
		Log: slog.New(slog.DiscardHandler), Metrics: metrics.New(), Tokens: token.New(coreKey)}
	h := s.Handler()
	tok, _ := signer.Admit("bench", 42, 0, time.Hour)
	body := `{"seats":["A-A-1","A-A-2","A-A-3","A-A-4"]}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/events/42/holds", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("hold answered %d: %s", w.Code, w.Body)
		}
		io.Discard.Write(w.Body.Bytes())
	}
}
