package kubezone

import (
	"net"
	"net/netip"
	"slices"
	"sort"

	"github.com/miekg/dns"
)

// ptrEntry is one PTR a service contributes to a reverse name.
type ptrEntry struct {
	rev    string // reverse owner name
	target string // <svc>.<ns>.svc.<zone> or <host>.<svc>.<ns>.svc.<zone>
}

// built is what one service contributes to the zone.
type built struct {
	nodes     map[string]*node
	ptrs      []ptrEntry
	endpoints int // distinct ready endpoint addresses
}

// srvKey identifies one SRV record before weights are known.
type srvKey struct {
	target string
	port   uint16
}

// svcBuilder collects the records of one service.
type svcBuilder struct {
	z     *Zone
	base  string
	ttl   uint32
	hosts map[string][]netip.Addr // host label → addresses
	named map[[2]string][]srvKey  // (port name, proto) → SRV targets
	all   []srvKey                // SRV records at the service name
	out   built
}

// buildService computes every record of svc from its EndpointSlices.
func (z *Zone) buildService(svc *svcModel, eps map[string]*sliceModel) built {
	b := &svcBuilder{z: z, base: svc.Name + "." + svc.Namespace + ".svc." + z.cfg.Domain, ttl: z.cfg.ttlSeconds(),
		hosts: map[string][]netip.Addr{}, named: map[[2]string][]srvKey{}, out: built{nodes: map[string]*node{}}}
	if !validLabel(svc.Name) || !validName(b.base) {
		return b.out
	}
	if svc.ExternalName != "" {
		cname := &dns.CNAME{Hdr: b.hdr(b.base, dns.TypeCNAME), Target: svc.ExternalName}
		b.out.nodes[b.base] = &node{rrs: []dns.RR{cname}, kind: kindCNAME}
		return b.out
	}
	b.collectEndpoints(svc, eps)
	var baseRRs []dns.RR
	if svc.Headless {
		if len(b.hosts) == 0 {
			return b.out // headless without ready endpoints: NXDOMAIN
		}
		seen := map[netip.Addr]bool{}
		for _, label := range sortedKeys(b.hosts) {
			for _, a := range b.hosts[label] {
				if !seen[a] {
					seen[a] = true
					baseRRs = append(baseRRs, b.addrRR(b.base, a))
				}
			}
		}
	} else {
		for _, a := range svc.ClusterIPs {
			baseRRs = append(baseRRs, b.addrRR(b.base, a))
			b.out.ptrs = append(b.out.ptrs, ptrEntry{rev: reverseName(a), target: b.base})
		}
		for _, p := range svc.Ports {
			k := srvKey{target: b.base, port: p.Port}
			b.all = append(b.all, k)
			if p.Name != "" {
				b.named[[2]string{p.Name, p.Protocol}] = append(b.named[[2]string{p.Name, p.Protocol}], k)
			}
		}
	}
	hostRRs := b.hostNodes()
	hostRRs[b.base] = baseRRs
	sortRRs(baseRRs)
	baseNode := &node{rrs: baseRRs}
	b.out.nodes[b.base] = baseNode
	if len(b.all) > 0 {
		srv, extra := b.srvRecords(b.base, b.all, hostRRs)
		baseNode.rrs = append(slices.Clip(baseRRs), srv...)
		baseNode.extra = extra
		sortRRs(baseNode.rrs)
	}
	for key, targets := range b.named {
		if !validLabel("_"+key[0]) || !validName("_"+key[0]+"._"+key[1]+"."+b.base) {
			continue
		}
		proto := "_" + key[1] + "." + b.base
		owner := "_" + key[0] + "." + proto
		srv, extra := b.srvRecords(owner, targets, hostRRs)
		b.out.nodes[owner] = &node{rrs: srv, extra: extra}
		if b.out.nodes[proto] == nil {
			b.out.nodes[proto] = &node{} // empty non-terminal
		}
	}
	return b.out
}

// collectEndpoints merges every ready endpoint of every slice: host labels,
// PTRs, and (for headless services) SRV targets from the slice ports.
func (b *svcBuilder) collectEndpoints(svc *svcModel, eps map[string]*sliceModel) {
	seenPTR := map[ptrEntry]bool{}
	seenAddr := map[netip.Addr]bool{}
	for _, name := range sortedKeys(eps) {
		es := eps[name]
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addrs {
				label := ep.Hostname
				if !validLabel(label) || !validName(label+"."+b.base) {
					label = dashedIP(a)
				}
				if !slices.Contains(b.hosts[label], a) {
					b.hosts[label] = append(b.hosts[label], a)
				}
				target := label + "." + b.base
				if pe := (ptrEntry{rev: reverseName(a), target: target}); !seenPTR[pe] {
					seenPTR[pe] = true
					b.out.ptrs = append(b.out.ptrs, pe)
				}
				if !seenAddr[a] {
					seenAddr[a] = true
					b.out.endpoints++
				}
				if !svc.Headless {
					continue
				}
				for _, p := range es.Ports {
					k := srvKey{target: target, port: p.Port}
					b.all = append(b.all, k) // srvRecords removes duplicates
					if p.Name != "" {
						nk := [2]string{p.Name, p.Protocol}
						b.named[nk] = append(b.named[nk], k)
					}
				}
			}
		}
	}
}

// hostNodes adds one node per host label and returns owner → address RRs.
func (b *svcBuilder) hostNodes() map[string][]dns.RR {
	out := make(map[string][]dns.RR, len(b.hosts)+1)
	for label, addrs := range b.hosts {
		owner := label + "." + b.base
		rrs := make([]dns.RR, 0, len(addrs))
		sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
		for _, a := range addrs {
			rrs = append(rrs, b.addrRR(owner, a))
		}
		sortRRs(rrs)
		out[owner] = rrs
		b.out.nodes[owner] = &node{rrs: rrs}
	}
	return out
}

// srvRecords builds the SRV RRset at owner, weight floor(100/N), with the
// targets' address records as additional section.
func (b *svcBuilder) srvRecords(owner string, keys []srvKey, addrs map[string][]dns.RR) (srv, extra []dns.RR) {
	keys = slices.Clone(keys)
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].target != keys[j].target {
			return keys[i].target < keys[j].target
		}
		return keys[i].port < keys[j].port
	})
	keys = slices.Compact(keys)
	weight := uint16(100 / len(keys))
	srv = make([]dns.RR, 0, len(keys))
	seen := map[string]bool{}
	for _, k := range keys {
		srv = append(srv, &dns.SRV{Hdr: b.hdr(owner, dns.TypeSRV), Priority: 0, Weight: weight, Port: k.port, Target: k.target})
		if !seen[k.target] {
			seen[k.target] = true
			extra = append(extra, addrs[k.target]...)
		}
	}
	return srv, extra
}

func (b *svcBuilder) hdr(owner string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: b.ttl}
}

func (b *svcBuilder) addrRR(owner string, a netip.Addr) dns.RR {
	return addrRR(owner, a, b.ttl)
}

// addrRR is an A or AAAA record for a.
func addrRR(owner string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IP(a.AsSlice())}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: net.IP(a.AsSlice())}
}

// sortRRs orders records by type, keeping the order within a type.
func sortRRs(rrs []dns.RR) {
	sort.SliceStable(rrs, func(i, j int) bool { return rrs[i].Header().Rrtype < rrs[j].Header().Rrtype })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
