package server

import (
	"context"
	"sync/atomic"
	"time"
)

// workerIdle is how long a slow-path worker waits for the next task before
// it exits. Long enough that a steady miss rate keeps the same goroutines
// (and their grown stacks: an upstream reply unpacked by miekg/dns needs
// more than a fresh goroutine's 8 KiB, and copying the stack was ~5% of the
// miss path's CPU), short enough that a burst's workers do not linger.
const workerIdle = 5 * time.Second

// workers runs slow-path tasks on reused goroutines. A task goes to a worker
// waiting for one, else to a new goroutine that then waits for more; the
// caller bounds how many run at once (Server.inflight), so the pool needs no
// bound of its own. Workers exit after workerIdle without a task, or when
// ctx ends.
type workers struct {
	ctx   context.Context
	tasks chan func() // unbuffered: a send succeeds only into a waiting worker

	started atomic.Uint64 // goroutines started, for tests
	waiting atomic.Int64  // workers in (or entering) their wait, for tests
}

func newWorkers(ctx context.Context) *workers {
	return &workers{ctx: ctx, tasks: make(chan func())}
}

// run starts task on an idle worker or a new one. It never blocks.
func (w *workers) run(task func()) {
	if !w.offer(task) {
		w.started.Add(1)
		go w.work(task)
	}
}

// offer hands task to a worker waiting for one, if any.
func (w *workers) offer(task func()) bool {
	select {
	case w.tasks <- task:
		return true
	default:
		return false
	}
}

func (w *workers) work(task func()) {
	task()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		w.waiting.Add(1)
		select {
		case task := <-w.tasks:
			w.waiting.Add(-1)
			task()
			idle.Reset(workerIdle)
		case <-idle.C:
			w.waiting.Add(-1)
			return
		case <-w.ctx.Done():
			w.waiting.Add(-1)
			return
		}
	}
}
