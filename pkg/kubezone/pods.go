package kubezone

import (
	"net/netip"

	"github.com/miekg/dns"
)

// PodInfo describes a pod running on this node, for mapping a client IP to
// its pod (autopath, `nodecache top`).
type PodInfo struct {
	Namespace   string
	Name        string
	Phase       string // Pending, Running, Succeeded, Failed, Unknown
	DNSPolicy   string // ClusterFirst, ClusterFirstWithHostNet, Default, None
	HostNetwork bool
	// Shared is true when more than one node-local pod has this IP (host
	// network pods share the node's IPs): the client is then ambiguous and
	// Namespace/Name are those of one of them (the first by namespace/name).
	Shared bool
	// CustomDNS is true when the pod's spec.dnsConfig sets searches or
	// options, so its search path is not the cluster default.
	CustomDNS bool
}

// DefaultDNS reports whether the pod resolves through the node's own
// resolv.conf rather than the cluster DNS (dnsPolicy Default, or host
// network with ClusterFirst, which Kubernetes treats as Default).
func (p PodInfo) DefaultDNS() bool {
	return p.DNSPolicy == "Default" || (p.HostNetwork && p.DNSPolicy == "ClusterFirst")
}

// PodByIP returns the node-local pod that has ip. It never blocks.
func (z *Zone) PodByIP(ip netip.Addr) (PodInfo, bool) {
	p, ok := (*z.localPods.Load())[ip.Unmap()]
	return p, ok
}

// PodByName returns the node-local pod namespace/name. It never blocks;
// it walks the node's pods, for the admin API, not the query path.
func (z *Zone) PodByName(namespace, name string) (PodInfo, bool) {
	for _, p := range *z.localPods.Load() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return PodInfo{}, false
}

// applyPodLocked updates the pod models, the verified pod record counts
// and marks node-local changes.
func (z *Zone) applyPodLocked(ev event, b *batch) {
	st := z.st
	if old := st.pods[ev.key]; old != nil {
		z.podRecordsLocked(old, -1, b)
		b.local = b.local || z.isLocal(old)
		delete(st.pods, ev.key)
	}
	if p, ok := ev.obj.(*podModel); ok {
		st.pods[ev.key] = p
		z.podRecordsLocked(p, +1, b)
		b.local = b.local || z.isLocal(p)
	}
}

func (z *Zone) isLocal(p *podModel) bool {
	return z.cfg.NodeName != "" && p.Node == z.cfg.NodeName
}

// podRecordsLocked adds delta to the record count of each name of p in
// verified mode. Host-network pods have the node's IP, not their own, and
// publish no pod record.
func (z *Zone) podRecordsLocked(p *podModel, delta int, b *batch) {
	if z.cfg.Pods != PodsVerified || p.HostNetwork {
		return
	}
	for _, ip := range p.IPs {
		name := dashedIP(ip) + "." + p.Namespace + ".pod." + z.cfg.Domain
		if !validName(name) {
			continue
		}
		z.st.podRecs[name] += delta
		if z.st.podRecs[name] <= 0 {
			delete(z.st.podRecs, name)
		}
		mark(&b.podRecs, name)
	}
}

// podRecordNode is the node of a verified pod name, nil when no pod has it.
func (z *Zone) podRecordNode(name string, count int) *node {
	if count <= 0 {
		return nil
	}
	label, _ := firstLabel(name)
	ip, ok := parseDashedIP(label)
	if !ok {
		return nil
	}
	return newNode([]dns.RR{addrRR(name, ip, z.cfg.ttlSeconds())}, nil, kindData)
}

// publishLocalPodsLocked rebuilds the node-local IP → pod map (a node runs
// at most a few hundred pods, so a full copy per change is cheap).
func (z *Zone) publishLocalPodsLocked() {
	m := map[netip.Addr]PodInfo{}
	for _, key := range sortedKeys(z.st.pods) {
		p := z.st.pods[key]
		if !z.isLocal(p) {
			continue
		}
		for _, ip := range p.IPs {
			if prev, ok := m[ip]; ok {
				prev.Shared = true
				m[ip] = prev
				continue
			}
			m[ip] = PodInfo{Namespace: p.Namespace, Name: p.Name, Phase: p.Phase, DNSPolicy: p.DNSPolicy,
				HostNetwork: p.HostNetwork, CustomDNS: p.CustomDNS}
		}
	}
	z.localPods.Store(&m)
}
