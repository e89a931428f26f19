package agent

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"

	"golang.org/x/sync/errgroup"
)

// defaultGCPercent is the GC target the agent runs with when GOGC is not
// set. Most of the agent's heap is long-lived: cache entries and zone
// records. Go's default of 100 lets the heap grow to twice the live heap
// before each collection, so a full cache costs twice its data in RSS. At
// 50 the headroom is half the live heap, for collections twice as often,
// which only the miss path pays for: hits allocate nothing. GOMEMLIMIT
// still bounds the total (set from the container's memory limit,
// memlimit.go, unless the pod's environment sets it).
const defaultGCPercent = 50

// startGCPercent is the GC target while a serving process the supervisor
// restarted on the kept sockets starts: until it serves and its cache
// journal's import has ended. Its heap is a few MiB then and grows from
// nothing; at defaultGCPercent (a heap minimum of 2 MiB, where package
// initialisation leaves 2.1 MB) the collector ran at once, and three more
// times in the first 30 ms of a restart, each cycle about 2 ms of CPU
// taken from the first answer. At 400 the heap minimum is 16 MiB: a start
// and the import of a full default ring fit under it. GOMEMLIMIT (from the
// container's limit) still bounds the heap meanwhile. Other starts (the
// first serving process, an upgrade's successor and a restart with
// --rewrite-name rules, which list the whole cluster before they serve)
// keep defaultGCPercent throughout.
const startGCPercent = 400

// applyStartGC sets startGCPercent when restart says this process was
// restarted on the kept sockets, unless the operator chose a value with
// GOGC, which then stands; otherwise it applies the default at once. The
// function it returns applies the default (applyGCDefault) once however
// often it is called; after startGCPercent it also collects and returns
// the free pages to the kernel (debug.FreeOSMemory): lowering the target
// starts no collection by itself, and an idle agent allocates too little
// to start one soon, so the start's garbage stayed in its RSS (a restart
// with 13,000 journal entries: 1.1 MiB more anonymous memory 10 s later
// than at defaultGCPercent throughout).
func applyStartGC(log *slog.Logger, restart bool) (applyDefault func()) {
	_, operator := os.LookupEnv("GOGC")
	if !restart || operator {
		applyGCDefault(log)
		return func() {}
	}
	debug.SetGCPercent(startGCPercent)
	return sync.OnceFunc(func() {
		applyGCDefault(log)
		debug.FreeOSMemory()
	})
}

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

// endStartGC applies the GC default (a.gcDefault, from applyStartGC) once
// restored is closed, on g; at once when it is nil or closed. A nil
// a.gcDefault (an Agent that Main did not make) does nothing.
func (a *Agent) endStartGC(ctx context.Context, g *errgroup.Group, restored <-chan struct{}) {
	if a.gcDefault == nil {
		return
	}
	if closed(restored) {
		a.gcDefault()
		return
	}
	g.Go(func() error {
		select {
		case <-restored:
			a.gcDefault()
		case <-ctx.Done():
		}
		return nil
	})
}
