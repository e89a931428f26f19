package doctor

import (
	"fmt"

	"github.com/nodecache/nodecache/pkg/iface"
)

// ipvsFindings warns when kube-proxy's kube-ipvs0 holds local IPs (IPVS mode): queries to them
// reach the Service's endpoints, never the agent, whatever its rules. Nothing is said otherwise.
func ipvsFindings(s iface.InterfaceStatus, source string) []Finding {
	if len(s.IPVSHeld) == 0 {
		return nil
	}
	return []Finding{{Check: "ipvs", Severity: Warn,
		Detail: fmt.Sprintf("%s holds %s (kube-proxy in IPVS mode, %s): queries to it go to the Service's endpoints, not to the agent",
			iface.IPVSLinkName, JoinIPs(s.IPVSHeld), source),
		Fix: "point pods at 169.254.20.10 with kubelet's clusterDNS and drop " + JoinIPs(s.IPVSHeld) + " from --local-ip (docs/operating.md)"}}
}
