package crowd

import (
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/check"
)

// A requeue's gap runs from the poll before the one that was answered to
// the answer: a poll slow on its way is time the gateway went without the
// fan's poll. Its control: a requeue answered at once keeps the send-to-send gap.
func TestRequeueGapCountsTheSlowPoll(t *testing.T) {
	for _, c := range []struct {
		name     string
		answerIn time.Duration
		want     time.Duration // at least
		under    time.Duration // at most
	}{
		{"answered at once (control)", 0, 200 * time.Millisecond, time.Second},
		{"answered 2 s later", 2 * time.Second, 2200 * time.Millisecond, 3 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fan{}
			f.ask()
			f.asked = f.asked.Add(-200 * time.Millisecond) // the poll before, 200 ms ago
			f.ask()                                         // the poll the gateway answers with a requeue
			f.asked0 = f.asked0.Add(-c.answerIn)            // as though both were sent answerIn earlier
			f.asked = f.asked.Add(-c.answerIn)
			f.place(check.PlaceRequeued, 900)
			got := f.trace.Places[0].Gap
			if got < c.want || got > c.under {
				t.Errorf("gap = %v; want %v to %v", got, c.want, c.under)
			}
		})
	}
}
