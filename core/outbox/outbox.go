// Package outbox carries out what a committed transaction promised: refunds,
// voids and captures at the payment provider, and the ticket email and SMS.
// Jobs live in the outbox table (core/postgres); a Worker leases due jobs,
// runs them under idempotency keys derived from the booking, and records
// success or schedules a retry. A Reconciler settles bookings whose payment
// outcome never arrived by webhook.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/onsale/onsale/core"
	"github.com/onsale/onsale/core/metrics"
	"github.com/onsale/onsale/core/notify"
	"github.com/onsale/onsale/core/postgres"
	"github.com/onsale/onsale/core/provider"
	"github.com/onsale/onsale/core/ticket"
)

// DefaultLease is how long a claimed job is a worker's before another
// worker (or this core after a restart) may take it.
const DefaultLease = time.Minute

// Worker runs outbox jobs.
type Worker struct {
	DB        *postgres.DB
	Provider  *provider.Client
	Mailer    *notify.Mailer // nil: ticket emails are skipped (logged)
	SMS       *notify.SMS    // nil: ticket SMS are skipped (logged)
	Tickets   *ticket.Signer
	PublicURL string        // where fans find their tickets, for the SMS
	Lease     time.Duration // 0: DefaultLease
	Log       *slog.Logger
	Metrics   *metrics.Metrics
}

// jobTimeout bounds one job, well inside the lease.
const jobTimeout = 20 * time.Second

// Run works off due jobs until ctx ends, polling every interval when idle.
// Claimed jobs run side by side, each bounded by jobTimeout, so none waits
// out its lease behind the others.
func (w *Worker) Run(ctx context.Context, interval time.Duration) {
	for {
		jobs, err := w.DB.ClaimJobs(ctx, 16, w.lease())
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
		if len(jobs) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// RunNow runs the pending job of a kind for a booking at once, if no worker
// has it: the request that queued it does not wait for the next poll. It
// reports whether the job is done.
func (w *Worker) RunNow(ctx context.Context, kind string, booking int64) bool {
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
		if st, err := w.DB.JobStatus(ctx, id); err != nil || st != "PENDING" {
			return st == "DONE"
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

func (w *Worker) run(ctx context.Context, j postgres.Job) bool {
	err := w.do(ctx, j)
	result := "done"
	switch {
	case errors.Is(err, errRefused):
		result = "refused"
		err = w.DB.AbandonJob(ctx, j, "capture refused by the provider; booking failed, authorization voided")
	case err == nil:
		err = w.DB.FinishJob(ctx, j)
	default:
		result = "retry"
		if j.Attempts >= postgres.MaxAttempts {
			result = "dead"
		}
		w.Log.Warn("outbox job failed", "job", j.ID, "kind", j.Kind, "booking", j.BookingID, "attempt", j.Attempts, "err", err)
		if ferr := w.DB.FailJob(ctx, j, err); ferr != nil {
			w.Log.Error("outbox: recording a failure failed", "job", j.ID, "err", ferr)
		}
	}
	if err != nil && result != "retry" && result != "dead" {
		result = "error"
	}
	w.Metrics.OutboxJobs.WithLabelValues(j.Kind, result).Inc()
	return err == nil
}

func key(kind string, booking int64) string { return kind + ":" + strconv.FormatInt(booking, 10) }

func (w *Worker) do(ctx context.Context, j postgres.Job) error {
	b, err := w.DB.Booking(ctx, j.BookingID)
	if err != nil {
		return err
	}
	money := j.Kind == "refund" || j.Kind == "void" || j.Kind == "capture"
	if money && b.PaymentID == "" {
		return errors.New("the booking has no payment id yet")
	}
	switch j.Kind {
	case "refund":
		_, err = w.Provider.Refund(ctx, key("refund", b.ID), b.PaymentID)
		if conflict(err, "refund_exceeds_capture") {
			err = w.verifyRefunded(ctx, b)
		}
	case "void":
		var p *provider.Payment
		p, err = w.Provider.Cancel(ctx, key("void", b.ID), b.PaymentID)
		switch {
		case conflict(err, "already_canceled"):
			err = nil
		case conflict(err, "already_captured"):
			// Captured after all: give the money back instead.
			_, err = w.Provider.Refund(ctx, key("refund", b.ID), b.PaymentID)
			if conflict(err, "refund_exceeds_capture") {
				err = w.verifyRefunded(ctx, b)
			}
		case err == nil && p.Status != provider.StatusCanceled:
			err = fmt.Errorf("void left payment %s %s", p.ID, p.Status)
		}
	case "capture":
		_, err = w.Provider.Capture(ctx, key("capture", b.ID), b.PaymentID)
		var ae *provider.APIError
		switch {
		case conflict(err, "already_captured"):
			err = nil
		case errors.As(err, &ae) && !provider.Temporary(err):
			// Refused for good (the authorization expired or was
			// cancelled): no money will come; undo the booking.
			w.Log.Warn("capture refused; failing the booking", "booking", b.ID, "err", err)
			if ferr := w.DB.FailCapture(ctx, b.ID); ferr != nil {
				return ferr
			}
			return errRefused
		}
	case "email":
		if b.Email == "" || w.Mailer == nil {
			w.Log.Info("ticket email skipped", "booking", b.ID, "has_address", b.Email != "", "mailer", w.Mailer != nil)
			return nil
		}
		tickets, event, err := w.render(ctx, b)
		if err != nil {
			return err
		}
		return w.Mailer.SendTickets(ctx, b, event, tickets)
	case "sms":
		if b.Phone == "" || w.SMS == nil {
			w.Log.Info("ticket SMS skipped", "booking", b.ID, "has_phone", b.Phone != "", "gateway", w.SMS != nil)
			return nil
		}
		ev, err := w.DB.Event(ctx, b.EventID)
		if err != nil {
			return err
		}
		return w.SMS.Send(ctx, b.Phone, notify.TicketSMS(b, ev.Name, fmt.Sprintf("%s/v1/bookings/%d", w.PublicURL, b.ID)))
	default:
		return fmt.Errorf("unknown job kind %q", j.Kind)
	}
	return err
}

// verifyRefunded accepts "nothing left to refund" only when the provider
// shows the whole capture refunded.
func (w *Worker) verifyRefunded(ctx context.Context, b *core.Booking) error {
	p, err := w.Provider.Payment(ctx, b.PaymentID)
	if err != nil {
		return err
	}
	if p.AmountRefunded < p.AmountCaptured {
		return fmt.Errorf("payment %s: %d of %d refunded", p.ID, p.AmountRefunded, p.AmountCaptured)
	}
	return nil
}

func conflict(err error, code string) bool {
	var ae *provider.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusConflict && ae.Code == code
}

// render signs a booking's tickets and draws their QR codes.
func (w *Worker) render(ctx context.Context, b *core.Booking) ([]notify.Ticket, string, error) {
	ev, err := w.DB.Event(ctx, b.EventID)
	if err != nil {
		return nil, "", err
	}
	var out []notify.Ticket
	for _, t := range Sign(w.Tickets, b) {
		png, err := ticket.QR(t.Payload, 320)
		if err != nil {
			return nil, "", err
		}
		out = append(out, notify.Ticket{Ticket: t, PNG: png})
	}
	return out, ev.Name, nil
}

// Sign fills in the signed payload of each of a booking's tickets.
func Sign(s *ticket.Signer, b *core.Booking) []core.Ticket {
	out := make([]core.Ticket, len(b.Tickets))
	for i, t := range b.Tickets {
		t.Payload = s.Sign(ticket.Claims{Ticket: t.ID, Booking: b.ID, Event: t.EventID, Seat: t.Seat, N: t.N, Issued: b.CreatedAt.Unix()})
		out[i] = t
	}
	return out
}

// Reconciler asks the provider about bookings left PAYMENT_PENDING longer
// than After (a webhook lost, or the core crashed between creating the
// booking and the payment) and settles them from the provider's answer.
type Reconciler struct {
	DB       *postgres.DB
	Provider *provider.Client
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

// Once reconciles the stale pending bookings now; it returns how many it settled.
func (r *Reconciler) Once(ctx context.Context) (int, error) {
	pending, err := r.DB.PendingBookings(ctx, r.After, 100)
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, b := range pending {
		payments, err := r.Provider.PaymentsByReference(ctx, b.Reference())
		if err != nil {
			r.Log.Warn("reconcile: provider lookup failed", "booking", b.ID, "err", err)
			continue // its turn comes again; the others are not held up
		}
		var s *core.Settlement
		failed := 0
		for _, p := range payments {
			switch p.Status {
			case provider.StatusSucceeded, provider.StatusRequiresCapture:
				s = &core.Settlement{PaymentID: p.ID, BookingID: b.ID, Succeeded: true, Type: "reconcile"}
			case provider.StatusFailed, provider.StatusCanceled:
				failed++
			}
		}
		if s == nil && failed == len(payments) && (failed > 0 || time.Since(b.CreatedAt) > 2*r.After) {
			// Every attempt failed, or none reached the provider in twice
			// the deadline: the fan paid nothing.
			s = &core.Settlement{BookingID: b.ID, Type: "reconcile"}
		}
		if s == nil {
			continue // still pending at the provider
		}
		outcome, err := r.DB.Settle(ctx, *s)
		if err != nil {
			r.Log.Warn("reconcile: settle failed", "booking", b.ID, "err", err)
			continue
		}
		settled++
		r.Metrics.Reconciled.WithLabelValues(outcome).Inc()
		r.Log.Info("reconciled booking", "booking", b.ID, "outcome", outcome, "payment", s.PaymentID)
		if outcome == core.BookingRefundDue {
			r.Worker.RunNow(ctx, "refund", b.ID)
			r.Worker.RunNow(ctx, "void", b.ID)
		}
	}
	return settled, nil
}
