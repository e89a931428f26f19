package workers

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// waitFor polls cond until it holds; the bound only stops a broken test
// from hanging, it is not a timing assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestReuse checks that a worker left idle takes the next task
// instead of a new goroutine, that busy workers do not hold a task up, and
// that cancelling the context ends the idle workers.
func TestReuse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := New(ctx)

	done := make(chan struct{}, 3)
	w.Run(func() { done <- struct{}{} })
	<-done
	// The one worker takes each later task: offer (Run's first step)
	// succeeds once it waits again, and no goroutine is started.
	for i := 0; i < 2; i++ {
		waitFor(t, "the idle worker to take a task", func() bool { return w.offer(funcTask(func() { done <- struct{}{} })) })
		<-done
	}
	if got := w.started.Load(); got != 1 {
		t.Fatalf("sequential tasks started %d goroutines; want 1, reused", got)
	}
	waitFor(t, "the worker to wait for a task", func() bool { return w.waiting.Load() == 1 })

	// Two tasks at once: the second cannot wait for the busy first one.
	release := make(chan struct{})
	both := make(chan struct{}, 2)
	block := func() { both <- struct{}{}; <-release }
	waitFor(t, "the idle worker to take the first task", func() bool { return w.offer(funcTask(block)) })
	w.Run(block)
	<-both
	<-both
	close(release)
	if got := w.started.Load(); got != 2 {
		t.Fatalf("two concurrent tasks on one idle worker started %d goroutines in all; want 2", got)
	}

	waitFor(t, "both workers to go idle", func() bool { return w.waiting.Load() == 2 })
	cancel()
	waitFor(t, "idle workers to exit after cancel", func() bool { return w.waiting.Load() == 0 })
}

// BenchmarkRun is one task handed to an idle worker and waited for, as the
// slow path hands a miss over: the hand-off and the wake-ups around it.
func BenchmarkRun(b *testing.B) {
	w := New(b.Context())
	done := make(chan struct{})
	task := funcTask(func() { done <- struct{}{} })
	w.RunTask(task)
	<-done
	b.ReportAllocs()
	for b.Loop() {
		for !w.offer(task) {
			runtime.Gosched()
		}
		<-done
	}
}

// TestIdleWorkersExit: of three workers, the two a steady trickle of tasks
// does not need exit after a tick or two of the reaper; the last exits once
// no task comes at all. The trickle keeps reusing one worker.
func TestIdleWorkersExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		w := New(ctx)
		release := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			w.Run(func() { defer wg.Done(); <-release })
		}
		close(release)
		wg.Wait()
		synctest.Wait()
		if got := w.waiting.Load(); got != 3 {
			t.Fatalf("after three tasks at once: %d workers waiting, want 3", got)
		}
		for range 3 * idleFor / time.Second {
			done := make(chan struct{})
			w.Run(func() { close(done) })
			<-done
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := w.waiting.Load(); got != 1 {
			t.Errorf("after %v of one task a second: %d workers waiting, want 1", 3*idleFor, got)
		}
		if got := w.started.Load(); got != 3 {
			t.Errorf("goroutines started: got %d, want 3 (the trickle reuses a worker)", got)
		}
		time.Sleep(2 * idleFor)
		synctest.Wait()
		if got := w.waiting.Load(); got != 0 {
			t.Errorf("after %v without a task: %d workers waiting, want 0", 2*idleFor, got)
		}
	})
}

// TestWorkersExitWithCtx: when ctx ends, a worker waiting for a task exits,
// and so does one busy with a task then, once the task is done; none is
// left waiting (synctest.Test fails on a goroutine left blocked).
func TestWorkersExitWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		w := New(ctx)
		release := make(chan struct{})
		w.Run(func() { <-release }) // busy through the end of ctx
		idle := make(chan struct{})
		w.Run(func() { close(idle) })
		<-idle
		synctest.Wait()
		if got := w.waiting.Load(); got != 1 {
			t.Fatalf("before the end of ctx: %d workers waiting, want 1", got)
		}
		cancel()
		synctest.Wait()
		close(release)
		synctest.Wait()
		if got := w.waiting.Load(); got != 0 {
			t.Errorf("after the end of ctx and of the last task: %d workers waiting, want 0", got)
		}
		ran := make(chan struct{})
		w.Run(func() { close(ran) }) // a task after the end still runs, on a worker that then exits
		<-ran
	})
}

// TestNoTaskLostAtCtxEnd runs tasks from several goroutines while ctx
// ends: every task runs (one offered to a worker that the end of ctx is
// stopping is still taken), and every worker exits once idle
// (synctest.Test fails on a goroutine left blocked).
func TestNoTaskLostAtCtxEnd(t *testing.T) {
	for round := range 50 {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			w := New(ctx)
			var ran sync.WaitGroup
			var callers sync.WaitGroup
			for g := range 4 {
				callers.Add(1)
				go func() {
					defer callers.Done()
					for i := range 200 {
						if g == 0 && i == 50+round {
							cancel()
						}
						ran.Add(1)
						w.Run(ran.Done)
						if i%7 == 0 {
							runtime.Gosched()
						}
					}
				}()
			}
			callers.Wait()
			ran.Wait() // hangs (synctest: deadlock) if a task was lost
			synctest.Wait()
			if got := w.waiting.Load(); got != 0 {
				t.Errorf("round %d: %d workers waiting after the end of ctx, want 0", round, got)
			}
		})
	}
}
