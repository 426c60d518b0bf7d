package paysim_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/paysim"
)

// settleAll creates n pending UPI payments and approves them in order,
// returning their ids.
func settleAll(tb testing.TB, e *env, n int) []string {
	tb.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.pay(tb, upi("booking-"+string(rune('a'+i)), 100)).ID
	}
	for _, id := range ids {
		if _, err := e.sim.Settle(id, true); err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// TestDuplicateWebhooks: with duplicate_rate 1 every event arrives twice,
// same id and body, and the two copies are in flight at the same time: the
// receiver holds the first copy until the second arrives.
func TestDuplicateWebhooks(t *testing.T) {
	var (
		mu      sync.Mutex
		copies  = map[string]int{}
		overlap = map[string]bool{}
	)
	e := newEnv(t, paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour, DuplicateRate: 1}, func(n int, ev paysim.Event) int {
		mu.Lock()
		copies[ev.ID]++
		mu.Unlock()
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			both := copies[ev.ID] == 2
			if both {
				overlap[ev.ID] = true
			}
			mu.Unlock()
			if both {
				break
			}
		}
		return http.StatusOK
	})
	const events = 5
	settleAll(t, e, events)
	got := e.recv.wait(t, 2*events)
	eventually(t, func() bool {
		for _, d := range e.sim.Deliveries() {
			if d.State != paysim.DeliveryDelivered {
				return false
			}
		}
		return true
	}, "all deliveries answered")
	mu.Lock()
	defer mu.Unlock()
	bodies := map[string][]string{}
	for _, r := range got {
		bodies[r.event.ID] = append(bodies[r.event.ID], string(r.body))
		if r.verifyErr != nil {
			t.Errorf("event %s: %v", r.event.ID, r.verifyErr)
		}
	}
	if len(bodies) != events {
		t.Fatalf("%d distinct events; want %d", len(bodies), events)
	}
	for id, b := range bodies {
		if len(b) != 2 || b[0] != b[1] {
			t.Errorf("event %s arrived %d times, bodies equal: %v; want twice, equal", id, len(b), len(b) == 2 && b[0] == b[1])
		}
		if !overlap[id] {
			t.Errorf("event %s: copies were not in flight together", id)
		}
	}
	for _, d := range e.sim.Deliveries() {
		if d.State != paysim.DeliveryDelivered || d.Attempts != 1 {
			t.Errorf("delivery %+v; want delivered at the first attempt", d)
		}
	}
}

// TestReorderWebhooks: events settled in order arrive in another order
// (the chance that 20 events held for random times keep their order is
// 1/20!), and all arrive within the window.
func TestReorderWebhooks(t *testing.T) {
	const window = 300 * time.Millisecond
	e := newEnv(t, paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour, ReorderWindow: window}, nil)
	start := time.Now()
	ids := settleAll(t, e, 20)
	got := e.recv.wait(t, len(ids))
	var order []string
	for _, r := range got {
		order = append(order, object[paysim.Payment](t, r.event).ID)
	}
	if slices.Equal(order, ids) {
		t.Errorf("webhooks arrived in settlement order %v", order)
	}
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	slices.Sort(ids)
	if !slices.Equal(sorted, ids) {
		t.Errorf("arrived %v; want each of %v once", order, ids)
	}
	if late := got[len(got)-1].at.Sub(start); late > window+2*time.Second {
		t.Errorf("last webhook after %v; window %v", late, window)
	}
}

// TestWebhookRetries: a receiver failing three times gets the event on
// the fourth attempt, each attempt after at least the backoff, each with
// the same body and a valid fresh signature. A receiver that always fails
// is given up after WebhookMaxAttempts.
func TestWebhookRetries(t *testing.T) {
	const base = 20 * time.Millisecond
	tests := []struct {
		name         string
		failFirst    int
		maxAttempts  int
		wantAttempts int
		wantState    string
	}{
		{"fails 3 times, then 200", 3, 10, 4, paysim.DeliveryDelivered},
		{"always fails", 1000, 3, 3, paysim.DeliveryFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			beh := quiet
			beh.WebhookRetryBase, beh.WebhookRetryMax, beh.WebhookMaxAttempts = base, time.Second, tc.maxAttempts
			e := newEnv(t, beh, func(n int, ev paysim.Event) int {
				if n <= tc.failFirst {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			})
			settleAll(t, e, 1)
			eventually(t, func() bool {
				d := e.sim.Deliveries()
				return len(d) == 1 && d[0].State == tc.wantState
			}, "delivery %s", tc.wantState)
			d := e.sim.Deliveries()[0]
			got := e.recv.all()
			if d.Attempts != tc.wantAttempts || len(got) != tc.wantAttempts {
				t.Fatalf("delivery %+v, %d received; want %d attempts", d, len(got), tc.wantAttempts)
			}
			wantLast := 200
			if tc.wantState == paysim.DeliveryFailed {
				wantLast = 500
			}
			if d.LastStatus != wantLast {
				t.Errorf("last status %d; want %d", d.LastStatus, wantLast)
			}
			for i, r := range got {
				if r.verifyErr != nil || string(r.body) != string(got[0].body) {
					t.Errorf("attempt %d: verify %v, same body %v", i+1, r.verifyErr, string(r.body) == string(got[0].body))
				}
				if i > 0 {
					if gap, min := r.at.Sub(got[i-1].at), base<<(i-1); gap < min {
						t.Errorf("attempt %d came %v after the previous; backoff is %v", i+1, gap, min)
					}
				}
			}
		})
	}
}

// TestWebhookWaitsForURL: events raised before the receiver is known are
// kept and sent once SetWebhookURL names it, without spending attempts.
func TestWebhookWaitsForURL(t *testing.T) {
	e := newEnv(t, quiet, nil)
	e.sim.SetWebhookURL("")
	settleAll(t, e, 2)
	if n := e.sim.FlushWebhooks(); n != 0 {
		t.Errorf("flush without a URL sent %d", n)
	}
	for _, d := range e.sim.Deliveries() {
		if d.State != paysim.DeliveryQueued || d.Attempts != 0 {
			t.Errorf("delivery %+v without a URL; want queued, 0 attempts", d)
		}
	}
	e.sim.SetWebhookURL(e.recv.url)
	e.recv.wait(t, 2)
}

// TestFlushWebhooks: events held by a long reorder window go out on flush,
// which returns once they were attempted.
func TestFlushWebhooks(t *testing.T) {
	e := newEnv(t, paysim.Behaviour{UPIDelayMin: time.Hour, UPIDelayMax: time.Hour, ReorderWindow: time.Hour}, nil)
	settleAll(t, e, 3)
	r := e.call(t, "GET", "/_sim/webhooks", nil)
	list := decodeAs[struct{ Deliveries []paysim.Delivery }](t, r.body)
	if len(list.Deliveries) != 3 || list.Deliveries[0].State != paysim.DeliveryQueued || list.Deliveries[0].NextAttempt.IsZero() {
		t.Fatalf("GET /_sim/webhooks = %s; want 3 queued", r.body)
	}
	r = e.call(t, "POST", "/_sim/webhooks/flush", nil)
	if got := decodeAs[struct{ Flushed int }](t, r.body); r.status != 200 || got.Flushed != 3 {
		t.Errorf("flush = %d %s; want 3 flushed", r.status, r.body)
	}
	if n := len(e.recv.all()); n != 3 {
		t.Errorf("%d received when flush returned; want 3", n)
	}
}
