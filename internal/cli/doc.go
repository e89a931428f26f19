// Package cli is nodecache's command line, every command but `run` (the
// agent, internal/agent): Main parses the command and its flags, and
// ExitCode turns its error into the process's exit status (0 ok, 1 error,
// 2 usage, 3 agent unreachable, 4 and 5 doctor's FAIL and WARN; migrate's
// 3 means written with directives it could not reproduce).
//
// Most commands (status, query, explain, cache, zone, upstreams, top, tail,
// reload) are thin clients of the admin API (internal/adminapi's Client;
// the agent answers over its admin socket) that print a table, or with
// -o json|yaml the data itself for scripts; one file per command. The
// others:
//
//   - doctor checks the node (internal/doctor) and maps its findings to
//     the exit status;
//   - migrate reads a CoreDNS or node-local-dns Corefile (a file or the
//     cluster's ConfigMaps), has internal/migrate translate it, and writes
//     the config;
//   - probe is the kubelet's exec probe over the pod's probe socket;
//   - cleanup removes the interface and rules a crashed agent left
//     (pkg/iface), taking the flags of run.
//
// The package has no metrics.
package cli
