// Package agent is `nodecache run`: the node-local DNS agent. It turns a
// Config (the flags, and a --config YAML file for what they leave unset)
// into the components of pkg/ and runs them:
//
//   - the cluster zone (pkg/kubezone) from an API server, a fixture or a
//     snapshot; the cache (pkg/cache) over the upstream forwarder
//     (pkg/upstream), with static records and rewrites in front
//     (local.go); the DNS server (pkg/server) on the listeners, new or
//     taken over from a predecessor (handover.go, over internal/handover);
//     the interface and iptables reconciler (pkg/iface);
//   - the health and metrics listeners (health.go, guarded by
//     httpguard.go), the admin API for the CLI (admin.go, over
//     internal/adminapi), the handover socket, the pod's probe socket and
//     pod state (podstate.go), the query log and tail stream (querylog.go,
//     tail.go), dnstap;
//   - live reloads of --config and the kube-dns ConfigMap (reload.go).
//
// Main (main.go) first starts the supervisor unless --supervise=false or
// this process is a serving process it started (internal/supervise: Start
// execs nodecache-supervisor from beside the binary, or runs it in this
// process without one). A serving process's side of it is supervised.go:
// the inherited sockets, importing and continuing the cache journal,
// sending up its sockets; gc.go sets a restarted serving process's start
// GC target, memlimit.go GOMEMLIMIT from the container's limit.
//
// Each component's config comes from a pure builder of the Config
// (builders.go: upstreamConfig, cacheConfig, zoneConfig, serverConfig,
// IfaceConfig, staticConfig, tapConfig), so build (run.go) only wires. Run
// starts the components in order and shutdown.go stops them in reverse;
// docs/architecture.md gives the order and why.
//
// Metrics: the agent's own (nodecache_build_info, nodecache_handovers_total,
// nodecache_http_connections_refused_total, nodecache_memory_limit_bytes,
// nodecache_config_*), the CoreDNS-compatible build, panic and cache
// series, and those of every component, all on one registry served on
// --metrics-addr; docs/metrics.md lists them.
package agent
