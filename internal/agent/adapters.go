package agent

import (
	"net/netip"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/resolvconf"
	"github.com/nodecache/nodecache/pkg/server"
)

// zoneAdapter lets the server call the kubezone zone.
type zoneAdapter struct{ z *kubezone.Zone }

var _ server.Zone = zoneAdapter{}

func (a zoneAdapter) InZone(qname string) bool   { return a.z.InZone(qname) }
func (a zoneAdapter) Generation() uint64         { return a.z.Generation() }
func (a zoneAdapter) Version(name []byte) uint64 { return a.z.Version(name) }
func (a zoneAdapter) Lookup(qname string, qtype uint16) server.ZoneAnswer {
	ans := a.z.Lookup(qname, qtype)
	return server.ZoneAnswer{Rcode: ans.Rcode, Answer: ans.Answer, Ns: ans.Ns, Extra: ans.Extra, Chase: ans.Chase}
}

// listenAddrs pairs every local IP with the DNS port.
func listenAddrs(ips []netip.Addr, port uint16) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip, port))
	}
	return out
}

// podsAdapter tells the server's autopath which namespace a client pod
// searches first, for pods whose search path is the cluster default.
type podsAdapter struct{ z *kubezone.Zone }

var _ server.Pods = podsAdapter{}

func (a podsAdapter) SearchNamespace(ip netip.Addr) (string, bool) {
	p, ok := a.z.PodByIP(ip)
	if !ok || p.Shared || p.HostNetwork || p.Phase != "Running" || p.CustomDNS {
		return "", false
	}
	if p.DNSPolicy != "ClusterFirst" && p.DNSPolicy != "" {
		return "", false
	}
	return p.Namespace, true
}

// hostSearch is the node's search list, which ClusterFirst pods inherit
// after the cluster's own, as kubelet reads it (search lines only); read
// from the resolv.conf that --upstream names.
func hostSearch(cfg *Config) []string {
	rc, err := resolvconf.ReadFile(cfg.Upstream)
	if err != nil {
		return nil // --upstream is a list of addresses
	}
	return rc.Search
}
