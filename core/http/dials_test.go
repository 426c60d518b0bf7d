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
	withOperators(f, s)
	s.Dials = &corehttp.Dials{Store: f.db, Token: dialsToken}
}

// The gateways' durable dials on a real database: read with the service
// token or an operator's; changed only by an operator allowed to, each
// change audited under their name; refused on bad bodies (nothing
// stored); merged per dial, so two changes of different dials at once
// both stay.
func TestEventDials(t *testing.T) {
	f := newFixture(t, "", withDials)
	path := fmt.Sprintf("/internal/v1/events/%d/dials", f.event)
	root := f.operatorToken(t, "root", rootPassword)
	desk := f.addOperator(t, root, "desk", "sale_desk")
	if r := f.do(t, "PATCH", path, dialsToken, `{"paused":true}`); r.status != 401 {
		t.Errorf("PATCH with the service token = %d %v; want 401: a change is an operator's", r.status, r.body)
	}
	if r := f.do(t, "GET", path, "", nil); r.status != 401 || r.body["error"] != "unauthorized" {
		t.Errorf("GET without a token = %d %v; want 401 unauthorized", r.status, r.body)
	}
	if r := f.do(t, "PATCH", path, strings.Repeat("x", len(dialsToken)), `{"paused":true}`); r.status != 401 {
		t.Errorf("PATCH with a wrong token = %d %v; want 401", r.status, r.body)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{`, `{}`, `null`, `{"a":` + strings.Repeat(" ", 17<<10) + `1}`} {
		if r := f.do(t, "PATCH", path, desk, bad); r.status != 400 && r.status != 413 {
			t.Errorf("PATCH %.20q = %d %v; want 400 or 413", bad, r.status, r.body)
		}
	}
	if r := f.do(t, "GET", path, dialsToken, nil); r.status != 200 || fmt.Sprint(r.body["dials"]) != "map[]" {
		t.Fatalf("GET before any change = %d %v; want 200 and no dials (the refusals stored nothing)", r.status, r.body)
	}
	if r := f.do(t, "GET", "/internal/v1/events/999999/dials", dialsToken, nil); r.status != 404 {
		t.Errorf("GET of no event = %d %v; want 404", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/internal/v1/events/999999/dials", desk, `{"paused":true}`); r.status != 404 {
		t.Errorf("PATCH of no event = %d %v; want 404", r.status, r.body)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			f.do(t, "PATCH", path, desk, fmt.Sprintf(`{"d%d":%d}`, i, i))
		})
	}
	wg.Wait()
	f.do(t, "PATCH", path, desk, `{"paused":true}`)
	r := f.do(t, "PATCH", path, root, `{"paused":false,"new_users_per_minute":50}`)
	d, _ := r.body["dials"].(map[string]any)
	if r.status != 200 || len(d) != 22 || d["paused"] != false || d["new_users_per_minute"] != float64(50) || d["d7"] != float64(7) {
		t.Errorf("after 22 changes = %d %v; want every dial, the last value of each", r.status, r.body)
	}
	if g := f.do(t, "GET", path, desk, nil); fmt.Sprint(g.body["dials"]) != fmt.Sprint(d) {
		t.Errorf("GET = %v; want %v", g.body["dials"], d)
	}
	a := f.do(t, "GET", fmt.Sprintf("/operator/v1/events/%d/audit?limit=200", f.event), desk, nil)
	entries, _ := a.body["entries"].([]any)
	if len(entries) != 22 {
		t.Fatalf("audit = %d entries; want the 22 changes", len(entries))
	}
	last := entries[0].(map[string]any)
	if last["actor"] != "root" || last["action"] != "dials.update" || last["before"].(map[string]any)["paused"] != true ||
		last["after"].(map[string]any)["paused"] != false {
		t.Errorf("the last change's audit = %v; want root unpausing", last)
	}
	// A disabled operator's token changes nothing.
	f.do(t, "PATCH", "/operator/v1/operators/desk", root, map[string]any{"disabled": true})
	if r := f.do(t, "PATCH", path, desk, `{"paused":true}`); r.status != 403 {
		t.Errorf("PATCH by a disabled operator = %d %v; want 403", r.status, r.body)
	}
}

// Without a token the core serves no dials routes.
func TestEventDialsOff(t *testing.T) {
	f := newFixture(t, "", func(f *fixture, s *corehttp.Server) { s.Dials = &corehttp.Dials{Store: f.db} })
	if r := f.do(t, "GET", fmt.Sprintf("/internal/v1/events/%d/dials", f.event), "", nil); r.status != 404 {
		t.Errorf("GET with no token configured = %d %v; want 404", r.status, r.body)
	}
}
