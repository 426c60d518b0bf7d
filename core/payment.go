package core

import "time"

// This file is the payment state machine: the statuses a booking moves
// through, the outcomes that move it, the outbox jobs each move queues, and
// the one function (Transition) that decides. The SQL layer asks it which
// status to write and which jobs to queue, and keeps its own
// compare-and-set guards (WHERE status = ...) so that a decision taken on a
// stale read cannot be written; the outbox asks it what a finished job does
// to its booking.

// BookingStatus is where a booking is in the payment state machine.
type BookingStatus string

// Booking statuses: one booking per hold, PAYMENT_PENDING until the payment
// settles, then CONFIRMED, or REFUND_DUE (money came for a hold that was
// gone) and REFUNDED, or FAILED. The bookings table's CHECK constraint lists
// the same values (a test in core/postgres compares them).
const (
	BookingPending   BookingStatus = "PAYMENT_PENDING"
	BookingConfirmed BookingStatus = "CONFIRMED"
	BookingRefundDue BookingStatus = "REFUND_DUE"
	BookingRefunded  BookingStatus = "REFUNDED"
	BookingFailed    BookingStatus = "FAILED"
)

// BookingStatuses lists every booking status.
var BookingStatuses = []BookingStatus{BookingPending, BookingConfirmed, BookingRefundDue, BookingRefunded, BookingFailed}

// Flow is how a booking is paid.
type Flow string

// Payment flows: async (UPI-like: the provider takes the money at once and
// calls back by webhook) and sync (card: authorize, book and capture within
// the request; the money is taken only by the capture).
const (
	FlowAsync Flow = "async"
	FlowSync  Flow = "sync"
)

// Flows lists every flow.
var Flows = []Flow{FlowAsync, FlowSync}

// JobKind is a kind of outbox job: work a committed transaction promised.
type JobKind string

// Job kinds. The outbox table's CHECK constraint lists the same values.
const (
	JobRefund  JobKind = "refund"  // give back captured money (async flow)
	JobVoid    JobKind = "void"    // release an authorization (sync flow); refunds if it was captured after all
	JobCapture JobKind = "capture" // take the money of an authorization (sync flow)
	JobEmail   JobKind = "email"   // the ticket email
	JobSMS     JobKind = "sms"     // the ticket SMS
	// JobStrayRefund gives back a payment its booking does not keep (see
	// Settlement): a second payment for a booking, one whose id is not
	// the booking's payment, or one of another amount or currency. It
	// names its payment (Job.PaymentID) and does not move the booking.
	JobStrayRefund JobKind = "refund_stray"
	// JobCancelEmail and JobCancelSMS tell a ticket holder their show was
	// cancelled and their money is on its way back.
	JobCancelEmail JobKind = "cancel_email"
	JobCancelSMS   JobKind = "cancel_sms"
)

// JobKinds lists every job kind.
var JobKinds = []JobKind{JobRefund, JobVoid, JobCapture, JobEmail, JobSMS, JobStrayRefund, JobCancelEmail, JobCancelSMS}

// GiveBackJobs are the jobs a move to REFUND_DUE may queue: the refund of
// an async payment, the void of a card authorization (Transition picks one
// by flow). A caller that knows only the new status runs both; the one
// the flow did not queue finds no job.
var GiveBackJobs = []JobKind{JobRefund, JobVoid}

// MovesMoney reports whether a job moves money at the provider. Such a job
// is never given up: a refund nobody makes is money kept from a fan, a
// capture nobody makes is a seat given away.
func (k JobKind) MovesMoney() bool {
	return k == JobRefund || k == JobVoid || k == JobCapture || k == JobStrayRefund
}

// Outcome is the outcome a finished job of this kind is for its booking
// (ok false: the job does not move the booking, as a ticket email).
func (k JobKind) Outcome() (o Outcome, ok bool) {
	switch k {
	case JobRefund:
		return OutcomeRefunded, true
	case JobVoid:
		return OutcomeVoided, true
	case JobCapture:
		return OutcomeCaptured, true
	}
	return "", false
}

// JobStatus is where an outbox job is.
type JobStatus string

// Job statuses: PENDING until it succeeds (DONE) or, for a job that moves
// no money, until it has failed MaxJobAttempts times (DEAD, for a person to
// look at).
const (
	JobPending JobStatus = "PENDING"
	JobDone    JobStatus = "DONE"
	JobDead    JobStatus = "DEAD"
)

// Job is one outbox entry, as leased by a worker.
type Job struct {
	ID        int64
	Kind      JobKind
	BookingID int64
	// Round is 1, or n when the booking's move queued this kind again after
	// n-1 such jobs finished (a void of money that reached a FAILED card
	// booking, after the void that released its authorization).
	Round    int
	Attempts int // including this one
	// PaymentID is the payment a JobStrayRefund gives back ("" for the
	// other kinds: they act on the booking's own payment).
	PaymentID string
}

// MaxJobAttempts is how often a job is tried before a job that moves no
// money is left DEAD; a money job past it keeps retrying and is counted
// "dead" in the metrics. With JobBackoff that is about a day.
const MaxJobAttempts = 30

// JobBackoff is how long a job waits after its attempt-th failure: 1 s,
// doubling, at most one hour (so a provider back after an outage is tried
// again within the hour, and an outage does not flood it).
func JobBackoff(attempt int) time.Duration {
	return min(time.Second<<min(max(attempt-1, 0), 12), time.Hour)
}

// Outcome is what happened to a booking's payment: the input of
// Transition.
type Outcome string

// Outcomes. Approved and Late are both "the provider says the money is
// there" (UPI: taken; card: authorized); the SQL layer tells them apart by
// trying to book the hold's seats.
const (
	OutcomeApproved       Outcome = "approved"        // paid (card: authorized), and the hold's seats were booked under it
	OutcomeLate           Outcome = "late"            // paid, but the hold was gone (expired, swept, re-held): no seats
	OutcomeDeclined       Outcome = "declined"        // the provider refused the payment
	OutcomeCaptured       Outcome = "captured"        // the capture job took the authorized money
	OutcomeCaptureRefused Outcome = "capture_refused" // the provider refused the capture for good: no money will come
	OutcomeRefunded       Outcome = "refunded"        // the refund job gave the money back
	OutcomeVoided         Outcome = "voided"          // the void job released (or refunded) the authorization
	OutcomeCancelled      Outcome = "cancelled"       // the show is cancelled (a confirmed booking, or money that came after): it goes back, the tickets die
)

// Outcomes lists every outcome.
var Outcomes = []Outcome{OutcomeApproved, OutcomeLate, OutcomeDeclined, OutcomeCaptured, OutcomeCaptureRefused, OutcomeRefunded, OutcomeVoided, OutcomeCancelled}

// Step is one transition of a booking.
type Step struct {
	Next BookingStatus
	// Jobs are queued in the outbox in the transaction that writes Next.
	Jobs []JobKind
	// Captured: the money is taken by this step (an approved UPI payment at
	// once; a card payment when its capture job succeeds). Tickets are
	// shown only for a confirmed, captured booking.
	Captured bool
}

// Transition decides what outcome o does to a booking in status from, paid
// by flow. ok is false when the outcome does not move the booking: a repeat
// or a late event for a booking already settled, or a combination that
// cannot happen. Every move, and nothing else:
//
//	                      approved, async: [email sms], captured
//	                      approved, sync:  [capture]
//	+-----------------+ ---------------------------------------> +-----------+ --+ captured, sync:
//	| PAYMENT_PENDING |                                          | CONFIRMED |   | [email sms], captured
//	+-----------------+                                          +-----------+ <-+
//	    |        |                                                     |
//	    |        | declined                       capture_refused,     |
//	    |        +----------------------------> +--------+ <-----------+
//	    |                                       | FAILED |   sync: [void]
//	    | late, async: [refund]                 +--------+
//	    | late, sync:  [void]                        |
//	    |                                            | approved or late (money after failure),
//	    v                                            | async: [refund], sync: [void]
//	+------------+ <---------------------------------+
//	| REFUND_DUE |
//	+------------+ --- refunded or voided ---> +----------+
//	                                           | REFUNDED |  (final)
//	                                           +----------+
//
// FAILED is final for everything but money that arrives after it. A void
// finishing on a FAILED booking (the void after a refused capture) moves
// nothing: no money was taken.
func Transition(from BookingStatus, flow Flow, o Outcome) (Step, bool) {
	if flow != FlowAsync && flow != FlowSync {
		return Step{}, false
	}
	sync := flow == FlowSync
	// giveBack is the job that returns a payment: a void releases a card
	// authorization (nothing was captured); UPI money is refunded.
	giveBack := JobRefund
	if sync {
		giveBack = JobVoid
	}
	switch from {
	case BookingPending:
		switch o {
		case OutcomeApproved:
			if sync {
				// The tickets go out once the money is taken.
				return Step{Next: BookingConfirmed, Jobs: []JobKind{JobCapture}}, true
			}
			return Step{Next: BookingConfirmed, Jobs: []JobKind{JobEmail, JobSMS}, Captured: true}, true
		case OutcomeLate:
			return Step{Next: BookingRefundDue, Jobs: []JobKind{giveBack}}, true
		case OutcomeCancelled:
			// The money came after the show was cancelled (the payment was
			// under way as the operator cancelled): it goes back, and the
			// payer is told why, as the ticket holders were.
			return Step{Next: BookingRefundDue, Jobs: []JobKind{giveBack, JobCancelEmail, JobCancelSMS}}, true
		case OutcomeDeclined:
			return Step{Next: BookingFailed}, true
		}
	case BookingConfirmed:
		switch {
		case o == OutcomeCancelled:
			// The show will not take place: the money goes back (a card's
			// void refunds what was captured, and releases what was not)
			// and the holder is told. The tickets stay, revoked: the
			// gates' lists name them.
			return Step{Next: BookingRefundDue, Jobs: []JobKind{giveBack, JobCancelEmail, JobCancelSMS}}, true
		case sync && o == OutcomeCaptured:
			return Step{Next: BookingConfirmed, Jobs: []JobKind{JobEmail, JobSMS}, Captured: true}, true
		case sync && o == OutcomeCaptureRefused:
			// No money will come: the seats go back on sale (the SQL
			// layer undoes the booking) and the authorization is voided.
			return Step{Next: BookingFailed, Jobs: []JobKind{JobVoid}}, true
		}
	case BookingFailed:
		if o == OutcomeApproved || o == OutcomeLate {
			// Money arrived for a booking given up as failed (a webhook
			// after the reconciler's verdict): it is given back.
			return Step{Next: BookingRefundDue, Jobs: []JobKind{giveBack}}, true
		}
	case BookingRefundDue:
		if o == OutcomeRefunded || o == OutcomeVoided {
			return Step{Next: BookingRefunded}, true
		}
	}
	return Step{}, false
}
