package http_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/onsale/onsale/core"
	corehttp "github.com/onsale/onsale/core/http"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/shared/admission"
)

// keyRefusingProvider answers 401 (a mistyped or revoked API key) while
// refusing is set, and takes payments as pending otherwise.
type keyRefusingProvider struct {
	fakeProvider
	refusing atomic.Bool
}

func (p *keyRefusingProvider) CreatePayment(ctx context.Context, key string, r core.PaymentRequest) (*core.Payment, error) {
	if p.refusing.Load() {
		return nil, &core.ProviderError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "bad api key"}
	}
	return p.fakeProvider.CreatePayment(ctx, key, r)
}

// Issue 13, item 14, at the start of a payment: a provider refusing the
// core's key is the core's configuration, not the fan's payment. The fan
// is answered 502 provider_unavailable (retry with the same key), the
// alerting metric rises, and once the key is fixed the same request goes
// through; it is never answered as a conflict with another payment.
func TestPayWithRefusedKey(t *testing.T) {
	prov := &keyRefusingProvider{}
	prov.refusing.Store(true)
	var met *metrics.Metrics
	f := newFixture(t, "", func(f *fixture, s *corehttp.Server) {
		priv, err := admission.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		met = s.Metrics
		s.Payments = &corehttp.Payments{Bookings: f.db, Keys: f.db, Provider: prov, Outbox: &kicks{},
			Tickets: ticket.NewSigner(priv)}
	})
	h := f.hold(t, "fan", "AUD-E-7")
	id := h.body["hold_id"].(string)
	tok := f.token(t, "fan", f.event)

	r := f.do(t, "POST", "/v1/holds/"+id+"/payment", tok, `{}`, "Idempotency-Key", "k1")
	if r.status != http.StatusBadGateway || r.body["error"] != core.EProvider {
		t.Fatalf("pay while the provider refuses the key = %d %v; want 502 %s", r.status, r.body, core.EProvider)
	}
	if n := counter(t, met, "onsale_core_provider_misconfigured_total", map[string]string{"kind": "create_payment", "status": "401"}); n != 1 {
		t.Fatalf("onsale_core_provider_misconfigured_total{create_payment,401} = %v; want 1", n)
	}
	prov.refusing.Store(false) // the operator fixes the key
	if r := f.do(t, "POST", "/v1/holds/"+id+"/payment", tok, `{}`, "Idempotency-Key", "k1"); r.status != http.StatusCreated {
		t.Fatalf("the same pay after the fix = %d %v; want 201", r.status, r.body)
	}
}

// counter reads a counter of the registry by its labels (0: not there).
func counter(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, c := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range c.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			return c.GetCounter().GetValue()
		}
	}
	return 0
}
