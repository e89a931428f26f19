package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/nodecache/nodecache/pkg/iface"
)

// checkInterface looks at the link and rules: directly when it may, else
// through what the agent saw at its last reconcile.
func (e *Env) checkInterface(ctx context.Context) []Finding {
	var st iface.Status
	source := "agent's last reconcile"
	direct := false
	if e.Inspect != nil {
		ips, port := e.agentLocalIPs()
		cfg := iface.Config{InterfaceName: e.InterfaceName, LocalIPs: ips, Port: port,
			SetupInterface: true, SetupIPTables: true, IPTablesMode: iface.ModeAuto}
		if e.st != nil {
			cfg.InterfaceName = e.st.Interface.Interface.Name
			cfg.SetupInterface = e.st.Interface.Interface.State != iface.StateDisabled
			cfg.SetupIPTables = e.st.Interface.Rules.State != iface.StateDisabled
			if b := iface.IPTablesMode(e.st.Interface.Rules.Backend); b == iface.ModeNFT || b == iface.ModeLegacy {
				cfg.IPTablesMode = b
			}
			cfg.ExtraTCPPorts = e.localHTTPPorts(ips)
			cfg.AcceptInterfaces, cfg.AcceptSources = e.acceptRestriction()
		}
		s, err := e.Inspect(ctx, cfg)
		if err == nil {
			st, source, direct = s, "inspected now", true
			if e.st != nil {
				carryYield(&st.Rules, e.st.Interface.Rules)
			}
		} else if e.st == nil {
			return []Finding{{Check: "interface", Severity: Warn, Detail: "cannot inspect the link and rules: " + err.Error(),
				Fix: "run as root with iptables installed, or start the agent"}}
		}
	}
	if !direct {
		if e.st == nil {
			return []Finding{{Check: "interface", Severity: Warn, Detail: "not checked: the agent is unreachable and direct inspection is off (--inspect)"}}
		}
		st = e.st.Interface
	}
	fs := append(linkFindings(st.Interface, source), ipvsFindings(st.Interface, source)...)
	return append(fs, ruleFindings(st.Rules, source)...)
}

// acceptRestriction is the agent's --accept-interfaces and
// --accept-sources, which shape its INPUT rules.
func (e *Env) acceptRestriction() ([]string, []netip.Prefix) {
	var ifaces []string
	var sources []netip.Prefix
	for _, s := range strings.Split(e.st.Config["accept-interfaces"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			ifaces = append(ifaces, s)
		}
	}
	for _, s := range strings.Split(e.st.Config["accept-sources"], ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil {
			sources = append(sources, p)
		}
	}
	return ifaces, sources
}

// localHTTPPorts mirrors the agent: health and metrics ports on a local IP
// get rules too.
func (e *Env) localHTTPPorts(ips []netip.Addr) []uint16 {
	var ports []uint16
	for _, k := range []string{"health-addr", "metrics-addr"} {
		ap, err := netip.ParseAddrPort(e.st.Config[k])
		if err != nil {
			continue
		}
		for _, ip := range ips {
			if ap.Addr() == ip && !containsPort(ports, ap.Port()) {
				ports = append(ports, ap.Port())
			}
		}
	}
	return ports
}

func containsPort(ports []uint16, p uint16) bool {
	for _, x := range ports {
		if x == p {
			return true
		}
	}
	return false
}

func linkFindings(s iface.InterfaceStatus, source string) []Finding {
	f := Finding{Check: "interface", Severity: Fail}
	switch {
	case s.State == iface.StateDisabled:
		f.Severity, f.Detail = Warn, "the agent does not manage the link (--setup-interface=false)"
		f.Fix = "make sure every local IP is on some link of this node"
	case !s.Present:
		f.Detail = fmt.Sprintf("link %s is absent (%s)", s.Name, source)
		f.Fix = "the agent re-creates it within --sync-interval; if not, see its log (dummy module? NET_ADMIN?)"
	case s.Kind != "dummy" && s.Kind != "bridge":
		f.Detail = fmt.Sprintf("link %s is a %s, not ours", s.Name, s.Kind)
		f.Fix = "delete it or choose another --interface-name"
	case !s.Up:
		f.Detail = fmt.Sprintf("link %s is down (%s)", s.Name, source)
		f.Fix = "ip link set " + s.Name + " up; the agent does it within --sync-interval"
	case len(s.Missing) > 0:
		f.Detail = fmt.Sprintf("link %s lacks %s (%s)", s.Name, JoinIPs(s.Missing), source)
		f.Fix = "the agent re-adds them within --sync-interval; something on the node removes them (network manager?)"
	default:
		f.Severity = OK
		f.Detail = fmt.Sprintf("link %s (%s) up with %s (%s)", s.Name, s.Kind, JoinIPs(s.Addresses), source)
	}
	return []Finding{f}
}

// carryYield marks the inspected chains whose jump the agent yields to a
// foreign rule at position 1: only the agent knows it moved it once already.
func carryYield(inspected *iface.RulesStatus, agent iface.RulesStatus) {
	for i, c := range inspected.Chains {
		for _, a := range agent.Chains {
			if a.Yielded && a.Family == c.Family && a.Table == c.Table && a.Chain == c.Chain && c.Jumps == 1 && !c.JumpFirst {
				inspected.Chains[i].Yielded = true
			}
		}
	}
}

func ruleFindings(r iface.RulesStatus, source string) []Finding {
	if r.State == iface.StateDisabled {
		return []Finding{{Check: "rules", Severity: Warn, Detail: "the agent does not manage iptables rules (--setup-iptables=false)",
			Fix: "without NOTRACK, DNS to the local IP is conntracked: expect conntrack races and full tables under load"}}
	}
	var out []Finding
	for _, c := range r.Chains {
		where := fmt.Sprintf("%s %s %s", r.Backend, c.Family, c.Table)
		switch {
		case !c.Exists:
			out = append(out, Finding{Check: "rules", Severity: Fail, Detail: fmt.Sprintf("%s: chain %s is absent (%s)", where, c.Chain, source),
				Fix: "the agent re-creates it within --sync-interval; see its log for iptables errors"})
		case c.Missing > 0 || c.Extra > 0:
			out = append(out, Finding{Check: "rules", Severity: Fail,
				Detail: fmt.Sprintf("%s: chain %s has %d of %d rules, %d extra (%s)", where, c.Chain, c.Present, c.Want, c.Extra, source),
				Fix:    "the agent rewrites the chain within --sync-interval; something else edits it"})
		case c.Jumps != 1 || !c.JumpFirst && !c.Yielded:
			out = append(out, Finding{Check: "rules", Severity: Fail,
				Detail: fmt.Sprintf("%s: jump to %s in %s: %d copies, first=%t (%s)", where, c.Chain, c.Parent, c.Jumps, c.JumpFirst, source),
				Fix:    "another rule is inserted ahead of ours (kube-proxy, a CNI, a firewall): DNS may be conntracked or DNATed before NOTRACK"})
		case !c.JumpFirst && c.Yielded:
			out = append(out, Finding{Check: "rules", Severity: Warn,
				Detail: fmt.Sprintf("%s: jump to %s in %s is not first: another rule keeps taking position 1 and the agent stopped fighting for it (%s)", where, c.Chain, c.Parent, source),
				Fix:    "check that the rule ahead of ours (iptables -S " + c.Parent + ") does not DROP, DNAT or conntrack DNS to the local IPs"})
		}
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: "rules", Severity: OK,
			Detail: fmt.Sprintf("%d chains in %s, every jump first in its built-in chain (%s)", len(r.Chains), r.Backend, source)})
	}
	return out
}

// checkBackend compares our iptables backend with the one holding
// kube-proxy's KUBE- chains.
func (e *Env) checkBackend(ctx context.Context) []Finding {
	kube := map[iface.IPTablesMode]bool{}
	found := 0
	for _, mode := range []iface.IPTablesMode{iface.ModeLegacy, iface.ModeNFT} {
		out, err := e.Run(ctx, "iptables-"+string(mode)+"-save")
		if errors.Is(err, exec.ErrNotFound) {
			continue
		}
		found++
		kube[mode] = strings.Contains(out, "\n:KUBE-") || strings.HasPrefix(out, ":KUBE-")
	}
	f := Finding{Check: "backend"}
	var ours iface.IPTablesMode
	if e.st != nil {
		ours = iface.IPTablesMode(e.st.Interface.Rules.Backend)
	}
	switch {
	case found == 0:
		f.Severity, f.Detail = Warn, "cannot compare backends: neither iptables-legacy-save nor iptables-nft-save is installed here"
	case kube[iface.ModeLegacy] && kube[iface.ModeNFT]:
		f.Severity, f.Detail = Warn, "KUBE- chains in both legacy and nft iptables"
		f.Fix = "stale rules of an older kube-proxy; reboot the node or flush the backend kube-proxy no longer uses"
	case !kube[iface.ModeLegacy] && !kube[iface.ModeNFT]:
		f.Severity, f.Detail = Warn, "no KUBE- chains in either backend: kube-proxy runs in IPVS or nftables mode, or not at all"
		f.Fix = "our NOTRACK rules still apply; in IPVS mode keep the kube-dns IP off --local-ip (kube-ipvs0 holds it)"
	default:
		theirs := iface.ModeNFT
		if kube[iface.ModeLegacy] {
			theirs = iface.ModeLegacy
		}
		switch ours {
		case theirs:
			f.Severity, f.Detail = OK, "our rules and kube-proxy's are both in iptables-"+string(theirs)
		case iface.ModeNFT, iface.ModeLegacy:
			f.Severity, f.Detail = Fail, fmt.Sprintf("our rules are in iptables-%s, kube-proxy's in iptables-%s", ours, theirs)
			f.Fix = "run the agent with --iptables-mode " + string(theirs) + " (or auto)"
		default:
			f.Severity, f.Detail = OK, "kube-proxy's rules are in iptables-"+string(theirs)+"; the agent manages no rules to compare"
		}
	}
	return []Finding{f}
}
