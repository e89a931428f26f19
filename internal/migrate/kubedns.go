package migrate

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodecache/nodecache/pkg/upstream"
)

// kubeDNSMountPath is where the DaemonSet mounts the kube-dns ConfigMap.
const kubeDNSMountPath = "/etc/kube-dns"

// AddKubeDNS points the agent at the mounted kube-dns ConfigMap, which it
// reads as node-local-dns does, after checking that it parses.
func (m *Migration) AddKubeDNS(dir string) error {
	stubs, ups, err := upstream.LoadKubeDNSConfig(dir)
	if err != nil {
		return fmt.Errorf("--kube-dns-config: %w", err)
	}
	var parts []string
	for _, d := range sortedKeys(stubs) {
		parts = append(parts, strings.TrimSuffix(d, ".")+"="+joinAddrs(stubs[d]))
	}
	from := "kube-dns ConfigMap"
	if len(parts) > 0 {
		from += ": stubDomains " + strings.Join(parts, " ")
	}
	if len(ups) > 0 {
		from += fmt.Sprintf(": upstreamNameservers %s (they replace --upstream, as in node-local-dns)", joinAddrs(ups))
	}
	m.set("kube-dns-config-dir", kubeDNSMountPath, from+"; the DaemonSet mounts it here")
	return nil
}

// joinAddrs is addrs as a comma list, the form --stub-domain and
// --upstream take.
func joinAddrs(addrs []netip.AddrPort) string {
	var b strings.Builder
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	return b.String()
}
