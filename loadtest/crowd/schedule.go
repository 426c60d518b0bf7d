package crowd

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// scheduler runs many small tasks (the fans, by number) on bounded sets of
// workers: a task is a step function that does its work (a request or a
// few back to back) and says when it wants to run again. A task waiting
// (for its arrival, its next poll, a pause before tapping again) is an
// entry in a min-heap of wake times, not a goroutine or a timer: so the
// crowd's memory grows with the fans by a few bytes of heap each, and its
// goroutines are the workers, however many fans there are.
//
// Tasks wait in classes, each a heap with workers of its own, and a task
// says after each step which class it waits in next (the crowd: fans in
// line, and fans admitted to shop). A class whose workers are all busy
// makes only its own tasks late: a wall of fans joining the line, each
// worker waiting for a slow answer, does not make a payer miss its hold,
// as one browser's slow page does not slow another's.
//
// One goroutine a class hands its due tasks to its workers over an
// unbuffered channel: a task due while every worker is busy waits in the
// heap, and how late it started is the crowd's own lag (Stats.Lag), kept
// apart from the latency of the requests it then sends.
type scheduler struct {
	mu     sync.Mutex
	queues []queue // by class
	live   int     // tasks added and not finished, in every class
	epoch  time.Time
}

// queue is one class's waiting tasks.
type queue struct {
	due  wakeHeap
	wake chan struct{} // a task was added that may be due before the one the class's loop waits for, or the last finished
}

// newScheduler is a scheduler of classes classes (at least one) with no
// tasks yet.
func newScheduler(classes int) *scheduler {
	s := &scheduler{queues: make([]queue, max(classes, 1)), epoch: time.Now()}
	for i := range s.queues {
		s.queues[i].wake = make(chan struct{}, 1)
	}
	return s
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

// add adds a task that first runs at t, in class class.
func (s *scheduler) add(task, class int, t time.Time) {
	s.mu.Lock()
	s.live++
	s.mu.Unlock()
	s.at(task, class, t)
}

// at schedules a live task's next run at t, in class class.
func (s *scheduler) at(task, class int, t time.Time) {
	w := wake{at: int64(t.Sub(s.epoch)), task: int32(task)}
	q := &s.queues[class]
	s.mu.Lock()
	heap.Push(&q.due, w)
	first := q.due[0] == w
	s.mu.Unlock()
	if first {
		poke(q.wake)
	}
}

// done says a task finished: every class's loop looks whether any is left.
func (s *scheduler) done() {
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
	for i := range s.queues {
		poke(s.queues[i].wake)
	}
}

// poke wakes a class's loop, unless a wake-up is already pending.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// task is what the scheduler runs: step runs a task once, late after its
// time, and says when it runs next (more false: it is finished); class
// says which class it waits in then (nil: the first); stop finishes a
// task that is due or waiting when the context has ended (it may still
// send a request of its own, such as a fan's goodbye).
type task struct {
	step  func(n int, late time.Duration) (next time.Time, more bool)
	class func(n int) int
	stop  func(n int)
}

func (t task) classOf(n int) int {
	if t.class == nil {
		return 0
	}
	return t.class(n)
}

// run runs the tasks, each class's on workers[class] goroutines (at least
// one), until every task has finished: by itself, or stopped once ctx
// ends (a step running then finishes first, its requests failing fast).
func (s *scheduler) run(ctx context.Context, workers []int, t task) {
	var wg sync.WaitGroup
	for c := range s.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 1
			if c < len(workers) {
				n = max(workers[c], 1)
			}
			s.runClass(ctx, c, n, t)
		}()
	}
	wg.Wait()
}

// runClass runs class c's tasks on workers goroutines until no task is
// left in any class.
func (s *scheduler) runClass(ctx context.Context, c, workers int, t task) {
	type job struct {
		n    int
		late time.Duration
	}
	q := &s.queues[c]
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range workers {
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
					s.at(j.n, t.classOf(j.n), next)
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
		if len(q.due) > 0 && (q.due[0].at <= now || ctx.Err() != nil) {
			w := heap.Pop(&q.due).(wake)
			s.mu.Unlock()
			jobs <- job{int(w.task), time.Duration(max(0, now-w.at))}
			continue
		}
		wait := time.Hour
		if len(q.due) > 0 {
			wait = time.Duration(q.due[0].at - now)
		}
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-q.wake:
		case <-ended:
			ended = nil
		}
	}
}
