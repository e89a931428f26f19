//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// One real node serves every real-node test of a test binary: it takes a
// minute or more to start, and each test leaves it as it found it (its own
// namespaces deleted, the DaemonSet uninstalled). The first test that asks
// for it starts it; TestMain tears it down after the last test
// (stopSharedRealNode).

// sharedNode is the test binary's real node, guarded by its mutex.
type sharedNode struct {
	mu     sync.Mutex
	node   *realNode
	tb     *nodeTB
	failed string // why the start failed; later tests fail with it at once
}

// realNodes holds the one shared node. It is the package's only state
// besides TestMain's env: a node outlives the test that started it.
var realNodes sharedNode

// sharedRealNode returns the test binary's real node, started on first use,
// with t as the test its failures and logs go to.
func sharedRealNode(t *testing.T) *realNode {
	t.Helper()
	requireSuite(t)
	bin := requireRealNode(t)
	s := &realNodes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != "" {
		t.Fatalf("the shared real node did not start: %s", s.failed)
	}
	if s.node == nil {
		s.tb = newNodeTB()
		s.tb.attach(t)
		ok := false
		defer func() {
			if !ok { // Fatal (Goexit) or panic during the start
				s.failed = fmt.Sprintf("its start in %s failed (see that test's log)", t.Name())
				s.tb.failedOnce = true
				s.tb.detach()
				s.tb.runCleanups()
			}
		}()
		s.node = startRealNode(t, s.tb, bin)
		ok = true
	} else {
		s.tb.attach(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.tb.failedOnce = true
		}
		s.tb.detach()
	})
	return s.node
}

// stopSharedRealNode tears the shared node down, if one was started. TestMain
// calls it after every test has run.
func stopSharedRealNode() {
	s := &realNodes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb != nil {
		s.tb.runCleanups()
	}
}

// nodeTB is the testing.TB of the shared node's own resources (its netns,
// forwarder, upstream, processes). Failures and logs go to the test attached
// at the moment, or to stderr between tests and at teardown; cleanups run at
// teardown, not when a test ends; its context ends at teardown. Every other
// method is the attached test's.
type nodeTB struct {
	testing.TB // the attached test; nil between tests

	mu         sync.Mutex
	cleanups   []func()
	ctx        context.Context
	cancel     context.CancelFunc
	failedOnce bool // a test using the node failed: keep its logs
}

func newNodeTB() *nodeTB {
	ctx, cancel := context.WithCancel(context.Background())
	return &nodeTB{ctx: ctx, cancel: cancel}
}

func (b *nodeTB) attach(t testing.TB) { b.mu.Lock(); b.TB = t; b.mu.Unlock() }
func (b *nodeTB) detach()             { b.mu.Lock(); b.TB = nil; b.mu.Unlock() }

func (b *nodeTB) current() testing.TB { b.mu.Lock(); defer b.mu.Unlock(); return b.TB }

func (b *nodeTB) Cleanup(f func()) { b.mu.Lock(); b.cleanups = append(b.cleanups, f); b.mu.Unlock() }

func (b *nodeTB) Context() context.Context { return b.ctx }

func (b *nodeTB) Helper() {
	if t := b.current(); t != nil {
		t.Helper()
	}
}

func (b *nodeTB) Logf(format string, args ...any) {
	if t := b.current(); t != nil {
		t.Helper()
		t.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

func (b *nodeTB) Log(args ...any) { b.Logf("%s", fmt.Sprint(args...)) }

func (b *nodeTB) Errorf(format string, args ...any) {
	if t := b.current(); t != nil {
		t.Helper()
		t.Errorf(format, args...)
		return
	}
	b.failedOnce = true
	fmt.Fprintf(os.Stderr, "e2e: ERROR: "+format+"\n", args...)
}

func (b *nodeTB) Error(args ...any) { b.Errorf("%s", fmt.Sprint(args...)) }

// Failed says whether any test that used the node failed, so that
// teardown keeps the logs.
func (b *nodeTB) Failed() bool {
	if t := b.current(); t != nil && t.Failed() {
		return true
	}
	return b.failedOnce
}

// runCleanups runs the node's cleanups, last first, with no test attached.
func (b *nodeTB) runCleanups() {
	b.cancel()
	b.mu.Lock()
	cs := b.cleanups
	b.cleanups = nil
	b.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
