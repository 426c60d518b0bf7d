package crowd

import (
	"testing"
	"time"

	"github.com/onsale/onsale/loadtest/check"
)

// A requeue's Unseen runs from the poll before the one that was answered
// to the answer: a poll slow on its way is time the gateway went without
// the fan's poll. Gap stays the fan's own, send to send. Its control: a
// requeue answered at once has Unseen close to Gap.
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
			f.ask()                                        // the poll the gateway answers with a requeue
			f.asked0 = f.asked0.Add(-c.answerIn)           // as though both were sent answerIn earlier
			f.asked = f.asked.Add(-c.answerIn)
			f.place(check.PlaceRequeued, 900)
			p := f.trace.Places[0]
			if p.Unseen < c.want || p.Unseen > c.under {
				t.Errorf("Unseen = %v; want %v to %v", p.Unseen, c.want, c.under)
			}
			if p.Gap < 200*time.Millisecond || p.Gap > time.Second {
				t.Errorf("Gap = %v; want the fan's own 200 ms (to 1 s)", p.Gap)
			}
		})
	}
}
