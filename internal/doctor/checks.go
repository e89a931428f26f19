package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

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

// checkUpstreams looks for forwarding loops (resolv.conf or the agent's
// upstreams naming a loopback stub or the agent itself) and for the
// kube-dns ConfigMap's upstreamNameservers refused by the agent.
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
	if e.st != nil && len(e.st.DowngradeRefused) > 0 {
		out = append(out, Finding{Check: "kube-dns ConfigMap", Severity: Warn,
			Detail: "upstreamNameservers " + strings.Join(e.st.DowngradeRefused, ",") +
				" not used: they would replace the DNS over TLS upstreams of --upstream with plain DNS",
			Fix: "remove upstreamNameservers from the kube-dns ConfigMap, or drop tls:// from --upstream to use them"})
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

// checkListeners sends a real query over UDP and TCP to every listener
// whose address a link of this node holds. To any other address the query
// would follow the routes, to the default gateway and off the node: it is
// reported, not sent.
func (e *Env) checkListeners(ctx context.Context) []Finding {
	ips, port := e.agentLocalIPs()
	held, err := e.linkAddrs()
	if err != nil {
		return []Finding{{Check: "listener", Severity: Warn, Detail: "not probed: cannot list this node's addresses: " + err.Error()}}
	}
	q := new(dns.Msg)
	if e.st != nil && e.st.Zone != nil {
		q.SetQuestion("dns-version."+dns.Fqdn(e.st.Config["cluster-domain"]), dns.TypeTXT)
	} else {
		q.SetQuestion("nodecache.health.", dns.TypeANY)
	}
	var out []Finding
	for _, ip := range ips {
		addr := netip.AddrPortFrom(ip, port).String()
		if !slices.Contains(held, ip.Unmap()) {
			out = append(out, Finding{Check: "listener", Severity: Fail,
				Detail: fmt.Sprintf("%s not probed: no link of this node holds %s, so a query would leave the node", addr, ip),
				Fix:    "see the interface check above: the agent puts its addresses on its link (--setup-interface)"})
			continue
		}
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
