package agent

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/handover"
	"github.com/nodecache/nodecache/internal/supervise"
	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/server"
)

// The serving process's side of the supervisor (internal/supervise): the
// sockets and cache journal it inherits and publishes, the crash loop it
// reports, and the process started only to stop.

// ServingOOMScoreAdj is added to the serving process's oom_score_adj: the
// kernel picks it, never the supervisor that keeps its sockets. The
// kubelet's exec probes (`nodecache probe`) raise theirs as much: a probe
// started while the container is at its memory limit, just after the
// serving process was killed, would otherwise get the supervisor killed
// next (its badness, the binary's pages it maps, is then the highest).
const ServingOOMScoreAdj = 500

// journalImportTimeout bounds a restarted process's import of the journal;
// journalImportWait is how long, from when it serves, a UDP query that
// misses the cache waits for the import before it goes upstream.
const (
	journalImportTimeout = 30 * time.Second
	journalImportWait    = 250 * time.Millisecond
)

// inheritedListeners rebuilds the listeners the supervisor kept, nil when
// there are none (the first serving process).
func (a *Agent) inheritedListeners() (*server.Listeners, error) {
	if a.sup == nil {
		return nil, nil
	}
	files := a.sup.Listeners()
	if len(files) == 0 {
		return nil, nil
	}
	l, err := server.FromFiles(files)
	if err != nil {
		return nil, fmt.Errorf("the listeners the supervisor kept: %w", err)
	}
	return l, nil
}

// publishServing gives the supervisor the listeners and starts the cache
// journal, once this process serves.
func (a *Agent) publishServing() {
	if a.sup == nil {
		return
	}
	l := a.server.Listeners()
	files, err := l.Files()
	if err == nil {
		err = a.sup.Serving(len(l.UDP), len(l.TCP), a.rulesBackend(), files)
		handover.CloseFiles(files)
	}
	if err != nil {
		a.log.Error("the supervisor does not have the listeners: a crash would lose queries", logkey.Err, err)
		return
	}
	<-a.jscanned // restoreCache has set what startJournal continues
	if err := a.startJournal(); err != nil {
		a.log.Error("no cache journal: a restart after a crash will start cold", logkey.Err, err)
	}
}

// restoreBehind runs restoreCache on a goroutine of g, so that the
// journal's scan (it reads the whole ring: 5-13 ms on the real node's OOM
// step) does not delay reading the kept sockets. The channel it returns is
// closed when the import has ended, or at once when there is nothing to
// import; nil when unsupervised. publishServing waits for the scan.
func (a *Agent) restoreBehind(ctx context.Context, g *errgroup.Group) <-chan struct{} {
	if a.sup == nil {
		return nil
	}
	scanned, restored := make(chan struct{}), make(chan struct{})
	a.jscanned = scanned
	g.Go(func() error {
		defer close(restored)
		defer oneMoreP()()
		done := a.restoreCache(ctx, g) // g's counter is above 0 here: Go is safe beside Wait
		close(scanned)
		if done != nil {
			<-done
		}
		return nil
	})
	return restored
}

// oneMoreP raises GOMAXPROCS by one until the function it returns is
// called. The journal's scan and import keep a P busy for a few hundred
// milliseconds after a restart, and Go preempts a running goroutine only
// every 10 ms: with every P busy (the import, the zone's first list, the
// collector), a datagram waiting in the kept sockets woke its read loop,
// and then the slow path's worker, 10-20 ms late. With a P more, one
// waits in the network poller. The function puts back what was set: the
// GOMAXPROCS environment variable's value, else the runtime's default
// (which follows the container's CPU limit).
func oneMoreP() (restore func()) {
	p := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(p + 1)
	return func() {
		if os.Getenv("GOMAXPROCS") != "" {
			runtime.GOMAXPROCS(p)
			return
		}
		runtime.SetDefaultGOMAXPROCS()
	}
}

// restoreCache imports the journal the supervisor kept (in g, while the
// zone syncs) and keeps the file for startJournal to continue. The channel
// is closed when the import ends; nil when there is nothing to import.
func (a *Agent) restoreCache(ctx context.Context, g interface{ Go(func() error) }) <-chan struct{} {
	if a.sup == nil {
		return nil
	}
	f := a.sup.Journal()
	if f == nil {
		return nil
	}
	scan, err := cache.ScanJournal(f)
	var reader *os.File
	if err == nil && scan.Records > 0 {
		var fd int
		if fd, err = unix.Dup(int(f.Fd())); err == nil {
			reader = os.NewFile(uintptr(fd), "cache-journal-reader") // the journal takes f over and closes it when it stops
		}
	}
	if err != nil {
		a.log.Warn("not restoring the cache from the journal", logkey.Err, err)
		_ = f.Close()
		return nil
	}
	a.jfile, a.jscan = f, scan
	if reader == nil {
		return nil
	}
	budget := int64(a.cfg.CacheSize)
	if limit, usage, bounded := cgroupMemory(); bounded {
		// After an OOM kill the cgroup is as full as it was: restore no more
		// than half of what is free now, so the restore cannot kill it again.
		budget = min(budget, max(limit-usage, 0)/2)
	}
	done := make(chan struct{})
	a.jrestored = done // the journal overwrites records only once they are imported
	g.Go(func() error {
		defer close(done)
		defer reader.Close()
		start := time.Now()
		ictx, cancel := context.WithTimeout(ctx, journalImportTimeout)
		defer cancel()
		n, err := a.cache.ImportJournal(ictx, reader, scan, budget)
		a.log.Info("restored the cache from the journal", "entries", n, "records", scan.Records,
			"journal_bytes", scan.Bytes, "budget_bytes", budget, "took", time.Since(start).Round(time.Millisecond), logkey.Err, err)
		return nil
	})
	return done
}

// ifaceConfig is IfaceConfig, with --iptables-mode=auto resolved to the
// flavour the previous serving process wrote its rules with, when the
// supervisor says: the rules to keep are there, and detecting it again
// (running each flavour's iptables-save) would delay reading the kept
// sockets by as much.
func (a *Agent) ifaceConfig() iface.Config {
	c := IfaceConfig(a.cfg)
	if a.sup == nil || c.IPTablesMode != iface.ModeAuto && c.IPTablesMode != "" {
		return c
	}
	if m := iface.IPTablesMode(a.sup.Info().IPTablesBackend); m.IsFlavour() {
		c.IPTablesMode = m
	}
	return c
}

// rulesBackend is the iptables flavour of the rules, for the supervisor to
// pass to the next serving process; empty without rules.
func (a *Agent) rulesBackend() string {
	if b := a.iface.Status().Rules.Backend; iface.IPTablesMode(b).IsFlavour() {
		return b
	}
	return ""
}

// startTimes are the moments a serving process's start passed: its
// components, the zone's start (snapshot loaded, watches started), the
// listeners, the zone's sync (or the hold of its queries instead).
type startTimes struct{ begin, zoneStart, listeners, zone time.Time }

// logRestart says, in a process the supervisor restarted on the kept
// sockets, what the time from its start to reading them went to.
func (a *Agent) logRestart(st startTimes, restored <-chan struct{}) {
	if a.sup == nil {
		return
	}
	in := a.sup.Info()
	if !restartedOnKeptSockets(in) {
		return // the first serving process: nothing waits in the sockets
	}
	now := time.Now()
	ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	attrs := []any{"since_start", ms(now.Sub(in.Started)), "exec_init", ms(a.started.Sub(in.Started)),
		"build", ms(st.begin.Sub(a.started)), "listeners", ms(st.listeners.Sub(st.begin)),
		"zone_start", ms(st.zoneStart.Sub(st.begin)),
		"zone_wait", ms(st.zone.Sub(st.listeners)), "restore_done", closed(restored)}
	if n := len(in.Deaths); n > 0 {
		attrs = append(attrs, "since_death", ms(now.Sub(in.Deaths[n-1].At)))
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		// Pages of the binary read from disk: its page cache was reclaimed
		// (the container was at its memory limit). And the CPU time the
		// start took: the wall time is this over the CPU share it got.
		attrs = append(attrs, "major_faults", ru.Majflt,
			"cpu_time", ms(time.Duration(ru.Utime.Nano()+ru.Stime.Nano())))
	}
	a.log.Info("reading the kept sockets", attrs...)
}

// restartedOnKeptSockets says whether the supervisor started this process
// after another on the sockets it keeps (queries may wait in them), not as
// its first serving process.
func restartedOnKeptSockets(in supervise.Inherited) bool {
	return in.UDP+in.TCP > 0 && !in.Started.IsZero()
}

// closed says whether c is closed; a nil channel is.
func closed(c <-chan struct{}) bool {
	if c == nil {
		return true
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// startJournal continues the journal restoreCache kept, or starts a new
// one from the cache as it is.
func (a *Agent) startJournal() error {
	limit, _, bounded := cgroupMemory()
	size := journalCap(int64(a.cfg.JournalSize), limit, bounded, int64(a.cfg.CacheSize))
	newFile := func() (*os.File, error) { return a.newJournalFile(size) }
	jcfg := cache.JournalConfig{File: a.jfile, Scan: a.jscan, MaxBytes: size, NewFile: newFile,
		Publish: a.sup.PublishJournal, After: a.jrestored}
	a.jfile = nil
	if size == 0 { // --cache-journal-size=0
		if jcfg.File != nil {
			_ = jcfg.File.Close()
		}
		return nil
	}
	j, err := a.cache.StartJournal(jcfg)
	if err != nil {
		if jcfg.File != nil {
			_ = jcfg.File.Close()
		}
		return err
	}
	a.journal = j
	return nil
}

// newJournalFile is a memfd of size bytes: memory, no file system, gone
// with its last descriptor. Its pages are allocated at once (fallocate,
// the file's size left at 0 for the journal to grow), so the ring's memory
// is charged to the container when the journal starts, as the memory limit
// arithmetic (journalCap, GOMEMLIMIT) already assumes, rather than page by
// page as the first few thousand misses fill it. If the kernel refuses,
// the ring is allocated as it is written, as before, and one line says so.
func (a *Agent) newJournalFile(size int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("nodecache-cache-journal", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	if size > 0 {
		if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, size); err != nil {
			a.log.Warn("cache journal: allocating its memory at start failed; it is allocated as it is written",
				"bytes", size, logkey.Err, err)
		}
	}
	return os.NewFile(uintptr(fd), "cache-journal"), nil
}

// crashLoop names the crash loop the supervisor reported, until it is
// CrashWindow old; empty when there is none.
func (a *Agent) crashLoop() string {
	if a.sup == nil {
		return ""
	}
	in := a.sup.Info()
	if until := in.CrashLoopUntil(); until.IsZero() || !time.Now().Before(until) {
		return ""
	}
	last := in.Deaths[len(in.Deaths)-1]
	return fmt.Sprintf("supervisor: crash loop: the serving process died %d times in %v (last %s ago: %s); restarts back off",
		len(in.Deaths), supervise.CrashWindow, time.Since(last.At).Round(time.Second), last.Cause)
}

// supervisorStatus is the status's supervisor part, nil when unsupervised.
func (a *Agent) supervisorStatus() *adminapi.Supervisor {
	if a.sup == nil {
		return nil
	}
	in := a.sup.Info()
	st := &adminapi.Supervisor{Restarts: in.Restarts, CrashLoop: a.crashLoop(), InProcess: !in.Binary,
		InProcessReason: in.InProcess}
	if n := len(in.Deaths); n > 0 {
		st.LastDeath = in.Deaths[n-1].Cause
		st.LastDeathAt = in.Deaths[n-1].At
	}
	if a.journal != nil {
		st.JournalBytes = a.journal.Stats().Bytes
	}
	return st
}

// registerSupervisorMetrics exports what the supervisor said and the
// journal's figures; zero when unsupervised.
func (a *Agent) registerSupervisorMetrics(reg prometheus.Registerer) {
	info := func() supervise.Inherited {
		if a.sup == nil {
			return supervise.Inherited{}
		}
		return a.sup.Info()
	}
	jstats := func() cache.JournalStats {
		if a.journal == nil {
			return cache.JournalStats{}
		}
		return a.journal.Stats()
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodecache_supervised",
			Help: "1 when a supervisor keeps this process's sockets and cache journal for a restart after a crash (--supervise)."},
			func() float64 { return b2f(a.sup != nil) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nodecache_supervisor_restarts_total",
			Help: "Serving processes the supervisor started after one died, this one included."},
			func() float64 { return float64(info().Restarts) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodecache_supervisor_crash_loop",
			Help: "1 while the serving process died 3 times or more within 60 s, until 60 s after the last death."},
			func() float64 { return b2f(a.crashLoop() != "") }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodecache_cache_journal_bytes",
			Help: "Memory the cache journal the supervisor keeps holds (a memfd; its whole ring, allocated at start)."},
			func() float64 { return float64(jstats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nodecache_cache_journal_overwritten_total",
			Help: "Records of the cache journal overwritten by newer ones (its ring is full): their entries are not restored after a crash."},
			func() float64 { return float64(jstats().Overwritten) }),
	)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// stopOnly is the life of a serving process started only to stop (the
// supervisor got SIGTERM while none ran): remove the link and rules,
// unless they must stay, as a stopping agent does.
func (a *Agent) stopOnly() error {
	var err error
	a.iface, err = iface.New(IfaceConfig(a.cfg), a.reg, a.log.With(logkey.Component, "iface"))
	if err != nil {
		return fmt.Errorf("interface: %w", err)
	}
	if zoneSource(a.cfg) && a.cfg.Fixture == "" {
		if clients, err := a.kubeClients(); err == nil {
			a.kube = clients.Kube
		}
	}
	if keep, why := a.keepHostState(); keep {
		a.log.Info(why + ": leaving interface and rules in place")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.iface.Teardown(ctx)
}
