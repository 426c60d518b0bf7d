package attack

import (
	"fmt"
	"testing"
)

// --- the operators' surface (issue 13 item 9)

// adminOnFansListener: the operators' API, console and metrics asked for
// on the fans' address, with the right admin token: 404 as if they did not
// exist (they are served on the operators' listener only), and a PATCH
// there changes nothing.
func adminOnFansListener(t *testing.T, s *attackStack) string {
	c := client(50)
	auth := []string{"Authorization", "Bearer " + s.apps.OperatorToken}
	before := s.snap(t, s.event)
	admin := fmt.Sprintf("%s/admin/v1/events/%d", s.gateway, s.event)
	var seen []string
	for _, r := range []reply{
		do(t, c, "GET", admin, nil, auth...),
		do(t, c, "PATCH", admin, map[string]any{"paused": true}, auth...),
		do(t, c, "GET", s.gateway+"/admin/", nil),
		do(t, c, "GET", s.gateway+"/metrics", nil),
		do(t, c, "GET", s.apps.CoreURL+"/metrics", nil),
	} {
		if r.status != 404 {
			t.Errorf("operators' route on the fans' address = %s %s; want 404", r.seen(), r.raw)
		}
		seen = append(seen, r.seen())
	}
	s.unchanged(t, before, s.event)
	// The control: the same token on the operators' listener is served.
	if r := do(t, c, "GET", fmt.Sprintf("%s/admin/v1/events/%d", s.apps.GatewayAdminURL, s.event), nil, auth...); r.status != 200 {
		t.Errorf("the operators' listener = %s %s; want 200 (the control)", r.seen(), r.raw)
	}
	return fmt.Sprintf("%v (5 of 5 404); the operators' listener 200", seen[0])
}

// adminTokenGuessing: one address guessing the admin token on the
// operators' listener is locked out after a burst of failures (429 with
// Retry-After), even when it then sends the right token, so a lockout tells
// a guesser nothing; another address with the right token is served, and
// no guess changed a dial.
func adminTokenGuessing(t *testing.T, s *attackStack) string {
	guesser := client(51)
	url := fmt.Sprintf("%s/admin/v1/events/%d", s.apps.GatewayAdminURL, s.event)
	before := s.snap(t, s.event)
	counts := map[string]int{}
	for i := range 30 {
		r := do(t, guesser, "PATCH", url, map[string]any{"paused": true}, "Authorization", fmt.Sprintf("Bearer guess-%032d", i))
		counts[r.seen()]++
		if r.status != 401 && r.status != 429 {
			t.Errorf("guess %d = %s %s; want 401 or 429", i, r.seen(), r.raw)
		}
	}
	if counts["429 rate_limited"] == 0 {
		t.Errorf("30 wrong admin tokens from one address were never limited: %v", counts)
	}
	right := []string{"Authorization", "Bearer " + s.apps.OperatorToken}
	locked := do(t, guesser, "GET", url, nil, right...)
	if locked.status != 429 || locked.header.Get("Retry-After") == "" {
		t.Errorf("the right token from the locked address = %s %s; want 429 with Retry-After", locked.seen(), locked.raw)
	}
	s.unchanged(t, before, s.event)
	if r := do(t, client(52), "GET", url, nil, right...); r.status != 200 {
		t.Errorf("the right token from another address = %s %s; want 200", r.seen(), r.raw)
	}
	return fmt.Sprintf("%v; the right token from the guesser %s, from another address 200", counts, locked.seen())
}
