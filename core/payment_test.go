package core_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/onsale/onsale/core"
)

// TestTransition lists every move of the payment state machine. Every
// (status, flow, outcome) combination not listed here must be refused: the
// test walks the whole product, so a move added to Transition without a
// row here (or a row without the move) fails.
func TestTransition(t *testing.T) {
	type key struct {
		from core.BookingStatus
		flow core.Flow
		o    core.Outcome
	}
	J := func(k ...core.JobKind) []core.JobKind { return k }
	moves := map[key]core.Step{
		// A pending booking settles.
		{core.BookingPending, core.FlowAsync, core.OutcomeApproved}: {Next: core.BookingConfirmed, Jobs: J(core.JobEmail, core.JobSMS), Captured: true},
		{core.BookingPending, core.FlowSync, core.OutcomeApproved}:  {Next: core.BookingConfirmed, Jobs: J(core.JobCapture)},
		{core.BookingPending, core.FlowAsync, core.OutcomeLate}:     {Next: core.BookingRefundDue, Jobs: J(core.JobRefund)},
		{core.BookingPending, core.FlowSync, core.OutcomeLate}:      {Next: core.BookingRefundDue, Jobs: J(core.JobVoid)},
		{core.BookingPending, core.FlowAsync, core.OutcomeDeclined}: {Next: core.BookingFailed},
		{core.BookingPending, core.FlowSync, core.OutcomeDeclined}:  {Next: core.BookingFailed},
		// A confirmed card booking is captured, or undone when the capture is refused.
		{core.BookingConfirmed, core.FlowSync, core.OutcomeCaptured}:       {Next: core.BookingConfirmed, Jobs: J(core.JobEmail, core.JobSMS), Captured: true},
		{core.BookingConfirmed, core.FlowSync, core.OutcomeCaptureRefused}: {Next: core.BookingFailed, Jobs: J(core.JobVoid)},
		// A cancelled show: the money goes back, the holder is told.
		{core.BookingConfirmed, core.FlowAsync, core.OutcomeCancelled}: {Next: core.BookingRefundDue, Jobs: J(core.JobRefund, core.JobCancelEmail, core.JobCancelSMS)},
		{core.BookingConfirmed, core.FlowSync, core.OutcomeCancelled}:  {Next: core.BookingRefundDue, Jobs: J(core.JobVoid, core.JobCancelEmail, core.JobCancelSMS)},
		// Money that came after the show was cancelled: given back, the payer told.
		{core.BookingPending, core.FlowAsync, core.OutcomeCancelled}: {Next: core.BookingRefundDue, Jobs: J(core.JobRefund, core.JobCancelEmail, core.JobCancelSMS)},
		{core.BookingPending, core.FlowSync, core.OutcomeCancelled}:  {Next: core.BookingRefundDue, Jobs: J(core.JobVoid, core.JobCancelEmail, core.JobCancelSMS)},
		// Money after a failure is given back.
		{core.BookingFailed, core.FlowAsync, core.OutcomeApproved}: {Next: core.BookingRefundDue, Jobs: J(core.JobRefund)},
		{core.BookingFailed, core.FlowSync, core.OutcomeApproved}:  {Next: core.BookingRefundDue, Jobs: J(core.JobVoid)},
		{core.BookingFailed, core.FlowAsync, core.OutcomeLate}:     {Next: core.BookingRefundDue, Jobs: J(core.JobRefund)},
		{core.BookingFailed, core.FlowSync, core.OutcomeLate}:      {Next: core.BookingRefundDue, Jobs: J(core.JobVoid)},
		// The money goes back.
		{core.BookingRefundDue, core.FlowAsync, core.OutcomeRefunded}: {Next: core.BookingRefunded},
		{core.BookingRefundDue, core.FlowSync, core.OutcomeRefunded}:  {Next: core.BookingRefunded},
		{core.BookingRefundDue, core.FlowAsync, core.OutcomeVoided}:   {Next: core.BookingRefunded},
		{core.BookingRefundDue, core.FlowSync, core.OutcomeVoided}:    {Next: core.BookingRefunded},
	}
	statuses := append(slices.Clone(core.BookingStatuses), "UNKNOWN")
	flows := append(slices.Clone(core.Flows), "barter")
	outcomes := append(slices.Clone(core.Outcomes), "shrug")
	seen := 0
	for _, from := range statuses {
		for _, flow := range flows {
			for _, o := range outcomes {
				want, move := moves[key{from, flow, o}]
				t.Run(fmt.Sprintf("%s/%s/%s", from, flow, o), func(t *testing.T) {
					got, ok := core.Transition(from, flow, o)
					switch {
					case ok != move:
						t.Fatalf("Transition(%s, %s, %s) = %+v, %v; want moved=%v", from, flow, o, got, ok, move)
					case !ok && (got.Next != "" || got.Jobs != nil || got.Captured):
						t.Errorf("refused Transition(%s, %s, %s) = %+v; want the zero Step", from, flow, o, got)
					case ok && (got.Next != want.Next || !slices.Equal(got.Jobs, want.Jobs) || got.Captured != want.Captured):
						t.Errorf("Transition(%s, %s, %s) = %+v; want %+v", from, flow, o, got, want)
					}
				})
				if move {
					seen++
				}
			}
		}
	}
	if seen != len(moves) {
		t.Errorf("the walk met %d of the %d listed moves: a row names a status, flow or outcome outside the lists", seen, len(moves))
	}
}

// Every job a transition queues is one the outbox knows, and the money jobs
// are exactly the ones that move a booking when they finish.
func TestJobKinds(t *testing.T) {
	for _, k := range core.JobKinds {
		o, moves := k.Outcome()
		// A stray refund moves money that is not its booking's: it
		// leaves the booking as it is.
		if moves != (k.MovesMoney() && k != core.JobStrayRefund) {
			t.Errorf("%s: moves the booking %v (outcome %q), moves money %v; want the same", k, moves, o, k.MovesMoney())
		}
	}
	for _, from := range core.BookingStatuses {
		for _, flow := range core.Flows {
			for _, o := range core.Outcomes {
				step, _ := core.Transition(from, flow, o)
				for _, j := range step.Jobs {
					if !slices.Contains(core.JobKinds, j) {
						t.Errorf("Transition(%s, %s, %s) queues %q, not a job kind", from, flow, o, j)
					}
					// A caller that knows only the new status runs
					// GiveBackJobs: they must cover the money the move queued.
					if from != core.BookingRefundDue && step.Next == core.BookingRefundDue && j.MovesMoney() && !slices.Contains(core.GiveBackJobs, j) {
						t.Errorf("Transition(%s, %s, %s) to REFUND_DUE queues %q, not in GiveBackJobs", from, flow, o, j)
					}
				}
			}
		}
	}
}

func TestJobBackoff(t *testing.T) {
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {10, 512 * time.Second},
		{12, 2048 * time.Second}, {13, time.Hour}, {30, time.Hour}, {1000, time.Hour},
	} {
		if got := core.JobBackoff(tc.attempt); got != tc.want {
			t.Errorf("JobBackoff(%d) = %v; want %v", tc.attempt, got, tc.want)
		}
	}
}
