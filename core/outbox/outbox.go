// Package outbox carries out what a committed transaction promised: refunds,
// voids and captures at the payment provider (and the refund of money a
// booking does not keep: core.JobStrayRefund), and the ticket email and SMS.
// Jobs live in the outbox table (core/postgres); a Worker leases due jobs,
// runs them under idempotency keys derived from the booking, and records
// success or schedules a retry. A Reconciler settles bookings whose payment
// outcome never arrived by webhook. What each job does to its booking is
// decided by core.Transition.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
)

// Store is what a Worker needs of the database (core/postgres implements
// it): leased jobs and their bookings.
type Store interface {
	// ClaimJobs leases up to n due jobs for lease; a leased job is no
	// other worker's until its lease runs out.
	ClaimJobs(ctx context.Context, n int, lease time.Duration) ([]core.Job, error)
	// ClaimJob leases one job by id if it is due and free (nil if not).
	ClaimJob(ctx context.Context, id int64, lease time.Duration) (*core.Job, error)
	// JobFor returns the pending job of a kind for a booking (0: none).
	JobFor(ctx context.Context, kind core.JobKind, booking int64) (int64, error)
	JobStatus(ctx context.Context, id int64) (core.JobStatus, error)
	// FinishJob marks a job done and applies its outcome to its booking.
	FinishJob(ctx context.Context, j core.Job) error
	// AbandonJob closes a job without its effect.
	AbandonJob(ctx context.Context, j core.Job, reason string) error
	// FailJob records a failed attempt and schedules the next.
	FailJob(ctx context.Context, j core.Job, cause error) error
	// FailCapture undoes a card booking whose capture was refused for good.
	FailCapture(ctx context.Context, booking int64) error
	Booking(ctx context.Context, id int64) (*core.Booking, error)
	Event(ctx context.Context, id int64) (*core.Event, error)
}

// Provider is what a Worker needs of the payment provider
// (a core.PaymentProvider). Every call that moves money
// carries an idempotency key, so a retry is carried out once.
type Provider interface {
	Refund(ctx context.Context, key, paymentID string) (*core.Refund, error)
	Cancel(ctx context.Context, key, paymentID string) (*core.Payment, error)
	Capture(ctx context.Context, key, paymentID string) (*core.Payment, error)
	Payment(ctx context.Context, paymentID string) (*core.Payment, error)
}

// Tickets signs a booking's tickets and draws their QR codes
// (core/ticket's Signer implements it).
type Tickets interface {
	SignTickets(b *core.Booking) []core.Ticket
	QR(payload string, size int) ([]byte, error)
}

// Mailer sends a booking's tickets by email (core/notify's Mailer).
type Mailer interface {
	SendTickets(ctx context.Context, b *core.Booking, event, link string, tickets []notify.Ticket) error
	SendCancellation(ctx context.Context, b *core.Booking, event, reason, link string) error
}

// Links mints a booking's ticket link token (core/token's Keys).
type Links interface {
	TicketLink(b *core.Booking, startsAt time.Time) (string, error)
}

// SMS sends a text message (core/notify's SMS).
type SMS interface {
	Send(ctx context.Context, to, text string) error
}

// DefaultLease is how long a claimed job is a worker's before another
// worker (or this core after a restart) may take it.
const DefaultLease = time.Minute

// Worker runs outbox jobs.
type Worker struct {
	DB       Store
	Provider Provider
	Mailer   Mailer // nil: ticket emails are skipped (logged)
	SMS      SMS    // nil: ticket SMS are skipped (logged)
	Tickets  Tickets
	// PublicURL is the gateway's public address: ticket links point at
	// its /tickets page, never at the core.
	PublicURL string
	Links     Links         // nil: links without a token (the page asks to sign in)
	Lease     time.Duration // 0: DefaultLease
	Log       *slog.Logger
	Metrics   *metrics.Metrics

	kickOnce sync.Once
	kicks    chan kick
}

type kick struct {
	kind    core.JobKind
	booking int64
}

// jobTimeout bounds one job, well inside the lease.
const jobTimeout = 20 * time.Second

// batch is how many due jobs one poll leases.
const batch = 16

// Run works off due jobs until ctx ends, polling every interval when idle,
// and runs the jobs handed to Kick. Claimed jobs run side by side, each
// bounded by jobTimeout, so none waits out its lease behind the others.
// Run returns once every job it started has returned: a kicked job is let
// finish (it is bounded by jobTimeout, not by ctx), a polled one is
// cancelled with ctx.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	var running sync.WaitGroup
	defer running.Wait()
	running.Add(1)
	go func() {
		defer running.Done()
		for {
			if w.Poll(ctx) > 0 {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
	kicks := w.kickQueue()
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-kicks:
			running.Add(1)
			go func() {
				defer running.Done()
				// The kick's requester is gone; the job is this loop's,
				// with a deadline of its own. Shutdown waits for it.
				kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jobTimeout)
				defer cancel()
				w.RunNow(kctx, k.kind, k.booking)
			}()
		}
	}
}

// Poll leases one batch of due jobs and runs them side by side; it
// returns how many it ran.
func (w *Worker) Poll(ctx context.Context) int {
	jobs, err := w.DB.ClaimJobs(ctx, batch, w.lease())
	if err != nil && ctx.Err() == nil {
		w.Log.Warn("outbox claim failed", "err", err)
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jctx, cancel := context.WithTimeout(ctx, jobTimeout)
			defer cancel()
			w.run(jctx, j)
		}()
	}
	wg.Wait()
	return len(jobs)
}

// kickQueue is where Kick hands jobs to Run. A full queue drops the kick,
// and a kick left in the queue when Run stops is not run: either way the
// job is in the table, and the next poll (or the next start) takes it.
func (w *Worker) kickQueue() chan kick {
	w.kickOnce.Do(func() { w.kicks = make(chan kick, 64) })
	return w.kicks
}

// Kick asks Run to run the pending job of a kind for a booking now rather
// than at the next poll, without waiting for it: for a caller that must
// answer at once (the webhook of a late payment). The job runs in Run's
// goroutines, so shutdown waits for it.
func (w *Worker) Kick(kind core.JobKind, booking int64) {
	select {
	case w.kickQueue() <- kick{kind, booking}:
	default:
		w.Log.Warn("outbox kick dropped: the queue is full; the next poll runs the job", "kind", kind, "booking", booking)
	}
}

// RunNow runs the pending job of a kind for a booking at once, if no worker
// has it: the request that queued it does not wait for the next poll. It
// reports whether the job is done.
func (w *Worker) RunNow(ctx context.Context, kind core.JobKind, booking int64) bool {
	id, err := w.DB.JobFor(ctx, kind, booking)
	if err != nil || id == 0 {
		return false
	}
	j, err := w.DB.ClaimJob(ctx, id, w.lease())
	if err != nil {
		return false
	}
	if j != nil {
		return w.run(ctx, *j)
	}
	// A worker has it: wait a little for its result rather than answer
	// the fan "pending" for what is about to be done.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if st, err := w.DB.JobStatus(ctx, id); err != nil || st != core.JobPending {
			return st == core.JobDone
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

func (w *Worker) lease() time.Duration {
	if w.Lease > 0 {
		return w.Lease
	}
	return DefaultLease
}

// errRefused marks a capture the provider refused for good; the booking
// has been compensated and the job is closed without its effect.
var errRefused = errors.New("capture refused")

// Job results, the metrics' labels.
const (
	resultDone    = "done"
	resultRefused = "refused"
	resultRetry   = "retry"
	resultDead    = "dead" // past core.MaxJobAttempts (a money job keeps retrying all the same)
	resultError   = "error"
)

func (w *Worker) run(ctx context.Context, j core.Job) bool {
	err := w.do(ctx, j)
	result := resultDone
	switch {
	case errors.Is(err, errRefused):
		result = resultRefused
		err = w.DB.AbandonJob(ctx, j, "capture refused by the provider; booking failed, authorization voided")
	case err == nil:
		err = w.DB.FinishJob(ctx, j)
	default:
		result = resultRetry
		if j.Attempts >= core.MaxJobAttempts {
			result = resultDead
		}
		if core.ProviderMisconfigured(err) {
			// Not the payment's fault but the core's: a wrong or revoked
			// API key, another account's key, a request the provider no
			// longer takes. Every sale's money job fails the same way
			// until an operator fixes it; the booking is left as it is and
			// the job keeps retrying, so the fix alone finishes the work.
			var pe *core.ProviderError
			errors.As(err, &pe)
			w.Metrics.ProviderMisconfigured.WithLabelValues(string(j.Kind), strconv.Itoa(pe.Status)).Inc()
			w.Log.Error("PAYMENT PROVIDER REFUSES THE CORE'S REQUESTS: check ONSALE_PROVIDER_KEY and ONSALE_PROVIDER_URL; the job is retried and its booking kept",
				"job", j.ID, "kind", j.Kind, "booking", j.BookingID, "attempt", j.Attempts, "status", pe.Status, "err", err)
		} else {
			w.Log.Warn("outbox job failed", "job", j.ID, "kind", j.Kind, "booking", j.BookingID, "attempt", j.Attempts, "err", err)
		}
		if ferr := w.DB.FailJob(ctx, j, err); ferr != nil {
			w.Log.Error("outbox: recording a failure failed", "job", j.ID, "err", ferr)
		}
	}
	if err != nil && result != resultRetry && result != resultDead {
		result = resultError
	}
	w.Metrics.OutboxJobs.WithLabelValues(string(j.Kind), result).Inc()
	return err == nil
}

// key is the provider idempotency key of a booking's job: one per kind and
// booking, so every retry of a job (by any worker) is the same call, and a
// booking's payment is captured at most once and refunded at most once
// whatever the outbox does.
func key(kind core.JobKind, booking int64) string {
	return string(kind) + ":" + strconv.FormatInt(booking, 10)
}

// voidKey is the key of a void job. A void moves no money, and a later
// round (money that reached a FAILED card booking whose authorization was
// voided already) must reach the provider again rather than be answered
// from the first void: should the payment have been captured since, only
// a fresh cancel learns it and refunds instead (under the booking's one
// refund key, so never twice). Round 1 keeps the key the first void had.
func voidKey(j core.Job) string {
	if j.Round <= 1 {
		return key(core.JobVoid, j.BookingID)
	}
	return key(core.JobVoid, j.BookingID) + ":" + strconv.Itoa(j.Round)
}

func (w *Worker) do(ctx context.Context, j core.Job) error {
	b, err := w.DB.Booking(ctx, j.BookingID)
	if err != nil {
		return err
	}
	if j.Kind.MovesMoney() && j.Kind != core.JobStrayRefund && b.PaymentID == "" {
		return errors.New("the booking has no payment id yet")
	}
	switch j.Kind {
	case core.JobStrayRefund:
		return w.refundStray(ctx, j.PaymentID)
	case core.JobRefund:
		return w.refund(ctx, b)
	case core.JobVoid:
		p, err := w.Provider.Cancel(ctx, voidKey(j), b.PaymentID)
		switch {
		case core.ProviderConflict(err, "already_canceled"):
			return nil
		case core.ProviderConflict(err, "already_captured"):
			return w.refund(ctx, b) // captured after all: give the money back instead
		case err == nil && p.Status != core.PaymentCanceled:
			return fmt.Errorf("void left payment %s %s", p.ID, p.Status)
		}
		return err
	case core.JobCapture:
		if b.Status != core.BookingConfirmed {
			// The booking moved on before its money was taken (its show
			// was cancelled: REFUND_DUE, its void queued): capturing now
			// would charge the fan only for the void to refund it, after
			// a message saying nothing was charged. Nothing to do; the
			// void releases the authorization. (A cancellation that
			// commits while the capture is at the provider still ends in
			// a refund: the void finds the payment captured.)
			w.Log.Info("capture skipped: the booking is no longer confirmed", "booking", b.ID, "status", b.Status)
			return nil
		}
		_, err := w.Provider.Capture(ctx, key(core.JobCapture, b.ID), b.PaymentID)
		switch {
		case core.ProviderConflict(err, "already_captured"):
			return nil
		case core.ProviderRefusedCapture(err):
			// Refused for good (declined, the authorization expired or was
			// cancelled): no money will come; undo the booking. Any other
			// refusal (a wrong key: core.ProviderMisconfigured) leaves the
			// booking CONFIRMED and the job retrying (run).
			w.Log.Warn("capture refused; failing the booking", "booking", b.ID, "err", err)
			if ferr := w.DB.FailCapture(ctx, b.ID); ferr != nil {
				return ferr
			}
			return errRefused
		}
		return err
	case core.JobEmail:
		if b.Email == "" || w.Mailer == nil {
			w.Log.Info("ticket email skipped", "booking", b.ID, "has_address", b.Email != "", "mailer", w.Mailer != nil)
			return nil
		}
		tickets, ev, err := w.render(ctx, b)
		if err != nil {
			return err
		}
		link, err := w.link(b, ev)
		if err != nil {
			return err
		}
		return w.Mailer.SendTickets(ctx, b, ev.Name, link, tickets)
	case core.JobCancelEmail, core.JobCancelSMS:
		return w.tellCancelled(ctx, j.Kind, b)
	case core.JobSMS:
		if b.Phone == "" || w.SMS == nil {
			w.Log.Info("ticket SMS skipped", "booking", b.ID, "has_phone", b.Phone != "", "gateway", w.SMS != nil)
			return nil
		}
		ev, link, err := w.eventLink(ctx, b)
		if err != nil {
			return err
		}
		return w.SMS.Send(ctx, b.Phone, notify.TicketSMS(b, ev.Name, link))
	}
	return fmt.Errorf("unknown job kind %q", j.Kind)
}

// refund gives back what was captured of a booking's payment, under the
// booking's refund key (a void that found the money captured refunds under
// the same key, so the two can never refund twice).
func (w *Worker) refund(ctx context.Context, b *core.Booking) error {
	_, err := w.Provider.Refund(ctx, key(core.JobRefund, b.ID), b.PaymentID)
	if core.ProviderConflict(err, "refund_exceeds_capture") {
		return w.verifyRefunded(ctx, b.PaymentID)
	}
	return err
}

// refundStray gives back a payment its booking does not keep
// (core.Settlement), under keys of that payment, so never twice. What to do
// is read from the payment's status at the provider, so a retry after a
// give-back that succeeded but was not recorded (FinishJob failed, the
// process died) finds it done instead of asking for an impossible refund
// forever: a card authorization is voided (nothing was taken), money taken
// is refunded whole, a payment that failed or was voided took nothing, a
// pending one is looked at again later.
func (w *Worker) refundStray(ctx context.Context, paymentID string) error {
	k := string(core.JobStrayRefund) + ":" + paymentID
	p, err := w.Provider.Payment(ctx, paymentID)
	if err != nil {
		return err
	}
	switch p.Status {
	case core.PaymentCanceled, core.PaymentFailed:
		return nil // no money taken, or its authorization already released
	case core.PaymentRequiresCapture:
		_, err := w.Provider.Cancel(ctx, k+":void", paymentID)
		switch {
		case err == nil || core.ProviderConflict(err, "already_canceled"):
			return nil
		case !core.ProviderConflict(err, "already_captured"):
			return err
		}
		// Captured between our look and the void: refund it.
	case core.PaymentSucceeded:
		if p.AmountCaptured > 0 && p.AmountRefunded >= p.AmountCaptured {
			return nil // refunded whole already
		}
	case core.PaymentPending:
		return fmt.Errorf("stray payment %s is still pending at the provider: refunded once it settles", paymentID)
	default:
		return fmt.Errorf("stray payment %s is %q at the provider: not a status the core knows", paymentID, p.Status)
	}
	_, err = w.Provider.Refund(ctx, k, paymentID)
	if core.ProviderConflict(err, "refund_exceeds_capture") {
		return w.verifyRefunded(ctx, paymentID)
	}
	return err
}

// verifyRefunded accepts "nothing left to refund" only when the provider
// shows the whole capture refunded.
func (w *Worker) verifyRefunded(ctx context.Context, paymentID string) error {
	p, err := w.Provider.Payment(ctx, paymentID)
	if err != nil {
		return err
	}
	if p.AmountRefunded < p.AmountCaptured {
		return fmt.Errorf("payment %s: %d of %d refunded", p.ID, p.AmountRefunded, p.AmountCaptured)
	}
	return nil
}

// render signs a booking's tickets and draws their QR codes.
func (w *Worker) render(ctx context.Context, b *core.Booking) ([]notify.Ticket, *core.Event, error) {
	ev, err := w.DB.Event(ctx, b.EventID)
	if err != nil {
		return nil, nil, err
	}
	var out []notify.Ticket
	for _, t := range w.Tickets.SignTickets(b) {
		png, err := w.Tickets.QR(t.Payload, 320)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, notify.Ticket{Ticket: t, PNG: png})
	}
	return out, ev, nil
}

// link is the booking's ticket link on the gateway's public address: the
// capability token rides in the fragment, so it never reaches a server log
// or a Referer; the page sends it as a Bearer token.
func (w *Worker) link(b *core.Booking, ev *core.Event) (string, error) {
	tok := ""
	if w.Links != nil {
		var err error
		if tok, err = w.Links.TicketLink(b, ev.StartsAt); err != nil {
			return "", err
		}
	}
	return notify.TicketLink(w.PublicURL, b.ID, tok), nil
}

// eventLink reads a booking's show and its ticket link, what every message
// of a booking names.
func (w *Worker) eventLink(ctx context.Context, b *core.Booking) (*core.Event, string, error) {
	ev, err := w.DB.Event(ctx, b.EventID)
	if err != nil {
		return nil, "", err
	}
	link, err := w.link(b, ev)
	return ev, link, err
}

// tellCancelled sends a cancelled show's booking holder its email or SMS
// (none without an address or a channel: the job is done, as for tickets).
func (w *Worker) tellCancelled(ctx context.Context, kind core.JobKind, b *core.Booking) error {
	email := kind == core.JobCancelEmail
	if (email && (b.Email == "" || w.Mailer == nil)) || (!email && (b.Phone == "" || w.SMS == nil)) {
		w.Log.Info("cancellation message skipped", "kind", kind, "booking", b.ID, "has_address", b.Email != "" || b.Phone != "")
		return nil
	}
	ev, link, err := w.eventLink(ctx, b)
	if err != nil {
		return err
	}
	if email {
		return w.Mailer.SendCancellation(ctx, b, ev.Name, ev.CancelReason, link)
	}
	return w.SMS.Send(ctx, b.Phone, notify.CancelSMS(b, ev.Name, link))
}

// ReconcileStore is what a Reconciler needs of the database
// (core/postgres implements it).
type ReconcileStore interface {
	// PendingBookings takes up to limit bookings left PAYMENT_PENDING
	// longer than age that are due for a look.
	PendingBookings(ctx context.Context, age time.Duration, limit int) ([]core.Booking, error)
	Settle(ctx context.Context, s core.Settlement) (core.BookingStatus, error)
}

// PaymentLister looks up the payments made for an order reference, and
// ends one abandoned on the provider's page (a core.PaymentProvider).
type PaymentLister interface {
	// PaymentsFor lists a booking's payments (see core.PaymentProvider).
	PaymentsFor(ctx context.Context, q core.PaymentLookup) ([]core.Payment, error)
	// Cancel ends a payment nobody may pay on any more.
	Cancel(ctx context.Context, key, id string) (*core.Payment, error)
}

// Reconciler asks the provider about bookings left PAYMENT_PENDING longer
// than After (a webhook lost, or the core crashed between creating the
// booking and the payment) and settles them from the provider's answer.
type Reconciler struct {
	DB       ReconcileStore
	Provider PaymentLister
	Worker   *Worker
	After    time.Duration
	Log      *slog.Logger
	Metrics  *metrics.Metrics
}

// Run reconciles every interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := r.Once(ctx); err != nil && ctx.Err() == nil {
			r.Log.Warn("reconcile failed", "err", err)
		}
	}
}

// abandon ends, after its booking failed (outcome), a payment left pending
// at the provider twice the deadline after the booking (a 3-D Secure step
// or a provider's page the fan left; the hold is long gone): it is
// cancelled there, so that nobody pays on it any more. The booking is
// failed first, under its own lock and only from PAYMENT_PENDING: a
// payment that succeeded meanwhile (its webhook confirmed the booking) is
// never cancelled here, and one that succeeds after is money after failure,
// given back by the outbox. The cancel is best effort: a provider that
// cannot cancel a pending payment (the simulator's UPI) leaves it, and
// what it takes later is given back the same way.
func (r *Reconciler) abandon(ctx context.Context, b *core.Booking, outcome core.BookingStatus) {
	if outcome != core.BookingFailed {
		return
	}
	_, err := r.Provider.Cancel(ctx, "abandon:"+strconv.FormatInt(b.ID, 10), b.PaymentID)
	switch {
	case err == nil || core.ProviderConflict(err, "already_canceled"):
		r.Log.Info("reconcile: payment abandoned at the provider; cancelled there", "booking", b.ID, "payment", b.PaymentID)
	default:
		r.Log.Info("reconcile: an abandoned payment was not cancelled at the provider; money it takes later is given back",
			"booking", b.ID, "payment", b.PaymentID, "err", err)
	}
}

// Once reconciles the stale pending bookings now; it returns how many it settled.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	pending, err := r.DB.PendingBookings(ctx, r.After, 100)
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, b := range pending {
		payments, err := r.Provider.PaymentsFor(ctx, core.PaymentLookup{Reference: b.Reference(), Key: b.PaymentKey(), PaymentID: b.PaymentID})
		if err != nil {
			r.Log.Warn("reconcile: provider lookup failed", "booking", b.ID, "err", err)
			continue // its turn comes again; the others are not held up
		}
		var s *core.Settlement
		var extra []core.Settlement // more money for the booking: Settle refunds what it does not keep
		failed := 0
		for _, p := range payments {
			switch p.Status {
			case core.PaymentSucceeded, core.PaymentRequiresCapture:
				ps := core.Settlement{PaymentID: p.ID, BookingID: b.ID, Succeeded: true, Type: "reconcile", Amount: p.Amount, Currency: p.Currency}
				switch {
				case s == nil:
					s = &ps
				case p.ID == b.PaymentID: // the booking's own payment settles it first
					extra = append(extra, *s)
					s = &ps
				default:
					extra = append(extra, ps)
				}
			case core.PaymentFailed, core.PaymentCanceled:
				failed++
			}
		}
		if s == nil && failed == len(payments) && (failed > 0 || time.Since(b.CreatedAt) > 2*r.After) {
			// Every attempt failed, or none reached the provider in twice
			// the deadline: the fan paid nothing.
			s = &core.Settlement{BookingID: b.ID, Type: "reconcile"}
		}
		abandoned := false
		if s == nil && b.PaymentID != "" && time.Since(b.CreatedAt) > 2*r.After {
			s, abandoned = &core.Settlement{BookingID: b.ID, Type: "reconcile"}, true // see abandon
		}
		if s == nil {
			continue // still pending at the provider
		}
		outcome, err := r.DB.Settle(ctx, *s)
		if err != nil {
			r.Log.Warn("reconcile: settle failed", "booking", b.ID, "err", err)
			continue
		}
		if abandoned {
			r.abandon(ctx, &b, outcome)
		}
		for _, x := range extra {
			xo, err := r.DB.Settle(ctx, x)
			if err != nil {
				r.Log.Warn("reconcile: settle failed", "booking", b.ID, "payment", x.PaymentID, "err", err)
			}
			if xo == core.OutcomeOwnPaymentMismatch {
				r.Metrics.ProviderContradictions.WithLabelValues("reconcile").Inc()
			}
		}
		settled++
		if outcome == core.OutcomeOwnPaymentMismatch {
			r.Metrics.ProviderContradictions.WithLabelValues("reconcile").Inc()
		}
		r.Metrics.Reconciled.WithLabelValues(string(outcome)).Inc()
		r.Log.Info("reconciled booking", "booking", b.ID, "outcome", outcome, "payment", s.PaymentID)
		if outcome == core.BookingRefundDue {
			for _, kind := range core.GiveBackJobs {
				r.Worker.RunNow(ctx, kind, b.ID)
			}
		}
	}
	return settled, nil
}
