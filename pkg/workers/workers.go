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
	"sync/atomic"
	"time"
)

// idleFor is how long a worker waits for its next task before it exits
// (at most twice that, see work): long enough that a steady stream of
// tasks keeps the same goroutines and their grown stacks, short enough that
// a burst's workers do not linger.
const idleFor = 5 * time.Second

// Pool runs tasks on reused goroutines. A task goes to a worker waiting for
// one, else to a new goroutine that then waits for more; callers bound how
// many tasks run at once, so the pool needs no bound of its own. Workers
// exit after idleFor to twice that without a task, or when ctx ends. A Pool is safe for
// concurrent use.
type Pool struct {
	ctx   context.Context
	tasks chan Task // unbuffered: a send succeeds only into a waiting worker

	started atomic.Uint64 // goroutines started, for tests
	waiting atomic.Int64  // workers in (or entering) their wait, for tests
}

// A Task is work for a Pool. A pointer that implements it is handed over
// as it is, where a closure over the same pointer costs an allocation.
type Task interface{ Run() }

// funcTask is a func as a Task (a func value is one pointer: no allocation).
type funcTask func()

func (f funcTask) Run() { f() }

// New returns a Pool whose workers exit when ctx ends.
func New(ctx context.Context) *Pool {
	return &Pool{ctx: ctx, tasks: make(chan Task)}
}

// Run starts task on an idle worker or a new one. It never blocks.
func (w *Pool) Run(task func()) { w.RunTask(funcTask(task)) }

// RunTask is Run for a Task.
func (w *Pool) RunTask(task Task) {
	if !w.offer(task) {
		w.started.Add(1)
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

// work runs task, then the tasks offered to it until it has been idle for
// idleFor to twice that. The idle clock ticks every idleFor rather than
// being reset after each task (a timer update per miss): a worker exits at
// the first tick with no task since the tick before.
func (w *Pool) work(task Task) {
	task.Run()
	idle := time.NewTicker(idleFor)
	defer idle.Stop()
	ran := true // a task since the last tick
	for {
		w.waiting.Add(1)
		select {
		case task := <-w.tasks:
			w.waiting.Add(-1)
			task.Run()
			ran = true
		case <-idle.C:
			w.waiting.Add(-1)
			if ran {
				ran = false
				continue
			}
			return
		case <-w.ctx.Done():
			w.waiting.Add(-1)
			return
		}
	}
}
