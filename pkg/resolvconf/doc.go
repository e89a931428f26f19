// Package resolvconf reads resolv.conf files and builds the search list
// kubelet gives a pod. It is the one reader behind the agent's upstreams
// (--upstream FILE), autopath's node search list, `nodecache explain` and
// doctor, and the one search-list builder behind autopath and explain.
//
// Parse keeps what its callers need apart: the nameserver lines with their
// line numbers (so a bad address is reported where it is), the last
// `search` line as kubelet reads it, and the last `domain` line, which a
// stub resolver honours but kubelet ignores. miekg/dns's
// ClientConfigFromReader folds `domain` into the search list and turns an
// unparsable ndots into 0, so it cannot tell the two readings apart.
//
// PodSearch follows kubelet's GetPodDNS (pkg/kubelet/network/dns): the
// dnsPolicy picks the base list, dnsConfig.searches are appended,
// duplicates are dropped (exact match), and the list is cut to the
// expanded limits (32 domains, 2048 characters, no domain over 253).
//
// There is no config and there are no metrics.
package resolvconf
