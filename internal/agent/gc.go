package agent

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// defaultGCPercent is the GC target the agent runs with when GOGC is not
// set. Most of the agent's heap is long-lived: cache entries and zone
// records. Go's default of 100 lets the heap grow to twice the live heap
// before each collection, so a full cache costs twice its data in RSS. At
// 50 the headroom is half the live heap, for collections twice as often,
// which only the miss path pays for: hits allocate nothing. GOMEMLIMIT
// still bounds the total (the DaemonSet sets it).
const defaultGCPercent = 50

// applyGCDefault sets defaultGCPercent unless the operator chose a value
// with GOGC, which then stands. It returns the GC percent in effect, as Go
// reports it (-1 for off).
func applyGCDefault(log *slog.Logger) int {
	if v, ok := os.LookupEnv("GOGC"); ok {
		cur := debug.SetGCPercent(-1)
		debug.SetGCPercent(cur)
		log.Debug("GC target from GOGC", "gogc", v, "percent", cur)
		return cur
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}
