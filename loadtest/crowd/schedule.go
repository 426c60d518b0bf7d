package crowd

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// scheduler runs many small tasks (the fans, by number) on a bounded set of
// workers: a task is a step function that does its work (a request or a
// few back to back) and says when it wants to run again. A task waiting
// (for its arrival, its next poll, a pause before tapping again) is an
// entry in a min-heap of wake times, not a goroutine or a timer: so the
// crowd's memory grows with the fans by a few bytes of heap each, and its
// goroutines are the workers, however many fans there are.
//
// One goroutine (run's) hands the due tasks to the workers over an
// unbuffered channel: a task due while every worker is busy waits in the
// heap, and how late it started is the crowd's own lag (Stats.Lag), kept
// apart from the latency of the requests it then sends.
type scheduler struct {
	mu    sync.Mutex
	due   wakeHeap
	live  int           // tasks added and not finished
	wake  chan struct{} // a task was added that may be due before the one run is waiting for
	epoch time.Time     // wake times are nanoseconds since this
}

// newScheduler is a scheduler with no tasks yet.
func newScheduler() *scheduler {
	return &scheduler{wake: make(chan struct{}, 1), epoch: time.Now()}
}

// wake is one task's next run.
type wake struct {
	at   int64 // nanoseconds since the scheduler's epoch
	task int32
}

// wakeHeap is the tasks waiting, earliest first.
type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	return w
}

// add adds a task that first runs at t.
func (s *scheduler) add(task int, t time.Time) {
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	s.at(task, t)
}

// at schedules a live task's next run at t.
func (s *scheduler) at(task int, t time.Time) {
	w := wake{at: int64(t.Sub(s.epoch)), task: int32(task)}
	s.mu.Lock()
	heap.Push(&s.due, w)
	first := s.due[0] == w
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// done says a task finished.
func (s *scheduler) done() {
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// task is what the scheduler runs: step runs a task once, late after its
// time, and says when it runs next (more false: it is finished); stop
// finishes a task that is due or waiting when the context has ended (it may
// still send a request of its own, such as a fan's goodbye).
type task struct {
	step func(n int, late time.Duration) (next time.Time, more bool)
	stop func(n int)
}

// run runs the tasks on workers goroutines until every task has finished:
// by itself, or stopped once ctx ends (a step running then finishes first,
// its requests failing fast).
func (s *scheduler) run(ctx context.Context, workers int, t task) {
	type job struct {
		n    int
		late time.Duration
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if ctx.Err() != nil {
					t.stop(j.n)
					s.done()
					continue
				}
				next, more := t.step(j.n, j.late)
				switch {
				case !more:
					s.done()
				case ctx.Err() != nil:
					t.stop(j.n)
					s.done()
				default:
					s.at(j.n, next)
				}
			}
		}()
	}
	defer func() {
		close(jobs)
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	ended := ctx.Done() // nil once it has: the loop then waits for the workers only
	for {
		s.mu.Lock()
		if s.live == 0 {
			s.mu.Unlock()
			return
		}
		now := int64(time.Since(s.epoch))
		if len(s.due) > 0 && (s.due[0].at <= now || ctx.Err() != nil) {
			w := heap.Pop(&s.due).(wake)
			s.mu.Unlock()
			jobs <- job{int(w.task), time.Duration(max(0, now-w.at))}
			continue
		}
		wait := time.Hour
		if len(s.due) > 0 {
			wait = time.Duration(s.due[0].at - now)
		}
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.wake:
		case <-ended:
			ended = nil
		}
	}
}
