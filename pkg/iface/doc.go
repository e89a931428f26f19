// Package iface keeps the node-local DNS address reachable: a link (default "nodelocaldns") that
// carries every local IP, and iptables rules that exempt DNS to and from those IPs from connection
// tracking (raw NOTRACK) and let it through the filter table (ACCEPT).
//
// It is a reconciler. The desired state is data (Config → addresses and per-chain rule lists); Setup
// converges the kernel to it (link and addresses first, then rules) and adopts whatever a killed
// predecessor left, Run re-converges every Config.SyncInterval and at once on any netlink link or
// address event, Teardown removes everything (jumps, chains, addresses, link), Check inspects without
// changing anything.
//
// # Link
//
// A dummy link, or an empty bridge when the kernel has no dummy driver (one warning is logged),
// created with the alias "nodecache" that marks it as ours. The kernel ignores an alias given when a
// link is created, so the link is created as "nct-<name>", marked, then renamed: the configured name
// never shows an unmarked link; an empty link left under the temporary name by a crash is deleted. An existing link with the configured
// name is adopted only when it is ours: a dummy or bridge with our alias, or one without an alias
// whose only addresses are host prefixes including a local IP (made by a version before the alias;
// it is marked on adoption). Any other link (a CNI bridge such as cni0, a veth, a link with another
// alias) is an error (ErrForeignLink) and is never changed or deleted, by Setup or Teardown. Addresses are host prefixes (/32, /128 with
// IFA_F_NODAD) added with AddrReplace; other addresses on our link, except IPv6 link-local ones, are
// removed as stale.
//
// # Rules
//
// Our rules live in chains of our own, each jumped to from position 1 of a built-in chain:
//
//	raw    PREROUTING -> NODECACHE-PREROUTING  -d IP --dport P -j NOTRACK
//	raw    OUTPUT     -> NODECACHE-OUTPUT      -d IP --dport P -j NOTRACK; -s IP --sport P -j NOTRACK
//	filter INPUT      -> NODECACHE-INPUT       -d IP --dport P -j ACCEPT
//	filter OUTPUT     -> NODECACHE-OUTPUT      -s IP --sport P -j ACCEPT
//
// for every local IP, for udp and tcp on Config.Port and tcp on each Config.ExtraTCPPorts, in iptables
// (v4) and ip6tables (v6) for the families that have local IPs. Every rule and jump carries
// "-m comment --comment nodecache". With Config.AcceptInterfaces or Config.AcceptSources, NODECACHE-INPUT
// holds instead, per IP and port: -i lo ACCEPT (the node's own queries), one ACCEPT per allowed
// (-s source, -i interface) pair, then DROP (accept.go). A chain whose content differs from the desired set is flushed and
// rewritten. The jump is kept exactly once and first: copies are deleted by rule spec in the same
// atomic iptables-restore commit that inserts the one at position 1, never by a listed position.
// A jump moved back to position 1 once and pushed down again has a foreign rule that wants position
// 1 too; it is then left below it (ChainStatus.Yielded, one warning) rather than fought over. The iptables flavour is Config.IPTablesMode
// ("auto" picks nft or legacy with kube-proxy's heuristic over iptables-{legacy,nft}-save).
//
// # kube-proxy in IPVS mode
//
// IPVS mode puts every Service IP on kube-proxy's kube-ipvs0 link, and IPVS takes packets to those
// IPs on the local-in path, whatever the raw table says: a local IP that kube-ipvs0 also carries
// (the kube-dns ClusterIP, intercepted) never reaches the agent. Each link reconcile (and Check)
// lists kube-ipvs0's addresses and reports the local IPs on it in InterfaceStatus.IPVSHeld and a
// gauge, with one warning when that set changes; nothing else changes (the link-local IP still
// works, so readiness does not depend on it).
//
// # Config
//
// See Config: InterfaceName ("nodelocaldns"), LocalIPs (required), Port (53), ExtraTCPPorts,
// SetupInterface and SetupIPTables (false: that part is a no-op and reported "disabled"),
// IPTablesMode ("auto"), SyncInterval (10s).
//
// # Metrics
//
//	nodecache_iface_reconciles_total{result="ok|error"}
//	nodecache_iface_readds_total{kind="link|address|rule|jump"}   things put back after the first success
//	nodecache_iface_errors_total{kind="link|address|rule|jump|watch"}
//	nodecache_iface_rules                                         rules in our chains plus jumps
//	nodecache_iface_ipvs_held_ips                                 local IPs kube-ipvs0 also holds
//	coredns_nodecache_setup_errors_total{errortype="iptables|iptables_lock|interface_add|interface_check|configmap"}
//	                                                              node-local-dns's name for the errors above
package iface
