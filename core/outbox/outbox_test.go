package outbox_test

// The outbox moves money, so its properties are tested on real PostgreSQL
// (a fresh database per test) with a fake provider that records every call
// and its idempotency key: a retry after a temporary failure, a lease that
// runs out under a worker that hangs, backoff, money jobs never given up,
// and exactly one run of each job under two workers, beside a control that
// shows the harness seeing a double run when the claim guard is bypassed.

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
	"github.com/onsale/onsale/core/outbox"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/postgres/postgrestest"
	"github.com/onsale/onsale/core/seed"
	"github.com/onsale/onsale/core/ticket"
	"github.com/onsale/onsale/core/token"
	"github.com/onsale/onsale/shared/admission"
)

var ctx = context.Background()

// call is one call the fake provider received.
type call struct {
	op, key, payment string
}

// fakeProvider is the payment provider as the outbox sees it. Like the
// real one, a second call under an idempotency key has no second effect;
// unlike it, it records every call, so a test sees how often a job ran,
// and counts how often money actually moved for each payment, so a test
// sees a double refund however it came about (a job run twice under two
// keys, or two jobs each with its own key).
type fakeProvider struct {
	mu      sync.Mutex
	calls   []call
	done    map[string]bool  // keys acted on: a repeat under one is answered, not carried out
	moved   map[string]int   // "op payment" -> times money moved; no cap
	failing map[string]int   // op -> temporary failures still to give (-1: forever)
	refuse  map[string]error // op -> the provider's answer to every call, until deleted
	// hang, when set, holds the next refund call until it is closed, and
	// hung is closed when that call arrives: a worker stuck mid-job.
	hang, hung chan struct{}
	// window is how long each money call takes: the race window of the
	// two-worker experiment.
	window time.Duration
	// shown is what the provider shows of a payment, when set; a refund
	// of it is then answered as the real provider does: 409
	// invalid_state unless it succeeded, refund_exceeds_capture when
	// refunded whole already; a void of a cancelled one already_canceled.
	// Unset, a payment shows succeeded and every call is carried out.
	shown map[string]core.Payment
}

// show sets what the provider shows of a payment.
func (p *fakeProvider) show(pay core.Payment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown[pay.ID] = pay
}

// refusal is the provider's answer to op on a payment it shows as set by
// show, or nil.
func (p *fakeProvider) refusal(op, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pay, ok := p.shown[id]
	switch {
	case !ok:
	case op == "refund" && pay.Status != core.PaymentSucceeded:
		return &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state", Message: "payment is " + pay.Status}
	case op == "refund" && pay.AmountRefunded >= pay.AmountCaptured:
		return &core.ProviderError{Status: http.StatusConflict, Code: "refund_exceeds_capture", Message: "nothing left to refund"}
	case op == "void" && pay.Status == core.PaymentCanceled:
		return &core.ProviderError{Status: http.StatusConflict, Code: "already_canceled", Message: "already canceled"}
	}
	return nil
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{done: map[string]bool{}, moved: map[string]int{}, failing: map[string]int{}, refuse: map[string]error{},
		shown: map[string]core.Payment{}}
}

func (p *fakeProvider) enter(ctx context.Context, op, key, payment string) error {
	p.mu.Lock()
	p.calls = append(p.calls, call{op, key, payment})
	hang, hung := p.hang, p.hung
	if op == "refund" && hang != nil {
		p.hang, p.hung = nil, nil
	}
	if err := p.refuse[op]; err != nil {
		p.mu.Unlock()
		return err
	}
	n := p.failing[op]
	if n > 0 {
		p.failing[op] = n - 1
	}
	window := p.window
	p.mu.Unlock()
	if op == "refund" && hang != nil {
		close(hung)
		select {
		case <-hang:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if n != 0 {
		return &core.ProviderError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "try again"}
	}
	time.Sleep(window) // deliberate: the call's duration, where a second runner can slip in
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done[key] {
		p.done[key] = true
		p.moved[op+" "+payment]++
	}
	return nil
}

// movedFor returns how often money moved by op for a payment: 1 for a
// refund carried out once, whatever the number of calls and keys.
func (p *fakeProvider) movedFor(op, payment string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.moved[op+" "+payment]
}

func (p *fakeProvider) Refund(ctx context.Context, key, id string) (*core.Refund, error) {
	if err := p.refusal("refund", id); err != nil {
		p.mu.Lock()
		p.calls = append(p.calls, call{"refund", key, id})
		p.mu.Unlock()
		return nil, err
	}
	if err := p.enter(ctx, "refund", key, id); err != nil {
		return nil, err
	}
	return &core.Refund{ID: "re_" + key, PaymentID: id, Status: "succeeded"}, nil
}

func (p *fakeProvider) Cancel(ctx context.Context, key, id string) (*core.Payment, error) {
	if err := p.refusal("void", id); err != nil {
		p.mu.Lock()
		p.calls = append(p.calls, call{"void", key, id})
		p.mu.Unlock()
		return nil, err
	}
	if err := p.enter(ctx, "void", key, id); err != nil {
		return nil, err
	}
	return &core.Payment{ID: id, Status: core.PaymentCanceled}, nil
}

func (p *fakeProvider) Capture(ctx context.Context, key, id string) (*core.Payment, error) {
	if err := p.enter(ctx, "capture", key, id); err != nil {
		return nil, err
	}
	return &core.Payment{ID: id, Status: core.PaymentSucceeded}, nil
}

func (p *fakeProvider) Payment(ctx context.Context, id string) (*core.Payment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pay, ok := p.shown[id]; ok {
		return &pay, nil
	}
	return &core.Payment{ID: id, Status: core.PaymentSucceeded}, nil
}

// fail makes the next n calls of op fail temporarily (-1: until told otherwise).
func (p *fakeProvider) fail(op string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failing[op] = n
}

// callsFor returns the calls made for a key.
func (p *fakeProvider) callsFor(key string) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if c.key == key {
			out = append(out, c)
		}
	}
	return out
}

// failingSender is a mailer and an SMS gateway that are always down.
type failingSender struct{}

func (failingSender) SendTickets(context.Context, *core.Booking, string, string, []notify.Ticket) error {
	return errors.New("smtp down")
}
func (failingSender) SendCancellation(context.Context, *core.Booking, string, string, string) error {
	return errors.New("smtp down")
}
func (failingSender) Send(context.Context, string, string) error {
	return errors.New("sms gateway down")
}

type env struct {
	db    *postgres.DB
	prov  *fakeProvider
	met   *metrics.Metrics
	event int64
	seats []string // seat ids, one per booking
	next  int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := postgrestest.NewDB(t, postgres.Options{})
	layout := seed.MustLayout("stadium")
	ev, err := db.CreateEvent(ctx, seed.EventSpec{Name: "outbox test", Kind: core.KindConcert, Layout: layout,
		StartsAt: time.Now().Add(24 * time.Hour), OnsaleAt: time.Now().Add(-time.Hour), MaxPerAccount: 6})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, prov: newFakeProvider(), met: metrics.New(), event: ev}
	for _, s := range layout.Seats() {
		e.seats = append(e.seats, s.ID)
	}
	return e
}

// booking makes a booking paid by flow whose payment the provider approved:
// on time (CONFIRMED: a capture for a card, the ticket messages for UPI) or
// after its hold expired (REFUND_DUE: a void for a card, a refund for UPI).
func (e *env) booking(t *testing.T, flow core.Flow, late bool, email string) int64 {
	t.Helper()
	seat := e.seats[e.next]
	account := fmt.Sprintf("fan%d", e.next)
	e.next++
	h, err := e.db.CreateHold(ctx, core.HoldParams{EventID: e.event, Account: account, Request: core.HoldRequest{Seats: []string{seat}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: account, EventID: e.event}, flow, core.Contact{Email: email, Phone: "+910000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.SetPaymentID(ctx, b.ID, fmt.Sprintf("pay_%d", b.ID)); err != nil {
		t.Fatal(err)
	}
	want := core.BookingConfirmed
	if late {
		e.exec(t, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h.ID)
		want = core.BookingRefundDue
	}
	got, err := e.db.Settle(ctx, core.Settlement{BookingID: b.ID, PaymentID: fmt.Sprintf("pay_%d", b.ID), Succeeded: true, Type: "test"})
	if err != nil || got != want {
		t.Fatalf("Settle(booking %d, late %v) = %s, %v; want %s", b.ID, late, got, err, want)
	}
	return b.ID
}

func (e *env) worker(store outbox.Store, lease time.Duration) *outbox.Worker {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	return &outbox.Worker{DB: store, Provider: e.prov, Tickets: ticket.NewSigner(key), PublicURL: "http://onsale.test",
		Lease: lease, Log: slog.New(slog.DiscardHandler), Metrics: e.met}
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Pool().Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

type jobRow struct {
	status   core.JobStatus
	attempts int
	lastErr  string
	wait     time.Duration // until the next attempt
	done     time.Time     // done_at; zero while not done
	next     time.Time     // next_attempt_at
}

func (e *env) job(t *testing.T, kind core.JobKind, booking int64) jobRow {
	t.Helper()
	var j jobRow
	var secs float64
	var done *time.Time
	err := e.db.Pool().QueryRow(ctx, `SELECT status, attempts, coalesce(last_error, ''), extract(epoch FROM next_attempt_at - now())::float8,
       done_at, next_attempt_at
  FROM outbox WHERE kind = $1 AND booking_id = $2`, kind, booking).Scan(&j.status, &j.attempts, &j.lastErr, &secs, &done, &j.next)
	if err != nil {
		t.Fatalf("job %s of booking %d: %v", kind, booking, err)
	}
	j.wait = time.Duration(secs * float64(time.Second))
	if done != nil {
		j.done = *done
	}
	return j
}

// due makes every pending job due now, as if its backoff had passed.
func (e *env) due(t *testing.T) {
	t.Helper()
	e.exec(t, `UPDATE outbox SET next_attempt_at = now() WHERE status = 'PENDING'`)
}

func (e *env) status(t *testing.T, booking int64) (core.BookingStatus, bool) {
	t.Helper()
	b, err := e.db.Booking(ctx, booking)
	if err != nil {
		t.Fatal(err)
	}
	return b.Status, b.Captured
}

// runs is the metric of job runs of a kind with a result.
func (e *env) runs(t *testing.T, kind core.JobKind, result string) int {
	t.Helper()
	families, err := e.met.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "onsale_core_outbox_jobs_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == string(kind) && labels["result"] == result {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

func key(kind core.JobKind, booking int64) string { return fmt.Sprintf("%s:%d", kind, booking) }

// payment is the provider's payment id of a booking made by env.booking.
func payment(booking int64) string { return fmt.Sprintf("pay_%d", booking) }

// A refund the provider could not take (503) is retried by the next poll
// after its backoff, under the same idempotency key, and then recorded.
func TestRetryAfterTemporaryFailure(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, true, "")
	w := e.worker(e.db, time.Minute)
	e.prov.fail("refund", 1)
	if n := w.Poll(ctx); n != 1 {
		t.Fatalf("first poll ran %d jobs; want the refund", n)
	}
	j := e.job(t, core.JobRefund, b)
	if j.status != core.JobPending || j.attempts != 1 || j.lastErr == "" || j.wait <= 0 {
		t.Fatalf("after a 503: %+v; want PENDING, 1 attempt, the error kept, a retry scheduled", j)
	}
	if n := w.Poll(ctx); n != 0 {
		t.Fatalf("a poll inside the backoff ran %d jobs; want none", n)
	}
	e.due(t)
	if n := w.Poll(ctx); n != 1 {
		t.Fatalf("poll after the backoff ran %d jobs; want the refund", n)
	}
	calls := e.prov.callsFor(key(core.JobRefund, b))
	if len(calls) != 2 || calls[0] != calls[1] || e.prov.movedFor("refund", payment(b)) != 1 {
		t.Fatalf("provider calls %+v, money moved %d times; want two identical refunds under key %s, one refund",
			calls, e.prov.movedFor("refund", payment(b)), key(core.JobRefund, b))
	}
	if j := e.job(t, core.JobRefund, b); j.status != core.JobDone || j.attempts != 2 {
		t.Fatalf("after the retry: %+v; want DONE after 2 attempts", j)
	}
	if st, _ := e.status(t, b); st != core.BookingRefunded {
		t.Fatalf("booking %s; want REFUNDED", st)
	}
	if r, d := e.runs(t, core.JobRefund, "retry"), e.runs(t, core.JobRefund, "done"); r != 1 || d != 1 {
		t.Fatalf("metrics: %d retries, %d done; want 1, 1", r, d)
	}
}

// A worker that hangs mid-job keeps its job only for its lease: then
// another worker takes it and carries it out under the same key, and the
// first worker's late finish changes nothing.
func TestLeaseExpiry(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, true, "")
	const lease = 500 * time.Millisecond
	hang, hung := make(chan struct{}), make(chan struct{})
	e.prov.hang, e.prov.hung = hang, hung
	first, second := e.worker(e.db, lease), e.worker(e.db, lease)

	firstDone := make(chan int)
	// The lease starts when the first poll claims the job, so no earlier
	// than now: measured from here, a correct takeover is never early.
	leased := time.Now()
	go func() { firstDone <- first.Poll(ctx) }()
	<-hung // the first worker is inside the provider call, holding the lease
	if n := second.Poll(ctx); n != 0 && time.Since(leased) < lease {
		t.Fatalf("a second worker ran %d jobs inside the first one's lease", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for second.Poll(ctx) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second worker never took the job after the lease ran out")
		}
		time.Sleep(20 * time.Millisecond) // between polls, as the worker's own loop waits
	}
	if took := time.Since(leased); took < lease {
		t.Fatalf("the job changed hands after %v; want after the %v lease", took, lease)
	}
	before := e.job(t, core.JobRefund, b)
	if before.status != core.JobDone || before.attempts != 2 || before.done.IsZero() {
		t.Fatalf("after the takeover: %+v; want DONE, 2 attempts", before)
	}
	close(hang) // the first worker wakes up and finishes late
	if n := <-firstDone; n != 1 {
		t.Fatalf("first worker ran %d jobs; want 1", n)
	}
	// Every column the finish writes stays as the takeover left it: a
	// finish without its status guard would stamp a new done_at.
	after := e.job(t, core.JobRefund, b)
	after.wait, before.wait = 0, 0 // relative to now(): moves by itself
	if after != before {
		t.Fatalf("after the late finish: %+v; want it unchanged from %+v", after, before)
	}
	if st, _ := e.status(t, b); st != core.BookingRefunded {
		t.Fatalf("booking %s; want REFUNDED", st)
	}
	k := key(core.JobRefund, b)
	calls := e.prov.callsFor(k)
	if moved := e.prov.movedFor("refund", payment(b)); len(calls) != 2 || calls[0] != calls[1] || moved != 1 {
		t.Fatalf("provider calls %+v, money moved %d times; want two identical calls under %s and one refund", calls, moved, k)
	}
}

// Each failure pushes the next attempt out by core.JobBackoff: doubling
// from 1 s, never past an hour; no poll runs the job before then.
func TestBackoff(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, true, "")
	w := e.worker(e.db, time.Minute)
	e.prov.fail("refund", -1)
	var prev time.Duration
	for attempt := 1; attempt <= 15; attempt++ {
		if n := w.Poll(ctx); n != 1 {
			t.Fatalf("attempt %d: poll ran %d jobs; want 1", attempt, n)
		}
		j := e.job(t, core.JobRefund, b)
		want := core.JobBackoff(attempt)
		if j.attempts != attempt || j.wait > want || j.wait < want-2*time.Second {
			t.Fatalf("attempt %d: %+v; want the next attempt in %v", attempt, j, want)
		}
		if want != min(2*prev, time.Hour) && attempt > 1 {
			t.Fatalf("attempt %d: backoff %v after %v; want doubling up to an hour", attempt, want, prev)
		}
		if want > time.Hour {
			t.Fatalf("attempt %d: backoff %v; want at most an hour", attempt, want)
		}
		prev = want
		if n := w.Poll(ctx); n != 0 {
			t.Fatalf("attempt %d: a poll inside the backoff ran %d jobs", attempt, n)
		}
		e.due(t)
	}
	if prev != time.Hour {
		t.Fatalf("backoff after 15 failures %v; want the one-hour bound reached", prev)
	}
}

// A job that moves money is never given up: past core.MaxJobAttempts it
// stays PENDING (counted "dead" in the metrics) and succeeds when the
// provider is back.
func TestMoneyJobsNeverGivenUp(t *testing.T) {
	for _, tc := range []struct {
		kind     core.JobKind
		flow     core.Flow
		late     bool
		want     core.BookingStatus
		captured bool
	}{
		{core.JobRefund, core.FlowAsync, true, core.BookingRefunded, false},
		{core.JobVoid, core.FlowSync, true, core.BookingRefunded, false},
		{core.JobCapture, core.FlowSync, false, core.BookingConfirmed, true},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			e := newEnv(t)
			b := e.booking(t, tc.flow, tc.late, "")
			w := e.worker(e.db, time.Minute)
			e.exec(t, `UPDATE outbox SET attempts = $1 WHERE booking_id = $2`, core.MaxJobAttempts-1, b)
			e.prov.fail(string(tc.kind), -1)
			for attempt := core.MaxJobAttempts; attempt < core.MaxJobAttempts+3; attempt++ {
				if n := w.Poll(ctx); n != 1 {
					t.Fatalf("attempt %d: poll ran %d jobs; want 1", attempt, n)
				}
				if j := e.job(t, tc.kind, b); j.status != core.JobPending || j.attempts != attempt {
					t.Fatalf("attempt %d: %+v; want PENDING, never given up", attempt, j)
				}
				e.due(t)
			}
			if d := e.runs(t, tc.kind, "dead"); d != 3 {
				t.Fatalf("metrics: %d runs past the limit; want 3 counted dead", d)
			}
			e.prov.fail(string(tc.kind), 0)
			if n := w.Poll(ctx); n != 1 {
				t.Fatalf("poll after recovery ran %d jobs; want 1", n)
			}
			if j := e.job(t, tc.kind, b); j.status != core.JobDone {
				t.Fatalf("after recovery: %+v; want DONE", j)
			}
			if st, captured := e.status(t, b); st != tc.want || captured != tc.captured {
				t.Fatalf("booking %s (captured %v); want %s (captured %v)", st, captured, tc.want, tc.captured)
			}
			if tc.kind == core.JobCapture {
				for _, k := range []core.JobKind{core.JobEmail, core.JobSMS} {
					if j := e.job(t, k, b); j.status != core.JobPending {
						t.Fatalf("%s after the capture: %+v; want queued", k, j)
					}
				}
			}
		})
	}
}

// Issue 13, item 14: only the provider's definite refusal of the payment
// (declined, the authorization voided or failed) undoes a card sale. A
// refusal that is the core's own configuration (a mistyped or revoked API
// key: 401, 403; another account's key: 404; a request the provider does
// not take: 400) leaves the booking CONFIRMED with its seats, keeps the
// capture job retrying, raises onsale_core_provider_misconfigured_total
// and, once the key is fixed, the next attempt captures. The refusal rows
// are the control: the same harness sees a booking undone.
func TestCaptureRefusalVersusMisconfiguration(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    *core.ProviderError
		undone bool
	}{
		{"401 wrong api key", &core.ProviderError{Status: http.StatusUnauthorized, Code: "unauthorized"}, false},
		{"403 revoked key", &core.ProviderError{Status: http.StatusForbidden, Code: "forbidden"}, false},
		{"404 another account's key", &core.ProviderError{Status: http.StatusNotFound, Code: "not_found"}, false},
		{"400 request not taken", &core.ProviderError{Status: http.StatusBadRequest, Code: "invalid_request"}, false},
		{"402 declined", &core.ProviderError{Status: http.StatusPaymentRequired, Code: "card_declined"}, true},
		{"409 authorization voided", &core.ProviderError{Status: http.StatusConflict, Code: "already_canceled"}, true},
		{"409 payment failed", &core.ProviderError{Status: http.StatusConflict, Code: "invalid_state"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.booking(t, core.FlowSync, false, "")
			w := e.worker(e.db, time.Minute)
			e.prov.mu.Lock()
			e.prov.refuse["capture"] = tc.err
			e.prov.mu.Unlock()
			if n := w.Poll(ctx); n != 1 {
				t.Fatalf("poll ran %d jobs; want the capture", n)
			}
			alerts := e.misconfigured(t, core.JobCapture, tc.err.Status)
			st, captured := e.status(t, b)
			var seatsBooked int
			if err := e.db.Pool().QueryRow(ctx, `SELECT count(*) FROM seats WHERE booking_id = $1 AND status = 'BOOKED'`, b).Scan(&seatsBooked); err != nil {
				t.Fatal(err)
			}
			if tc.undone {
				if st != core.BookingFailed || seatsBooked != 0 || alerts != 0 {
					t.Fatalf("after %v: booking %s, %d seats booked, %d alerts; want FAILED, seats back on sale, no alert", tc.err, st, seatsBooked, alerts)
				}
				return
			}
			if st != core.BookingConfirmed || captured || seatsBooked != 1 {
				t.Fatalf("after %v: booking %s (captured %v), %d seats booked; want CONFIRMED, uncaptured, its seat kept", tc.err, st, captured, seatsBooked)
			}
			if j := e.job(t, core.JobCapture, b); j.status != core.JobPending || j.attempts != 1 {
				t.Fatalf("capture job after %v: %+v; want PENDING, retried", tc.err, j)
			}
			if alerts != 1 {
				t.Fatalf("onsale_core_provider_misconfigured_total{capture,%d} = %d; want 1", tc.err.Status, alerts)
			}
			// The operator fixes the key: the next attempt captures.
			e.prov.mu.Lock()
			delete(e.prov.refuse, "capture")
			e.prov.mu.Unlock()
			e.due(t)
			if n := w.Poll(ctx); n != 1 {
				t.Fatalf("poll after the fix ran %d jobs; want the capture", n)
			}
			if st, captured := e.status(t, b); st != core.BookingConfirmed || !captured {
				t.Fatalf("after the fix: booking %s (captured %v); want CONFIRMED and captured", st, captured)
			}
		})
	}
}

// A second payment for a settled booking is refunded by its refund_stray
// job: one refund of that payment, under a key of that payment, and the
// booking keeps its own payment, status and seats.
func TestStrayRefund(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, false, "")
	got, err := e.db.Settle(ctx, core.Settlement{EventID: "evt_second", BookingID: b, PaymentID: "pay_second", Succeeded: true, Type: "payment.succeeded"})
	if err != nil || got != core.OutcomeStrayRefund {
		t.Fatalf("second payment = %s, %v; want %s", got, err, core.OutcomeStrayRefund)
	}
	w := e.worker(e.db, time.Minute)
	for w.Poll(ctx) > 0 { // the stray refund, and the booking's ticket messages
	}
	if n := e.prov.movedFor("refund", "pay_second"); n != 1 {
		t.Fatalf("pay_second refunded %d times; want once", n)
	}
	if calls := e.prov.callsFor("refund_stray:pay_second"); len(calls) != 1 {
		t.Fatalf("calls under refund_stray:pay_second: %+v; want one refund", calls)
	}
	if n := e.prov.movedFor("refund", payment(b)); n != 0 {
		t.Fatalf("the booking's own payment refunded %d times; want kept", n)
	}
	if j := e.job(t, core.JobStrayRefund, b); j.status != core.JobDone {
		t.Fatalf("stray refund job: %+v; want DONE", j)
	}
	if st, captured := e.status(t, b); st != core.BookingConfirmed || !captured {
		t.Fatalf("booking %s (captured %v); want CONFIRMED and captured, untouched", st, captured)
	}
}

// Issue 13, item 15: a refund_stray job reads what to do from the payment's
// status at the provider, so a retry after a give-back that happened but
// was not recorded (the void succeeded, then FinishJob failed or the
// process died) finishes instead of asking for an impossible refund
// forever. Without that, a stray shown canceled (or failed) got a refund
// call, 409 invalid_state, and the job (money: never given up) retried
// for ever; one shown pending got a refund call the provider refuses.
func TestStrayRefundFollowsPaymentStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shown   core.Payment
		want    core.JobStatus
		calls   int // money calls under the stray's keys
		refunds int // money moved by a refund
	}{
		{"already voided", core.Payment{Status: core.PaymentCanceled, Amount: 100}, core.JobDone, 0, 0},
		{"failed: nothing taken", core.Payment{Status: core.PaymentFailed, Amount: 100}, core.JobDone, 0, 0},
		{"already refunded whole", core.Payment{Status: core.PaymentSucceeded, Amount: 100, AmountCaptured: 100, AmountRefunded: 100}, core.JobDone, 0, 0},
		{"pending: looked at again later", core.Payment{Status: core.PaymentPending, Amount: 100}, core.JobPending, 0, 0},
		{"control: succeeded, refunded", core.Payment{Status: core.PaymentSucceeded, Amount: 100, AmountCaptured: 100}, core.JobDone, 1, 1},
		{"control: authorized, voided", core.Payment{Status: core.PaymentRequiresCapture, Amount: 100}, core.JobDone, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			b := e.booking(t, core.FlowAsync, false, "")
			tc.shown.ID = "pay_stray"
			e.prov.show(tc.shown)
			got, err := e.db.Settle(ctx, core.Settlement{EventID: "evt_stray", BookingID: b, PaymentID: "pay_stray", Succeeded: true, Type: "payment.succeeded"})
			if err != nil || got != core.OutcomeStrayRefund {
				t.Fatalf("stray payment = %s, %v; want %s", got, err, core.OutcomeStrayRefund)
			}
			w := e.worker(e.db, time.Minute)
			for w.Poll(ctx) > 0 {
			}
			j := e.job(t, core.JobStrayRefund, b)
			if j.status != tc.want {
				t.Fatalf("stray refund job: %+v; want %s", j, tc.want)
			}
			var calls int
			for _, k := range []string{"refund_stray:pay_stray", "refund_stray:pay_stray:void"} {
				calls += len(e.prov.callsFor(k))
			}
			if calls != tc.calls {
				t.Fatalf("%d money calls for the stray; want %d", calls, tc.calls)
			}
			if n := e.prov.movedFor("refund", "pay_stray"); n != tc.refunds {
				t.Fatalf("stray refunded %d times; want %d", n, tc.refunds)
			}
			if st, _ := e.status(t, b); st != core.BookingConfirmed {
				t.Fatalf("booking %s; want CONFIRMED, untouched", st)
			}
		})
	}
}

// lister is the provider's payments by order reference.
type lister map[string][]core.Payment

func (l lister) PaymentsFor(_ context.Context, q core.PaymentLookup) ([]core.Payment, error) {
	ref := q.Reference
	return l[ref], nil
}

// Cancel cancels a pending payment of the lister's.
func (l lister) Cancel(_ context.Context, _, id string) (*core.Payment, error) {
	for ref, ps := range l {
		for i := range ps {
			if ps[i].ID == id {
				if ps[i].Status != core.PaymentPending {
					return nil, &core.ProviderError{Status: 409, Code: "invalid_state"}
				}
				l[ref][i].Status = core.PaymentCanceled
				return &l[ref][i], nil
			}
		}
	}
	return nil, &core.ProviderError{Status: 404, Code: "not_found"}
}

// A payment left pending at the provider (a 3-D Secure step or a provider's
// page the fan walked away from) does not keep its booking pending for
// ever: twice the reconciler's deadline after the booking, the booking
// fails and then the payment is cancelled at the provider (nobody may pay
// on it any more). The control: one only past the deadline once is left
// alone.
func TestReconcilerEndsAbandonedPayment(t *testing.T) {
	e := newEnv(t)
	pending := func(seat string, age string) (*core.Booking, lister) {
		h, err := e.db.CreateHold(ctx, core.HoldParams{EventID: e.event, Account: "fan-" + seat, Request: core.HoldRequest{Seats: []string{seat}}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := e.db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "fan-" + seat, EventID: e.event}, core.FlowSync, core.Contact{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.db.SetPaymentID(ctx, b.ID, "pi_"+seat); err != nil {
			t.Fatal(err)
		}
		e.exec(t, `UPDATE bookings SET created_at = now() - $2::interval WHERE id = $1`, b.ID, age)
		return b, lister{b.Reference(): {{ID: "pi_" + seat, Status: core.PaymentPending, Amount: b.AmountPaise, Currency: b.Currency}}}
	}
	for _, tc := range []struct {
		name, age string
		want      core.BookingStatus
		canceled  bool
	}{
		{"control: past the deadline once", "90 seconds", core.BookingPending, false},
		{"twice past the deadline", "3 minutes", core.BookingFailed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, l := pending(e.seats[map[bool]int{false: 1, true: 2}[tc.canceled]], tc.age)
			r := &outbox.Reconciler{DB: e.db, Provider: l, Worker: e.worker(e.db, time.Minute), After: time.Minute,
				Log: slog.New(slog.DiscardHandler), Metrics: e.met}
			if _, err := r.Once(ctx); err != nil {
				t.Fatal(err)
			}
			if st, _ := e.status(t, b.ID); st != tc.want {
				t.Fatalf("booking %s; want %s", st, tc.want)
			}
			if got := l[b.Reference()][0].Status == core.PaymentCanceled; got != tc.canceled {
				t.Fatalf("payment cancelled at the provider: %v; want %v", got, tc.canceled)
			}
		})
	}
}

// The reconciler settles every payment the provider shows for a pending
// booking: the booking's own confirms it, and a second one (a fan who paid
// twice while the webhooks were lost) is refunded, not left with the
// provider unseen.
func TestReconcilerRefundsSecondPayment(t *testing.T) {
	e := newEnv(t)
	h, err := e.db.CreateHold(ctx, core.HoldParams{EventID: e.event, Account: "fan", Request: core.HoldRequest{Seats: []string{e.seats[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.db.StartPayment(ctx, core.HoldRef{ID: h.ID, Account: "fan", EventID: e.event}, core.FlowAsync, core.Contact{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.SetPaymentID(ctx, b.ID, "pay_own"); err != nil {
		t.Fatal(err)
	}
	e.exec(t, `UPDATE bookings SET created_at = now() - interval '1 hour' WHERE id = $1`, b.ID)
	paid := func(id string) core.Payment {
		return core.Payment{ID: id, Status: core.PaymentSucceeded, Amount: b.AmountPaise, Currency: b.Currency, Reference: b.Reference()}
	}
	r := &outbox.Reconciler{DB: e.db, Provider: lister{b.Reference(): {paid("pay_twice"), paid("pay_own")}}, Worker: e.worker(e.db, time.Minute),
		After: time.Minute, Log: slog.New(slog.DiscardHandler), Metrics: e.met}
	if n, err := r.Once(ctx); err != nil || n != 1 {
		t.Fatalf("Once = %d, %v; want 1 settled", n, err)
	}
	if st, _ := e.status(t, b.ID); st != core.BookingConfirmed {
		t.Fatalf("booking %s; want CONFIRMED by its own payment", st)
	}
	var strays []string
	rows, _ := e.db.Pool().Query(ctx, `SELECT payment_id FROM outbox WHERE booking_id = $1 AND kind = 'refund_stray'`, b.ID)
	for rows.Next() {
		var p string
		rows.Scan(&p)
		strays = append(strays, p)
	}
	rows.Close()
	if len(strays) != 1 || strays[0] != "pay_twice" {
		t.Fatalf("stray refunds queued for %v; want [pay_twice]", strays)
	}
}

// misconfigured is the alert counter for a kind of job and a status.
func (e *env) misconfigured(t *testing.T, kind core.JobKind, status int) int {
	t.Helper()
	families, err := e.met.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "onsale_core_provider_misconfigured_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == string(kind) && labels["status"] == fmt.Sprint(status) {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// Money that reaches a FAILED card booking after its authorization was
// voided is given back by a second void that reaches the provider under a
// key of its own (a replay of the first void's answer would hide a capture
// made since), and the booking ends REFUNDED.
func TestSecondVoidReachesProvider(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowSync, false, "")
	w := e.worker(e.db, time.Minute)
	// The provider refused the capture for good: the booking is undone
	// and its authorization voided.
	e.exec(t, `UPDATE outbox SET status = 'DONE', done_at = now() WHERE kind = 'capture' AND booking_id = $1`, b)
	if err := e.db.FailCapture(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := w.Poll(ctx); n != 1 {
		t.Fatalf("poll ran %d jobs; want the void", n)
	}
	if st, _ := e.status(t, b); st != core.BookingFailed {
		t.Fatalf("after the void: %s; want FAILED", st)
	}
	got, err := e.db.Settle(ctx, core.Settlement{EventID: "evt_late", BookingID: b, PaymentID: payment(b), Succeeded: true, Type: "payment.succeeded"})
	if err != nil || got != core.BookingRefundDue {
		t.Fatalf("late money = %s, %v; want REFUND_DUE", got, err)
	}
	if n := w.Poll(ctx); n != 1 {
		t.Fatalf("poll ran %d jobs; want the second void", n)
	}
	first, second := e.prov.callsFor(key(core.JobVoid, b)), e.prov.callsFor(key(core.JobVoid, b)+":2")
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("void calls: %+v under the first key, %+v under the second; want one each", first, second)
	}
	if st, _ := e.status(t, b); st != core.BookingRefunded {
		t.Fatalf("after the second void: %s; want REFUNDED", st)
	}
}

// The ticket email and SMS are given up (DEAD) after core.MaxJobAttempts,
// and no poll takes them again.
func TestNonMoneyJobsGivenUp(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, false, "fan@onsale.test")
	w := e.worker(e.db, time.Minute)
	w.Mailer, w.SMS = failingSender{}, failingSender{}
	e.exec(t, `UPDATE outbox SET attempts = $1 WHERE booking_id = $2`, core.MaxJobAttempts-2, b)
	if n := w.Poll(ctx); n != 2 {
		t.Fatalf("poll ran %d jobs; want the email and the SMS", n)
	}
	for _, k := range []core.JobKind{core.JobEmail, core.JobSMS} {
		if j := e.job(t, k, b); j.status != core.JobPending || j.attempts != core.MaxJobAttempts-1 {
			t.Fatalf("%s one attempt before the limit: %+v; want PENDING", k, j)
		}
	}
	e.due(t)
	if n := w.Poll(ctx); n != 2 {
		t.Fatalf("poll ran %d jobs; want the email and the SMS", n)
	}
	for _, k := range []core.JobKind{core.JobEmail, core.JobSMS} {
		if j := e.job(t, k, b); j.status != core.JobDead || j.attempts != core.MaxJobAttempts {
			t.Fatalf("%s at the limit: %+v; want DEAD after %d attempts", k, j, core.MaxJobAttempts)
		}
		if d := e.runs(t, k, "dead"); d != 1 {
			t.Fatalf("metrics: %s counted dead %d times; want 1", k, d)
		}
	}
	e.exec(t, `UPDATE outbox SET next_attempt_at = now() WHERE booking_id = $1`, b)
	if n := w.Poll(ctx); n != 0 {
		t.Fatalf("a poll ran %d dead jobs; want none", n)
	}
}

// signallingStore tells when a poll has claimed.
type signallingStore struct {
	*postgres.DB
	claimed chan struct{}
}

func (s signallingStore) ClaimJobs(ctx context.Context, n int, lease time.Duration) ([]core.Job, error) {
	jobs, err := s.DB.ClaimJobs(ctx, n, lease)
	select {
	case s.claimed <- struct{}{}:
	default:
	}
	return jobs, err
}

// naiveStore is the outbox without its claim guard: it hands out every
// pending job without a lease or a row lock, as a worker that reads
// "what is pending" and runs it would.
type naiveStore struct{ *postgres.DB }

func (s naiveStore) ClaimJobs(ctx context.Context, n int, _ time.Duration) ([]core.Job, error) {
	rows, err := s.Pool().Query(ctx, `SELECT id, kind, booking_id, attempts + 1 FROM outbox WHERE status = 'PENDING' ORDER BY id LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []core.Job
	for rows.Next() {
		var j core.Job
		if err := rows.Scan(&j.ID, &j.Kind, &j.BookingID, &j.Attempts); err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// Two workers on one table run each refund exactly once; the control, the
// same two workers without the claim guard, runs some twice: the harness
// can see a double run.
func TestExactlyOnceUnderTwoWorkers(t *testing.T) {
	const n = 24
	run := func(t *testing.T, store func(*postgres.DB) outbox.Store) (twice int) {
		e := newEnv(t)
		e.prov.window = 5 * time.Millisecond
		var bookings []int64
		for range n {
			bookings = append(bookings, e.booking(t, core.FlowAsync, true, ""))
		}
		workers := []*outbox.Worker{e.worker(store(e.db), time.Minute), e.worker(store(e.db), time.Minute)}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for w.Poll(ctx) > 0 {
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, b := range bookings {
			calls := len(e.prov.callsFor(key(core.JobRefund, b)))
			if calls == 0 {
				t.Errorf("booking %d: never refunded", b)
			}
			if calls > 1 {
				twice++
			}
			if moved := e.prov.movedFor("refund", payment(b)); moved != 1 {
				t.Errorf("booking %d: money moved %d times; want once (the provider deduplicates one key)", b, moved)
			}
			if st, _ := e.status(t, b); st != core.BookingRefunded {
				t.Errorf("booking %d: %s; want REFUNDED", b, st)
			}
		}
		return twice
	}
	t.Run("control: without the claim guard a refund runs twice", func(t *testing.T) {
		twice := run(t, func(db *postgres.DB) outbox.Store { return naiveStore{db} })
		t.Logf("naive claim: %d of %d refunds ran twice", twice, n)
		if twice == 0 {
			t.Fatal("no refund ran twice without the claim guard: the harness cannot see a double run")
		}
	})
	t.Run("product: lease and SKIP LOCKED", func(t *testing.T) {
		if twice := run(t, func(db *postgres.DB) outbox.Store { return db }); twice != 0 {
			t.Fatalf("%d of %d refunds ran twice; want each once", twice, n)
		}
	})
}

// A kicked job runs promptly in Run's own loop, not at the next poll, and
// Run (the worker's shutdown) returns only once a kicked job in flight has
// finished.
func TestKickIsOwnedByRun(t *testing.T) {
	e := newEnv(t)
	polled := make(chan struct{}, 1)
	w := e.worker(signallingStore{e.db, polled}, time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		w.Run(runCtx, time.Hour) // after its first poll, only a kick runs a job
	}()
	<-polled // the first poll is over: a job queued now is not its

	b := e.booking(t, core.FlowAsync, true, "")
	w.Kick(core.JobRefund, b)
	deadline := time.Now().Add(10 * time.Second)
	for st, _ := e.status(t, b); st != core.BookingRefunded; st, _ = e.status(t, b) {
		if time.Now().After(deadline) {
			t.Fatalf("kicked refund: booking %s after 10 s; want REFUNDED", st)
		}
		time.Sleep(10 * time.Millisecond) // polling the booking, not timing the worker
	}

	// Shutdown while a kicked refund is inside the provider call.
	b2 := e.booking(t, core.FlowAsync, true, "")
	hang, hung := make(chan struct{}), make(chan struct{})
	e.prov.mu.Lock()
	e.prov.hang, e.prov.hung = hang, hung
	e.prov.mu.Unlock()
	w.Kick(core.JobRefund, b2)
	<-hung
	stop()
	select {
	case <-runDone:
		t.Fatal("Run returned while its kicked refund was in flight")
	case <-time.After(100 * time.Millisecond): // deliberate: give a wrong Run time to return
	}
	close(hang)
	<-runDone
	if st, _ := e.status(t, b2); st != core.BookingRefunded {
		t.Fatalf("refund in flight at shutdown: booking %s; want REFUNDED (the job finished before Run returned)", st)
	}
}

// recordingSender keeps the messages it was given.
type recordingSender struct {
	mu                    sync.Mutex
	sms, links, cancelled []string
}

func (r *recordingSender) SendCancellation(_ context.Context, b *core.Booking, event, reason, link string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cancelled = append(r.cancelled, notify.CancelText(b, event, reason, link))
	return nil
}

func (r *recordingSender) SendTickets(_ context.Context, _ *core.Booking, _, link string, _ []notify.Ticket) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.links = append(r.links, link)
	return nil
}

func (r *recordingSender) Send(_ context.Context, _, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sms = append(r.sms, text)
	return nil
}

// The ticket SMS and email link to the gateway's /tickets page with a
// ticket-link token in the fragment, which reads that booking and only it,
// until a day after the show.
func TestTicketLink(t *testing.T) {
	e := newEnv(t)
	b := e.booking(t, core.FlowAsync, false, "fan@onsale.test")
	w := e.worker(e.db, time.Minute)
	priv, _ := admission.GenerateKey()
	keys := token.New(priv)
	rec := &recordingSender{}
	w.Mailer, w.SMS, w.Links = rec, rec, keys
	if n := w.Poll(ctx); n != 2 {
		t.Fatalf("poll ran %d jobs; want the email and the SMS", n)
	}
	if len(rec.sms) != 1 || len(rec.links) != 1 {
		t.Fatalf("sent %d SMS, %d emails", len(rec.sms), len(rec.links))
	}
	// The email and the SMS are separate jobs and each signs its own link
	// (their iat may differ by a second): both must be this booking's.
	prefix := fmt.Sprintf("http://onsale.test/tickets/%d#", b)
	_, smsLink, _ := strings.Cut(rec.sms[0], prefix)
	for _, link := range []string{rec.links[0], prefix + smsLink} {
		if !strings.HasPrefix(link, prefix) || smsLink == "" {
			t.Fatalf("link %q (SMS %q); want %s<token>", link, rec.sms[0], prefix)
		}
		p, err := keys.Principal(strings.TrimPrefix(link, prefix))
		if err != nil || p.Kind != core.PrincipalTicketLink || p.Booking != b || p.Identity != "fan0" {
			t.Fatalf("link %q: token = %+v, %v", link, p, err)
		}
	}
}

// A card booking whose show is cancelled before its capture ran is never
// charged: the capture job takes nothing (the booking is no longer
// CONFIRMED), the void releases the authorization, the booking ends
// REFUNDED and uncaptured. Control: a card booking of a show that goes
// ahead is captured by the same worker.
func TestNoCaptureAfterCancellation(t *testing.T) {
	captures := func(e *env, b int64) int {
		n := 0
		for _, c := range e.prov.callsFor(key(core.JobCapture, b)) {
			if c.op == "capture" {
				n++
			}
		}
		return n
	}
	control := newEnv(t)
	kept := control.booking(t, core.FlowSync, false, "")
	control.worker(control.db, time.Minute).Poll(ctx)
	if st, captured := control.status(t, kept); st != core.BookingConfirmed || !captured || captures(control, kept) != 1 {
		t.Fatalf("control: booking %s (captured %v), %d captures; want CONFIRMED and captured once", st, captured, captures(control, kept))
	}

	e := newEnv(t)
	b := e.booking(t, core.FlowSync, false, "")
	if _, _, err := e.db.CancelShow(ctx, e.event, "the venue flooded", core.Actor{Operator: "test"}); err != nil {
		t.Fatal(err)
	}
	w := e.worker(e.db, time.Minute)
	for range 5 {
		if w.Poll(ctx) == 0 {
			break
		}
		e.due(t)
	}
	st, captured := e.status(t, b)
	if n := captures(e, b); n != 0 || captured || st != core.BookingRefunded || e.prov.movedFor("void", payment(b)) != 1 {
		t.Fatalf("after the cancellation: %d captures, booking %s (captured %v), %d voids; want no capture, REFUNDED by one void",
			n, st, captured, e.prov.movedFor("void", payment(b)))
	}
}
