package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/resolvconf"
)

// checkAgent asks the agent for its status and readiness.
func (e *Env) checkAgent(ctx context.Context) []Finding {
	st, err := e.Client.Status(ctx)
	if err != nil {
		return []Finding{{Check: "agent", Severity: Fail, Detail: err.Error(),
			Fix: "start the agent: kubectl -n kube-system get pods -o wide -l app.kubernetes.io/name=nodecache, then its logs"}}
	}
	e.st = &st
	if e.ups, err = e.Client.Upstreams(ctx); err != nil {
		e.ups = nil
	}
	switch {
	case !st.Serving:
		return []Finding{{Check: "agent", Severity: Fail, Detail: "the agent runs but does not serve DNS",
			Fix: "see the agent's log; it is starting, handing over, or shutting down"}}
	case len(st.NotReady) > 0:
		return []Finding{{Check: "agent", Severity: Fail, Detail: "not ready: " + strings.Join(st.NotReady, "; "),
			Fix: "zone: check the API server and the ClusterRole; upstreams: see `nodecache upstreams`"}}
	}
	return []Finding{{Check: "agent", Severity: OK,
		Detail: fmt.Sprintf("nodecache %s up %s, serving and ready", st.Version, st.Uptime)}}
}

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
	return append(linkFindings(st.Interface, source), ruleFindings(st.Rules, source)...)
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

// checkKubelet reads kubelet's clusterDNS and checks it points at us.
func (e *Env) checkKubelet(_ context.Context) []Finding {
	f := Finding{Check: "kubelet"}
	data, err := e.ReadFile(e.KubeletConfig)
	if err != nil {
		f.Severity, f.Detail = Warn, fmt.Sprintf("cannot read kubelet's config: %v", err)
		f.Fix = "pass --kubelet-config (see kubelet's --config flag)"
		return []Finding{f}
	}
	var kc struct {
		ClusterDNS []string `json:"clusterDNS"`
	}
	if err := yaml.Unmarshal(data, &kc); err != nil {
		f.Severity, f.Detail = Warn, fmt.Sprintf("%s is not YAML: %v", e.KubeletConfig, err)
		return []Finding{f}
	}
	var ours, others []string
	for _, s := range kc.ClusterDNS {
		if ip, err := netip.ParseAddr(s); err == nil && e.isLocalIP(ip) {
			ours = append(ours, s)
		} else {
			others = append(others, s)
		}
	}
	ips, _ := e.agentLocalIPs()
	switch {
	case len(kc.ClusterDNS) == 0:
		f.Severity, f.Detail = Warn, "kubelet's config sets no clusterDNS: pods get the node's resolv.conf"
		f.Fix = "set clusterDNS: [" + ips[0].String() + "] in " + e.KubeletConfig
	case len(others) > 0:
		f.Severity, f.Detail = Warn, fmt.Sprintf("kubelet's clusterDNS %s is not served by nodecache: pods bypass it", strings.Join(others, ", "))
		f.Fix = fmt.Sprintf("set clusterDNS to %s and restart kubelet, or intercept the IP: --local-ip %s,%s", ips[0], ips[0], others[0])
	default:
		f.Severity, f.Detail = OK, "kubelet's clusterDNS "+strings.Join(ours, ", ")+" is served by nodecache"
	}
	return []Finding{f}
}

// checkConntrack looks for conntrack entries of DNS to the local IPs,
// which NOTRACK should prevent.
func (e *Env) checkConntrack(ctx context.Context) []Finding {
	ips, port := e.agentLocalIPs()
	var out []Finding
	for _, ip := range ips {
		fam := "ipv4"
		if ip.Is6() {
			fam = "ipv6"
		}
		text, err := e.Run(ctx, "conntrack", "-L", "-f", fam, "-p", "udp", "--dport", fmt.Sprint(port), "-d", ip.String())
		if errors.Is(err, exec.ErrNotFound) {
			return []Finding{{Check: "conntrack", Severity: Warn, Detail: "not checked: the conntrack tool is not installed"}}
		}
		if err != nil {
			out = append(out, Finding{Check: "conntrack", Severity: Warn, Detail: err.Error()})
			continue
		}
		n := strings.Count(text, "dport=")
		if n == 0 {
			out = append(out, Finding{Check: "conntrack", Severity: OK, Detail: "no conntrack entries for DNS to " + ip.String()})
			continue
		}
		out = append(out, Finding{Check: "conntrack", Severity: Warn,
			Detail: fmt.Sprintf("%d conntrack entries for DNS to %s: NOTRACK did not apply to them", n, ip),
			Fix:    fmt.Sprintf("if rules are OK these predate them and expire; else see `rules`; clear with conntrack -D -p udp --dport %d -d %s", port, ip)})
	}
	return out
}

// checkUpstreams looks for forwarding loops: resolv.conf or the agent's
// upstreams naming a loopback stub or the agent itself.
func (e *Env) checkUpstreams(_ context.Context) []Finding {
	var out []Finding
	data, err := e.ReadFile(e.ResolvConf)
	if err != nil {
		out = append(out, Finding{Check: "resolv.conf", Severity: Warn, Detail: fmt.Sprintf("cannot read %s: %v", e.ResolvConf, err)})
	} else {
		rc, _ := resolvconf.Parse(bytes.NewReader(data)) // no read error from bytes
		servers := rc.Servers()
		if len(servers) == 0 {
			out = append(out, Finding{Check: "resolv.conf", Severity: Fail, Detail: e.ResolvConf + " lists no nameserver",
				Fix: "add the node's real resolvers, or give --upstream IP,IP"})
		}
		for _, s := range servers {
			out = append(out, e.upstreamFinding("resolv.conf", e.ResolvConf+" nameserver "+s, s))
		}
	}
	for _, u := range e.ups {
		host := u.Addr
		if ap, err := netip.ParseAddrPort(u.Addr); err == nil {
			host = ap.Addr().String()
		}
		f := e.upstreamFinding("upstream", "upstream "+u.Addr, u.Addr)
		if f.Severity == OK && !u.Up {
			f.Severity, f.Detail = Warn, "upstream "+u.Addr+" is marked down"
			f.Fix = "check that this node reaches it: nodecache query example.com; dig @" + host
		}
		out = append(out, f)
	}
	return out
}

// upstreamFinding judges one upstream, s being IP or IP:port (port 53).
func (e *Env) upstreamFinding(check, what, s string) Finding {
	ap, err := netip.ParseAddrPort(s)
	if ip, perr := netip.ParseAddr(s); perr == nil {
		ap, err = netip.AddrPortFrom(ip, 53), nil
	}
	_, port := e.agentLocalIPs()
	ip := ap.Addr().Unmap()
	switch {
	case err != nil:
		return Finding{Check: check, Severity: Warn, Detail: what + " is not an IP address"}
	case e.isLocalIP(ip) && ap.Port() == port:
		return Finding{Check: check, Severity: Fail, Detail: what + " is nodecache itself: a forwarding loop",
			Fix: "give the agent the node's real resolvers: --upstream IP,IP or a resolv.conf without the local IP"}
	case ip == netip.MustParseAddr("127.0.0.53"):
		return Finding{Check: check, Severity: Fail, Detail: what + " is systemd-resolved's stub: a loop or a dead end from a pod",
			Fix: "use --upstream /run/systemd/resolve/resolv.conf (the real resolvers), and kubelet's resolvConf likewise"}
	case ip.IsLoopback():
		return Finding{Check: check, Severity: Warn, Detail: what + " is a loopback address: a local stub, a loop if it forwards to us",
			Fix: "make sure that stub does not forward to nodecache, or give the agent its resolvers: --upstream IP,IP"}
	}
	return Finding{Check: check, Severity: OK, Detail: what + " is not a loop"}
}

// checkListeners sends a real query over UDP and TCP to every listener.
func (e *Env) checkListeners(ctx context.Context) []Finding {
	ips, port := e.agentLocalIPs()
	q := new(dns.Msg)
	if e.st != nil && e.st.Zone != nil {
		q.SetQuestion("dns-version."+dns.Fqdn(e.st.Config["cluster-domain"]), dns.TypeTXT)
	} else {
		q.SetQuestion("nodecache.health.", dns.TypeANY)
	}
	var out []Finding
	for _, ip := range ips {
		addr := netip.AddrPortFrom(ip, port).String()
		for _, proto := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: proto, Timeout: e.DNSTimeout}
			r, rtt, err := c.ExchangeContext(ctx, q, addr)
			switch {
			case err != nil:
				out = append(out, Finding{Check: "listener", Severity: Fail, Detail: fmt.Sprintf("%s %s: %v", proto, addr, err),
					Fix: "check the agent's log, the address on the link and the ACCEPT rules (see above)"})
			case r.Rcode != dns.RcodeSuccess:
				out = append(out, Finding{Check: "listener", Severity: Warn,
					Detail: fmt.Sprintf("%s %s answered %s for %s", proto, addr, dns.RcodeToString[r.Rcode], q.Question[0].Name)})
			default:
				out = append(out, Finding{Check: "listener", Severity: OK, Detail: fmt.Sprintf("%s %s answers (%s)", proto, addr, roundRTT(rtt.Truncate(time.Microsecond)))})
			}
		}
	}
	return out
}

// roundRTT rounds a round-trip time, given to the microsecond, for people,
// as the other commands do.
func roundRTT(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// JoinIPs lists ips for people: "a, b", or "no addresses".
func JoinIPs(ips []netip.Addr) string {
	if len(ips) == 0 {
		return "no addresses"
	}
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}
