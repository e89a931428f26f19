package iface

import (
	"fmt"
	"net/netip"
	"strings"
)

// Who the filter INPUT rules let reach the local IPs. Without a
// restriction one ACCEPT per address and port sits at position 1 of INPUT,
// ahead of any host firewall: whoever can route the address to this node
// (a host on its L2 segment, for 169.254.20.10 or an intercepted ClusterIP)
// reaches the cache and the cluster zone. With AcceptInterfaces or
// AcceptSources the chain accepts the node's own queries (in on lo), then
// each allowed (source, interface) pair, and drops the rest.

// ValidateAccept checks AcceptInterfaces and AcceptSources against LocalIPs;
// Validate calls it.
func (c *Config) ValidateAccept() error {
	for _, name := range c.AcceptInterfaces {
		base := strings.TrimSuffix(name, "+")
		if name == "" || name == "+" || strings.Contains(base, "+") {
			return fmt.Errorf("iface: accept interface %q: want a link name, or a prefix of one followed by + (e.g. cali+)", name)
		}
		if err := validateIfName(base); err != nil {
			return fmt.Errorf("iface: accept interface: %w", err)
		}
	}
	for _, p := range c.AcceptSources {
		switch {
		case !p.IsValid():
			return fmt.Errorf("iface: accept source %v is not a prefix", p)
		case p.Addr().Is4In6():
			return fmt.Errorf("iface: accept source %v is IPv4-mapped, give it as IPv4", p)
		case p != p.Masked():
			return fmt.Errorf("iface: accept source %v has host bits set: did you mean %v?", p, p.Masked())
		}
	}
	if len(c.AcceptSources) == 0 {
		return nil
	}
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		if ips := c.ipsOf(fam); len(ips) > 0 && len(c.sourcesOf(fam)) == 0 {
			return fmt.Errorf("iface: accept sources hold no %s prefix, but local IP %s is %s: every query to it would be dropped",
				fam, ips[0], fam)
		}
	}
	return nil
}

// restricted reports whether the INPUT rules accept only some queries.
func (c Config) restricted() bool { return len(c.AcceptInterfaces) > 0 || len(c.AcceptSources) > 0 }

// sourcesOf returns the accept sources of family fam.
func (c Config) sourcesOf(fam Family) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.AcceptSources {
		if familyOf(p.Addr()) == fam {
			out = append(out, p)
		}
	}
	return out
}

// acceptRules are the filter INPUT rules for queries to ip on ep, in the
// order the chain holds them.
func acceptRules(cfg Config, fam Family, ip netip.Addr, ep endpoint) [][]string {
	if !cfg.restricted() {
		return [][]string{inputRule(netip.Prefix{}, ip, "", ep, "ACCEPT")}
	}
	sources := cfg.sourcesOf(fam)
	if len(sources) == 0 {
		sources = []netip.Prefix{{}} // any source
	}
	ifaces := cfg.AcceptInterfaces
	if len(ifaces) == 0 {
		ifaces = []string{""} // any interface
	}
	out := [][]string{inputRule(netip.Prefix{}, ip, "lo", ep, "ACCEPT")}
	for _, src := range sources {
		for _, in := range ifaces {
			out = append(out, inputRule(src, ip, in, ep, "ACCEPT"))
		}
	}
	return append(out, inputRule(netip.Prefix{}, ip, "", ep, "DROP"))
}

// inputRule is portRule for a query to ip, from src (none when not
// valid) in on the interface in (any when empty), in the canonical order
// `iptables -S` prints: -s, -d, -i, then the matches.
func inputRule(src netip.Prefix, ip netip.Addr, in string, ep endpoint, target string) []string {
	rule := portRule(ip, "d", ep, target)
	if in != "" {
		rule = append(rule[:2:2], append([]string{"-i", in}, rule[2:]...)...)
	}
	if src.IsValid() {
		rule = append([]string{"-s", src.String()}, rule...)
	}
	return rule
}
