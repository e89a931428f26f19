package agent

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodecache/nodecache/internal/supervise"
)

func TestApplyGCDefault(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	log := slog.New(slog.DiscardHandler)

	t.Run("unset", func(t *testing.T) {
		t.Setenv("GOGC", "") // registers the restore of the variable
		unsetenv(t, "GOGC")
		debug.SetGCPercent(100)
		if got := applyGCDefault(log); got != defaultGCPercent {
			t.Errorf("returned %d, want %d", got, defaultGCPercent)
		}
		if got := debug.SetGCPercent(100); got != defaultGCPercent {
			t.Errorf("GC percent in effect: %d, want %d", got, defaultGCPercent)
		}
	})
	t.Run("set by the operator", func(t *testing.T) {
		t.Setenv("GOGC", "200")
		debug.SetGCPercent(200) // what the runtime read from GOGC at start
		if got := applyGCDefault(log); got != 200 {
			t.Errorf("returned %d, want the operator's 200", got)
		}
		if got := debug.SetGCPercent(100); got != 200 {
			t.Errorf("GC percent in effect: %d, want the operator's 200 untouched", got)
		}
	})
}

func TestApplyStartGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	log := slog.New(slog.DiscardHandler)

	t.Run("unset, a restart", func(t *testing.T) {
		t.Setenv("GOGC", "")
		unsetenv(t, "GOGC")
		debug.SetGCPercent(100)
		applyDefault := applyStartGC(log, true)
		if got := debug.SetGCPercent(startGCPercent); got != startGCPercent {
			t.Errorf("GC percent during the start: %d, want %d", got, startGCPercent)
		}
		applyDefault()
		if got := debug.SetGCPercent(startGCPercent); got != defaultGCPercent {
			t.Errorf("GC percent after the start: %d, want %d", got, defaultGCPercent)
		}
		applyDefault() // once only: a second call changes nothing
		if got := debug.SetGCPercent(100); got != startGCPercent {
			t.Errorf("GC percent after a second call: %d, want %d (left as it was)", got, startGCPercent)
		}
	})
	t.Run("unset, another start", func(t *testing.T) {
		t.Setenv("GOGC", "")
		unsetenv(t, "GOGC")
		debug.SetGCPercent(100)
		applyDefault := applyStartGC(log, false)
		if got := debug.SetGCPercent(100); got != defaultGCPercent {
			t.Errorf("GC percent during the start: %d, want %d from the outset", got, defaultGCPercent)
		}
		applyDefault()
		if got := debug.SetGCPercent(100); got != 100 {
			t.Errorf("GC percent after the start: %d, want 100 (left as it was)", got)
		}
	})
	t.Run("set by the operator", func(t *testing.T) {
		t.Setenv("GOGC", "200")
		debug.SetGCPercent(200)
		applyDefault := applyStartGC(log, true)
		if got := debug.SetGCPercent(200); got != 200 {
			t.Errorf("GC percent during the start: %d, want the operator's 200", got)
		}
		applyDefault()
		if got := debug.SetGCPercent(100); got != 200 {
			t.Errorf("GC percent after the start: %d, want the operator's 200", got)
		}
	})
}

func TestRestartedOnKeptSockets(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		in   supervise.Inherited
		want bool
	}{
		{"unsupervised or first", supervise.Inherited{}, false},
		{"first, started", supervise.Inherited{Started: now}, false},
		{"restart", supervise.Inherited{UDP: 2, TCP: 2, Started: now}, true},
		{"sockets, no start time", supervise.Inherited{UDP: 1}, false},
	} {
		if got := restartedOnKeptSockets(tc.in); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEndStartGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	t.Setenv("GOGC", "")
	unsetenv(t, "GOGC")
	a := &Agent{gcDefault: applyStartGC(slog.New(slog.DiscardHandler), true)}
	var g errgroup.Group
	restored := make(chan struct{})
	a.endStartGC(context.Background(), &g, restored)
	if got := debug.SetGCPercent(startGCPercent); got != startGCPercent {
		t.Errorf("GC percent while the import runs: %d, want %d", got, startGCPercent)
	}
	close(restored)
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent once the import ended: %d, want %d", got, defaultGCPercent)
	}
}

// unsetenv removes key for the rest of the test; call t.Setenv(key, …)
// first so that the testing package restores it.
func unsetenv(t testing.TB, key string) {
	t.Helper()
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
