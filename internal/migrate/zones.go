package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// findClusterDomain takes the first forward zone of a kubernetes plugin,
// else the zone of a node-local-dns block that forwards to the cluster
// DNS service, else keeps the --cluster-domain given.
func (t *translator) findClusterDomain(cf *corefile.Corefile) {
	nodeLocal, nodeLocalFrom := "", ""
	for _, b := range cf.Blocks {
		for _, d := range b.Directives {
			switch {
			case d.Name == "kubernetes":
				zones := d.Args
				if len(zones) == 0 {
					zones = b.Keys
				}
				t.servesCluster = true
				if z := forwardZone(zones); z != "" {
					t.clusterDomain = z
					return
				}
			case d.Name == "forward" && nodeLocal == "" && slices.Contains(d.Args, clusterDNSPillar):
				nodeLocal = forwardZone(b.Keys)
				nodeLocalFrom = blockWhere(b) + " (the block that forwards to the cluster DNS)"
			}
		}
	}
	if nodeLocal != "" {
		t.m.set("kube-dns-config-dir", kubeDNSMountPath, "node-local-dns reads the kube-dns ConfigMap (stubDomains, upstreamNameservers); so does nodecache, where the DaemonSet mounts it")
		t.clusterDomain, t.servesCluster = nodeLocal, true
		t.m.set("cluster-domain", strings.TrimSuffix(nodeLocal, "."), nodeLocalFrom)
		return
	}
	t.findClusterDNSByIP(cf)
}

// findClusterDNSByIP recognises a node-local cache that names the cluster
// DNS by its Service IP instead of __PILLAR__CLUSTER__DNS__ (kubespray):
// the reverse zones and one forward zone go to the same servers, and
// that zone is the cluster domain, whatever it is called (kubespray's
// dns_domain).
func (t *translator) findClusterDNSByIP(cf *corefile.Corefile) {
	targets := func(b *corefile.Block) string {
		for _, d := range b.Directives {
			if d.Name == "forward" && len(d.Args) > 1 && d.Args[0] == "." {
				return strings.Join(d.Args[1:], " ")
			}
		}
		return ""
	}
	reverse := ""
	for _, b := range cf.Blocks {
		if len(b.Keys) != 1 {
			continue
		}
		if z, err := parseServerKey(b.Keys[0]); err == nil && isReverseZone(z.zone) {
			if reverse = targets(b); reverse != "" {
				break
			}
		}
	}
	if reverse == "" || strings.Contains(reverse, "/") {
		return
	}
	for _, b := range cf.Blocks {
		z := forwardZone(b.Keys)
		if z == "" || targets(b) != reverse {
			continue
		}
		t.clusterDomain, t.servesCluster, t.clusterDNS = z, true, strings.Fields(reverse)
		t.m.set("cluster-domain", strings.TrimSuffix(z, "."), blockWhere(b)+" (this block and the reverse zones forward to the same servers, "+reverse+": the cluster DNS)")
		return
	}
}

// forwardZone returns the first zone of keys that is neither the root
// nor a reverse zone.
func forwardZone(keys []string) string {
	for _, z := range keys {
		if k, err := parseServerKey(z); err == nil && !isReverseZone(k.zone) && k.zone != "." {
			return k.zone
		}
	}
	return ""
}

// serverKey is one address of a server block.
type serverKey struct{ scheme, zone, port string }

func parseServerKey(k string) (serverKey, error) {
	out := serverKey{scheme: "dns", port: "53"}
	if s, rest, ok := strings.Cut(k, "://"); ok {
		out.scheme, k = strings.ToLower(s), rest
	}
	if i := strings.LastIndexByte(k, ':'); i >= 0 && !strings.Contains(k[:i], ":") {
		out.port, k = k[i+1:], k[:i]
	}
	if k == "" {
		k = "."
	}
	if strings.Contains(k, "/") {
		return out, fmt.Errorf("zone %q is a network: write the reverse zone (in-addr.arpa) it stands for", k)
	}
	if _, ok := dns.IsDomainName(k); !ok {
		return out, fmt.Errorf("%q is not a zone", k)
	}
	out.zone = dns.Fqdn(strings.ToLower(k))
	return out, nil
}

func isReverseZone(z string) bool {
	return dns.IsSubDomain("in-addr.arpa.", z) || dns.IsSubDomain("ip6.arpa.", z)
}
