// Package doctor holds the checks of `nodecache doctor`: it looks at the
// node the agent runs on and says what to fix.
//
// It asks the agent what it knows (its status and upstreams, through an
// AgentClient) and looks at the node directly. In order:
//
//   - agent: reachable, serving DNS, every component ready;
//   - interface and rules: the link, its addresses and the NOTRACK/ACCEPT
//     chains, inspected now with pkg/iface when Env.Inspect is set (root),
//     else as the agent saw them at its last reconcile;
//   - backend: our iptables backend against the one holding kube-proxy's
//     KUBE- chains (iptables-legacy-save, iptables-nft-save);
//   - kubelet: that clusterDNS in kubelet's config is served by nodecache;
//   - conntrack: no conntrack entries for DNS to the local IPs;
//   - resolv.conf and upstream: no forwarding loop through a loopback stub
//     or the agent itself, and no upstream marked down;
//   - listener: a real query over UDP and TCP to every local IP that a
//     link of this node holds (Env.LinkAddrs); one no link holds is
//     reported and not queried, since the query would leave the node;
//   - coredns: what the cluster's CoreDNS Corefile adds to kubeadm's
//     defaults, which pods using nodecache bypass.
//
// Every input is a field of Env (the agent client, file paths and a file
// reader, a command runner, the direct inspection, the coredns Corefile
// reader), so each check runs alone against fakes. The package has no
// config of its own and no metrics.
//
// # Findings
//
// Each check yields Findings: OK, WARN (works, but likely not as
// intended), FAIL (broken: DNS from pods fails or bypasses nodecache) or
// SKIP (not checked; the detail says why). A Finding's JSON field names
// (check, severity, detail, fix) are read by scripts through
// `nodecache doctor -o json` and do not change.
//
// # Exit statuses
//
// The command (internal/cli) maps the report to its exit status: 0 when
// every finding is OK or SKIP, 4 when any is FAIL, 5 when some are WARN and
// none FAIL, 2 for bad flags. An unreachable agent is a FAIL finding of the
// agent check (status 4), not the CLI's status 3: the node checks still run.
package doctor
