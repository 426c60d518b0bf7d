package http_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corehttp "github.com/onsale/onsale/core/http"
)

const dialsToken = "dials-token-of-at-least-32-bytes-long"

func withDials(f *fixture, s *corehttp.Server) {
	s.Dials = &corehttp.Dials{Store: f.db, Token: dialsToken}
}

// The gateways' durable dials on a real database: refused without the
// token and on bad bodies (nothing stored), merged per dial, so two
// changes of different dials at once both stay.
func TestEventDials(t *testing.T) {
	f := newFixture(t, "", withDials)
	path := fmt.Sprintf("/internal/v1/events/%d/dials", f.event)
	if r := f.do(t, "GET", path, "", nil); r.status != 401 || r.body["error"] != "unauthorized" {
		t.Errorf("GET without a token = %d %v; want 401 unauthorized", r.status, r.body)
	}
	if r := f.do(t, "PATCH", path, strings.Repeat("x", len(dialsToken)), `{"paused":true}`); r.status != 401 {
		t.Errorf("PATCH with a wrong token = %d %v; want 401", r.status, r.body)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{`, `{}`, `null`, `{"a":` + strings.Repeat(" ", 17<<10) + `1}`} {
		if r := f.do(t, "PATCH", path, dialsToken, bad); r.status != 400 && r.status != 413 {
			t.Errorf("PATCH %.20q = %d %v; want 400 or 413", bad, r.status, r.body)
		}
	}
	if r := f.do(t, "GET", path, dialsToken, nil); r.status != 200 || fmt.Sprint(r.body["dials"]) != "map[]" {
		t.Fatalf("GET before any change = %d %v; want 200 and no dials (the refusals stored nothing)", r.status, r.body)
	}
	if r := f.do(t, "GET", "/internal/v1/events/999999/dials", dialsToken, nil); r.status != 404 {
		t.Errorf("GET of no event = %d %v; want 404", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/internal/v1/events/999999/dials", dialsToken, `{"paused":true}`); r.status != 404 {
		t.Errorf("PATCH of no event = %d %v; want 404", r.status, r.body)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			f.do(t, "PATCH", path, dialsToken, fmt.Sprintf(`{"d%d":%d}`, i, i))
		})
	}
	wg.Wait()
	f.do(t, "PATCH", path, dialsToken, `{"paused":true}`)
	r := f.do(t, "PATCH", path, dialsToken, `{"paused":false,"new_users_per_minute":50}`)
	d, _ := r.body["dials"].(map[string]any)
	if r.status != 200 || len(d) != 22 || d["paused"] != false || d["new_users_per_minute"] != float64(50) || d["d7"] != float64(7) {
		t.Errorf("after 22 changes = %d %v; want every dial, the last value of each", r.status, r.body)
	}
	if g := f.do(t, "GET", path, dialsToken, nil); fmt.Sprint(g.body["dials"]) != fmt.Sprint(d) {
		t.Errorf("GET = %v; want %v", g.body["dials"], d)
	}
}

// Without a token the core serves no dials routes.
func TestEventDialsOff(t *testing.T) {
	f := newFixture(t, "", func(f *fixture, s *corehttp.Server) { s.Dials = &corehttp.Dials{Store: f.db} })
	if r := f.do(t, "GET", fmt.Sprintf("/internal/v1/events/%d/dials", f.event), "", nil); r.status != 404 {
		t.Errorf("GET with no token configured = %d %v; want 404", r.status, r.body)
	}
}
