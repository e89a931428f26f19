package iface

import (
	"net/netip"
	"strconv"
	"strings"
)

// ruleComment tags every rule the Manager owns.
const ruleComment = "nodecache"

// Tables and the chains of our own, each jumped to from position 1 of a built-in chain.
const (
	tableRaw    = "raw"
	tableFilter = "filter"
)

// chainRef names one of our chains and the built-in chain that jumps to it.
type chainRef struct {
	Table  string
	Chain  string
	Parent string
}

// ourChains lists our chains in the order they are torn down; they are set up in the reverse order.
// Queries stop being exempted from conntrack (raw PREROUTING) before replies do (raw OUTPUT), and
// replies are exempted before queries are: an untracked query must never get a tracked reply. Such
// a reply makes a conntrack entry of its own, and where kube-proxy's DNAT already holds one for the
// client's port (the intercepted kube-dns ClusterIP) the two tuples clash and the kernel rewrites
// the reply's source port, so the client drops it. The filter chains' ACCEPT goes in first and
// comes out last.
func ourChains() []chainRef {
	return []chainRef{
		{Table: tableRaw, Chain: "NODECACHE-PREROUTING", Parent: "PREROUTING"},
		{Table: tableRaw, Chain: "NODECACHE-OUTPUT", Parent: "OUTPUT"},
		{Table: tableFilter, Chain: "NODECACHE-INPUT", Parent: "INPUT"},
		{Table: tableFilter, Chain: "NODECACHE-OUTPUT", Parent: "OUTPUT"},
	}
}

// jumpSpec is the rule placed first in ref.Parent.
func jumpSpec(ref chainRef) []string {
	return []string{"-m", "comment", "--comment", ruleComment, "-j", ref.Chain}
}

// endpoint is one (protocol, port) pair the rules cover.
type endpoint struct {
	proto string
	port  uint16
}

func endpoints(cfg Config) []endpoint {
	out := []endpoint{{"udp", cfg.Port}, {"tcp", cfg.Port}}
	for _, p := range cfg.ExtraTCPPorts {
		out = append(out, endpoint{"tcp", p})
	}
	return out
}

// portRule builds one rule in the canonical order `iptables -S` prints, so that listing and desired
// state compare as plain strings. dir is "d" (destination) or "s" (source).
func portRule(ip netip.Addr, dir string, ep endpoint, target string) []string {
	return []string{
		"-" + dir, netip.PrefixFrom(ip, ip.BitLen()).String(),
		"-p", ep.proto, "-m", ep.proto, "--" + dir + "port", strconv.Itoa(int(ep.port)),
		"-m", "comment", "--comment", ruleComment,
		"-j", target,
	}
}

// desiredRules returns the content of each of our chains for family fam.
func desiredRules(cfg Config, fam Family) map[chainRef][][]string {
	refs := ourChains()
	out := make(map[chainRef][][]string, len(refs))
	for _, ip := range cfg.ipsOf(fam) {
		for _, ep := range endpoints(cfg) {
			out[refs[0]] = append(out[refs[0]], portRule(ip, "d", ep, "NOTRACK"))
			out[refs[1]] = append(out[refs[1]],
				portRule(ip, "d", ep, "NOTRACK"), portRule(ip, "s", ep, "NOTRACK"))
			out[refs[2]] = append(out[refs[2]], acceptRules(cfg, fam, ip, ep)...)
			out[refs[3]] = append(out[refs[3]], portRule(ip, "s", ep, "ACCEPT"))
		}
	}
	return out
}

func joinSpec(spec []string) string { return strings.Join(spec, " ") }
