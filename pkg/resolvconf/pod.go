package resolvconf

import "strings"

// Kubelet's limits on a pod's search list (Kubernetes validation, expanded
// DNS config, GA since 1.28).
const (
	MaxSearchPaths     = 32   // domains
	MaxSearchListChars = 2048 // the search line's domains joined by spaces
	maxDomainLen       = 253  // a longer domain is dropped
)

// Pod is what kubelet looks at to build a pod's search list.
type Pod struct {
	Namespace   string
	DNSPolicy   string // ClusterFirst (also ""), ClusterFirstWithHostNet, Default or None
	HostNetwork bool
	// Searches is the pod's dnsConfig.searches, appended to the base list.
	Searches []string
}

// PodSearch returns the search list kubelet writes into pod's resolv.conf,
// given the cluster domain (a trailing dot is ignored) and the node's
// search list as Conf.Search reads it:
//
//   - ClusterFirst, or ClusterFirstWithHostNet: <ns>.svc.<domain>
//     svc.<domain> <domain>, then the node's list; the node's list alone
//     when the cluster domain is empty.
//   - Default, or ClusterFirst on the host network: the node's list.
//   - None: empty.
//
// Then dnsConfig.searches are appended, exact duplicates dropped (the first
// stays), and the list cut to kubelet's limits: the first MaxSearchPaths
// domains, without any longer than 253 characters, then domains taken off
// the end until the line fits MaxSearchListChars.
//
// Not followed, as the agent cannot see them: kubelet without clusterDNS
// treats ClusterFirst as Default, and kubelet with an empty --resolv-conf
// gives Default pods the search list ".".
func PodSearch(clusterDomain string, host []string, pod Pod) []string {
	var base []string
	switch {
	case pod.DNSPolicy == "None":
	case pod.DNSPolicy == "Default" || (pod.HostNetwork && (pod.DNSPolicy == "ClusterFirst" || pod.DNSPolicy == "")):
		base = host
	default:
		base = clusterSearch(strings.TrimSuffix(clusterDomain, "."), pod.Namespace, host)
	}
	list := make([]string, 0, len(base)+len(pod.Searches))
	list = append(append(list, base...), pod.Searches...)
	return fitLimits(omitDuplicates(list))
}

func clusterSearch(domain, ns string, host []string) []string {
	if domain == "" {
		return host
	}
	return append([]string{ns + ".svc." + domain, "svc." + domain, domain}, host...)
}

func omitDuplicates(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func fitLimits(list []string) []string {
	if len(list) > MaxSearchPaths {
		list = list[:MaxSearchPaths]
	}
	out := list[:0]
	chars := -1 // n domains take n-1 spaces
	for _, s := range list {
		if len(s) <= maxDomainLen {
			out = append(out, s)
			chars += len(s) + 1
		}
	}
	for chars > MaxSearchListChars {
		chars -= len(out[len(out)-1]) + 1
		out = out[:len(out)-1]
	}
	return out
}
