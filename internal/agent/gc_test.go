package agent

import (
	"log/slog"
	"os"
	"runtime/debug"
	"testing"
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

// unsetenv removes key for the rest of the test; call t.Setenv(key, …)
// first so that the testing package restores it.
func unsetenv(t testing.TB, key string) {
	t.Helper()
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
