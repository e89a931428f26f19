// Package supervise keeps `nodecache run` answering when its serving
// process dies. `nodecache run` starts as a small supervisor (this
// package: no DNS parsing, no API client) that runs the nodecache binary
// again as the serving process, the agent proper (internal/agent), and
// restarts it at once when it is killed or crashes after it served.
//
// One supervisor, two entry points (launch.go): `nodecache run` execs
// BinaryName (cmd/nodecache-supervisor, which links only this package,
// internal/handover, pkg/logkey, x/sys and the standard library) when it
// sits beside the nodecache binary, keeping its pid, so that the
// supervisor's memory holds none of nodecache's package initialisation;
// without it, or when the exec fails, `nodecache run` runs Run itself.
// One Info line says which. The binary runs the serving processes from a
// descriptor `nodecache run` left open on its own binary (Config.ExeFD),
// so a restart runs the nodecache that was started, as /proc/self/exe
// does in-process, even if the file was replaced or removed since.
//
// The supervisor keeps duplicates of what must outlive a serving process:
//   - its listening sockets, which the serving process sends once it
//     serves: while no process reads them the kernel keeps queueing
//     datagrams and connections on them, so a query waits instead of
//     being refused. It keeps them as bare descriptors (held.go), outside
//     its netpoller, which every datagram and reply would otherwise wake;
//   - the cache journal (pkg/cache journal.go), a memfd ring the serving
//     process sends once when its journal starts and appends its inserts
//     to (never compacted nor replaced): the next serving process imports
//     it and continues it, so it starts warm.
//
// Each serving process inherits the control socket (descriptor 3), then
// the listeners, UDP first, then the journal, then the binary's
// descriptor it was run from (which it closes), and reads Inherited from
// $NODECACHE_SUPERVISED (Child). The messages on the control socket are
// handover frames (internal/handover).
//
// Restarts (policy.go): the first death within CrashWindow (60 s)
// restarts at once, each further one waits twice as long, from 250 ms up
// to 30 s; CrashLoopDeaths (3) deaths within the window is a crash loop,
// which the serving process reports (readiness, doctor, metrics) until the
// window has passed since the last death. A serving process that exits 0,
// that dies before it ever served, or that handed its sockets to a
// successor is not restarted: the supervisor exits with its status.
//
// Signals: SIGTERM, SIGINT and SIGHUP go to the serving process, which
// stops (or reloads) as an agent does. A SIGTERM while none runs starts
// one with Inherited.Stop, which only stops: the link and rules are
// removed as they would have been.
//
// The serving process gets the supervisor's oom_score_adj plus
// Config.OOMScoreAdj, so the kernel kills it, not the supervisor, when
// memory runs out; it dies with the supervisor (PR_SET_PDEATHSIG). Once it
// is started the supervisor drops the binary's pages from its own page
// tables (codePages), so that it is not the kernel's next pick either
// while the container is still at its limit: the nodecache binary's in
// the nodecache process, its own (2.7 MB) as BinaryName.
//
// As a container's pid 1 the supervisor inherits the processes a killed
// serving process leaves behind (an iptables command it had started): once
// a second it reaps those that have exited (reap.go), so that they do not
// stay zombies for the container's life.
//
// The package has no metrics of its own: the serving process exports
// nodecache_supervisor_restarts_total and nodecache_supervisor_crash_loop
// from Inherited.
package supervise
