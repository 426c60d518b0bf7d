package crowd

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSchedulerOrder: tasks run in the order of their times, however they
// were added (one added while the loop waits for a later one, with an
// earlier time, runs first), each as often as its steps ask.
func TestSchedulerOrder(t *testing.T) {
	s := newScheduler(1)
	start := time.Now()
	var order []int
	steps := map[int]int{} // task: steps left
	for task, at := range []time.Duration{300, 100, 200, 50} {
		steps[task] = 2
		s.add(task, 0, start.Add(at*time.Millisecond))
	}
	const late = 4 // added by task 3's first step, with a time before every other's
	step := func(n int, _ time.Duration) (time.Time, bool) {
		order = append(order, n) // one worker: no lock needed
		steps[n]--
		if n == 3 && steps[n] == 1 {
			steps[late] = 1
			s.add(late, 0, start)
		}
		return time.Now().Add(400 * time.Millisecond), steps[n] > 0
	}
	s.run(context.Background(), []int{1}, task{step: step, stop: func(int) { t.Error("stop called with the context alive") }})
	// 3 at 50 ms, the late one, 1 at 100, 2 at 200, 0 at 300; then each
	// again 400 ms after its first step, in the same order.
	if want := []int{3, 4, 1, 2, 0, 3, 1, 2, 0}; !slices.Equal(order, want) {
		t.Errorf("ran %v; want %v", order, want)
	}
}

// TestSchedulerWorkers: however many tasks are due, at most the workers
// run at once; and when the context ends the tasks still waiting are
// stopped (once each), not run.
func TestSchedulerWorkers(t *testing.T) {
	s := newScheduler(1)
	for task := range 50 {
		s.add(task, 0, time.Now())
	}
	var running, most, ran atomic.Int64
	s.run(context.Background(), []int{3}, task{step: func(n int, _ time.Duration) (time.Time, bool) {
		c := running.Add(1)
		for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		ran.Add(1)
		return time.Time{}, false
	}, stop: func(int) { t.Error("stop called with the context alive") }})
	if most.Load() > 3 || ran.Load() != 50 {
		t.Errorf("%d steps of 50 ran, at most %d at once; want every one, at most the 3 workers", ran.Load(), most.Load())
	}

	s = newScheduler(1)
	ctx, cancel := context.WithCancel(context.Background())
	s.add(0, 0, time.Now())
	s.add(1, 0, time.Now().Add(time.Hour))
	s.add(2, 0, time.Now().Add(time.Hour))
	var mu sync.Mutex
	var stopped []int
	s.run(ctx, []int{1}, task{
		step: func(n int, _ time.Duration) (time.Time, bool) { cancel(); return time.Now().Add(time.Hour), true },
		stop: func(n int) { mu.Lock(); stopped = append(stopped, n); mu.Unlock() },
	})
	slices.Sort(stopped)
	if !slices.Equal(stopped, []int{0, 1, 2}) {
		t.Errorf("stopped %v; want every task (0 after its step, 1 and 2 never run)", stopped)
	}
}

// TestSchedulerClasses: a task moves to the class its step says, and a
// class whose workers are all busy does not hold up another's tasks:
// task 1 moves from class 0 to class 1, then task 0 takes class 0's one
// worker until task 1 has run again, which only class 1's worker can do
// (one pool of workers for both classes would wait forever).
func TestSchedulerClasses(t *testing.T) {
	s := newScheduler(2)
	start := time.Now()
	s.add(1, 0, start)
	s.add(0, 0, start.Add(50*time.Millisecond))
	var class [2]atomic.Int64 // task 0's, task 1's
	ranAgain := make(chan struct{})
	s.run(context.Background(), []int{1, 1}, task{
		step: func(n int, _ time.Duration) (time.Time, bool) {
			if n == 0 {
				select {
				case <-ranAgain:
				case <-time.After(10 * time.Second):
					t.Error("task 1 did not run while class 0's worker was busy")
				}
				return time.Time{}, false
			}
			if class[1].Swap(1) == 0 {
				return time.Now().Add(100 * time.Millisecond), true // its first step: on to class 1, after task 0 began
			}
			close(ranAgain)
			return time.Time{}, false
		},
		class: func(n int) int { return int(class[n].Load()) },
		stop:  func(int) { t.Error("stop called with the context alive") },
	})
}
