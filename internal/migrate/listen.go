package migrate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// What the DaemonSet (deploy/base) sets where a Corefile's address would
// be refused: the agent binds IPs, never every address.
const (
	daemonSetLocalIP = "the DaemonSet's config sets local-ip (169.254.20.10; with the intercept overlay the kube-dns ClusterIP too), as node-local-dns's DaemonSet gave its IPs with -localip"
	daemonSetMetrics = "the DaemonSet sets --metrics-addr=$(HOST_IP):9253, the node's IP, which wins over the config file"
	daemonSetHealth  = "health-addr defaults to the first local IP, port 8080, which the DaemonSet's probes use"
)

// bind translates `bind ADDR...`: the IPs nodecache serves on. An
// unspecified address (0.0.0.0, ::) is left out: nodecache refuses it.
func (t *translator) bind(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	for _, a := range d.Args {
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil:
			t.m.unsupport(w, fmt.Sprintf("%s is not an IP: nodecache binds IPs (--local-ip), not interfaces", a))
			continue
		case ip.IsUnspecified():
			t.m.note(w, "CoreDNS listened on every address; nodecache serves on its local IPs only, and "+daemonSetLocalIP)
			continue
		}
		if !slices.Contains(t.localIPs, ip.String()) {
			t.localIPs = append(t.localIPs, ip.String())
		}
		if ip.IsLoopback() {
			// The agent puts its IPs on a link of its own, which cannot
			// hold a loopback IP: serve it as CoreDNS did, without one.
			for _, k := range []string{"setup-interface", "setup-iptables"} {
				t.m.set(k, "false", w+" (a loopback IP: served without a link or rules of nodecache's own, as CoreDNS served it)")
			}
		}
	}
	if len(d.Options) > 0 {
		t.m.unsupport(w, "bind options are not reproduced")
	}
	if len(t.localIPs) > 0 {
		delete(t.m.settings, "local-ip")
		t.m.set("local-ip", strings.Join(t.localIPs, ","), w)
	}
	return nil
}

// firstLocalIP is the IP nodecache's default listeners use.
func (t *translator) firstLocalIP() string {
	if len(t.localIPs) > 0 {
		return t.localIPs[0]
	}
	return defaultLocalIP
}

// listenAddr translates a CoreDNS [IP]:port listener into the host:port
// a nodecache flag wants, or "" when nodecache's default is the same or
// the address is every address (unspecified reports that).
func (t *translator) listenAddr(arg, defPort string) (addr string, unspecified bool, err error) {
	ip, port, err := hostPortIP(arg)
	if err != nil {
		return "", false, err
	}
	switch {
	case ip != "" && netip.MustParseAddr(ip).IsUnspecified():
		return "", true, nil
	case ip != "":
		return netip.AddrPortFrom(netip.MustParseAddr(ip), mustPort(port)).String(), false, nil
	case port == defPort:
		return "", false, nil
	}
	return netip.AddrPortFrom(netip.MustParseAddr(t.firstLocalIP()), mustPort(port)).String(), false, nil
}

func mustPort(p string) uint16 {
	var n uint16
	_, _ = fmt.Sscan(p, &n) // checked by hostPortIP
	return n
}

func (t *translator) health(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	t.m.note(w, "the health check is /healthz (and /readyz) on --health-addr, not /health")
	if len(d.Args) > 0 {
		addr, every, err := t.listenAddr(d.Args[0], defaultHealthPort)
		switch {
		case err != nil:
			return err
		case every:
			t.m.note(w, "left out: nodecache refuses to listen on every address; "+daemonSetHealth)
		case addr != "":
			t.m.set("health-addr", addr, w)
		}
	}
	for _, o := range d.Options {
		if o.Name != "lameduck" {
			t.m.unsupport(where(t.file, o), "health option "+o.Name+" is not reproduced")
			continue
		}
		t.m.note(where(t.file, o), "on an update nodecache hands its sockets to the new pod; on shutdown it drains queries in flight")
	}
	return nil
}

func (t *translator) prometheus(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	t.m.note(w, "the coredns_* series keep their names, next to nodecache's own (see docs/observability.md)")
	arg := ":9153"
	if len(d.Args) > 0 {
		arg = d.Args[0]
	}
	addr, every, err := t.listenAddr(arg, defaultPromPort)
	switch {
	case err != nil:
		return err
	case every:
		t.m.note(w, "left out: nodecache refuses to listen on every address; "+daemonSetMetrics)
	case addr != "":
		t.m.set("metrics-addr", addr, w+" ("+daemonSetMetrics+")")
	}
	return nil
}

// pprof translates `pprof [ADDR]`: profiles on their own listener, on
// loopback unless the Corefile names another address, as in CoreDNS
// (whose default, localhost:6053, is --pprof-addr's).
func (t *translator) pprof(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	t.m.set("pprof", "true", w+" (on --pprof-addr, 127.0.0.1:6053 unless set: CoreDNS's default)")
	if len(d.Args) == 0 {
		return nil
	}
	ip, port, err := hostPortIP(strings.Replace(d.Args[0], "localhost:", "127.0.0.1:", 1))
	switch {
	case err != nil:
		return err
	case ip == "" || netip.MustParseAddr(ip).IsUnspecified():
		t.m.note(w, "left out: nodecache serves profiles on loopback or a local IP, never every address; --pprof-addr stays 127.0.0.1:6053")
	default:
		t.m.set("pprof-addr", netip.AddrPortFrom(netip.MustParseAddr(ip), mustPort(port)).String(), w)
	}
	return nil
}
