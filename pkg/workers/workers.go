// Package workers runs short tasks on reused goroutines.
//
// nodecache's slow paths (a cache miss, an upstream query) run a task per
// query. A fresh goroutine has an 8 KiB stack, and unpacking an upstream
// reply with miekg/dns grows it, so a goroutine per task would pay for a
// start and a stack copy on every miss. A Pool hands each task to a
// goroutine that finished an earlier one and kept its stack.
package workers

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// idleFor is how often the pool looks for idle workers: a worker no task
// needed for a whole idleFor exits (so after idleFor to twice that). Long
// enough that a steady stream of tasks keeps the same goroutines and their
// grown stacks, short enough that a burst's workers do not linger.
const idleFor = 5 * time.Second

// Pool runs tasks on reused goroutines. A task goes to a worker waiting for
// one, else to a new goroutine that then waits for more; callers bound how
// many tasks run at once, so the pool needs no bound of its own. Workers
// exit when ctx ends, and the workers no task needed for a whole idleFor
// exit then (reap). A Pool is safe for concurrent use.
//
// A waiting worker receives from the task channel alone: a timer of its
// own in a select (reset after every task, and added to and taken off the
// timer heap at every wait) was 9 % of a miss's CPU, and a select on the
// task channel and ctx (both channels locked and queued on at every wait)
// 4 %. One goroutine per pool ticks instead, and the end of ctx offers nil
// to every waiting worker (stop).
type Pool struct {
	ctx   context.Context
	tasks chan Task // unbuffered: a send succeeds only into a waiting worker; nil: exit
	reap  sync.Once // starts reaper with the first worker

	waiting atomic.Int64  // workers in (or entering) their wait
	fewest  atomic.Int64  // the fewest workers waiting at once since reaper's last tick
	started atomic.Uint64 // goroutines started, for tests
}

// A Task is work for a Pool. A pointer that implements it is handed over
// as it is, where a closure over the same pointer costs an allocation.
type Task interface{ Run() }

// funcTask is a func as a Task (a func value is one pointer: no allocation).
type funcTask func()

func (f funcTask) Run() { f() }

// New returns a Pool whose workers exit when ctx ends.
func New(ctx context.Context) *Pool {
	w := &Pool{ctx: ctx, tasks: make(chan Task)}
	context.AfterFunc(ctx, w.stop)
	return w
}

// Run starts task on an idle worker or a new one. It never blocks.
func (w *Pool) Run(task func()) { w.RunTask(funcTask(task)) }

// RunTask is Run for a Task.
func (w *Pool) RunTask(task Task) {
	if !w.offer(task) {
		w.started.Add(1)
		w.reap.Do(func() { go w.reaper() })
		go w.work(task)
	}
}

// offer hands task to a worker waiting for one, if any.
func (w *Pool) offer(task Task) bool {
	select {
	case w.tasks <- task:
		return true
	default:
		return false
	}
}

// work runs task, then the tasks offered to it until it is offered nil
// (reaper, stop) or ctx has ended.
func (w *Pool) work(task Task) {
	task.Run()
	for {
		// Counted in before ctx is checked: stop, which runs once ctx has
		// ended, then either sees this worker waiting and offers it nil
		// until it takes it, or this worker sees ctx ended.
		w.waiting.Add(1)
		if w.ctx.Err() != nil {
			w.leftWait()
			return
		}
		task := <-w.tasks
		w.leftWait()
		if task == nil {
			return
		}
		task.Run()
	}
}

// stop ends the waiting workers once ctx has ended: it offers nil until
// none waits (one counted in but not yet receiving takes it a moment
// later).
func (w *Pool) stop() {
	for w.waiting.Load() > 0 {
		if !w.offer(nil) {
			runtime.Gosched()
		}
	}
}

// leftWait counts a worker out of the wait, and keeps fewest.
func (w *Pool) leftWait() {
	n := w.waiting.Add(-1)
	for {
		f := w.fewest.Load()
		if n >= f || w.fewest.CompareAndSwap(f, n) {
			return
		}
	}
}

// reaper ends, every idleFor, as many waiting workers as waited through
// the whole tick: no task needed them.
func (w *Pool) reaper() {
	t := time.NewTicker(idleFor)
	defer t.Stop()
	w.fewest.Store(w.waiting.Load())
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-t.C:
		}
		for n := w.fewest.Swap(w.waiting.Load()); n > 0; n-- {
			if !w.offer(nil) {
				break // they took tasks meanwhile
			}
		}
	}
}
