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

// contribution is what the writer remembers of a service's records: the
// models they were built from. Rebuilding those (on the next change of the
// service) tells which names and PTRs to remove; that costs a second build
// per update but saves ~45 bytes per name against keeping the name lists.
type contribution struct {
	svc       *svcModel
	slices    []*sliceModel // a copy of slicesBySvc at build time
	endpoints int
}

// srvKey identifies one SRV record before weights are known.
type srvKey struct {
	target string
	port   uint16
}

// svcBuilder collects the records of one service.
type svcBuilder struct {
	base   string
	ttl    uint32
	hosts  map[string][]netip.Addr // host owner name → addresses
	named  map[[2]string][]srvKey  // (port name, proto) → SRV targets
	all    []srvKey                // SRV records at the service name
	out    built
	addrRR map[string][]dns.RR // owner → its A/AAAA records, for SRV additional sections
}

// buildService computes every record of svc from its EndpointSlices.
func (z *Zone) buildService(svc *svcModel, eps []*sliceModel) built {
	b := &svcBuilder{base: svc.Name + "." + svc.Namespace + ".svc." + z.cfg.Domain, ttl: z.cfg.ttlSeconds(),
		hosts: map[string][]netip.Addr{}, named: map[[2]string][]srvKey{}, out: built{nodes: map[string]*node{}}}
	if !validLabel(svc.Name) || !validName(b.base) {
		return b.out
	}
	if svc.ExternalName != "" {
		cname := &dns.CNAME{Hdr: b.hdr(b.base, dns.TypeCNAME), Target: svc.ExternalName}
		b.out.nodes[b.base] = newNode([]dns.RR{cname}, nil, kindCNAME)
		return b.out
	}
	b.collectEndpoints(svc, eps)
	var baseRRs []dns.RR
	if svc.Headless {
		if len(b.hosts) == 0 {
			return b.out // headless without ready endpoints: NXDOMAIN
		}
		seen := map[netip.Addr]bool{}
		for _, owner := range sortedKeys(b.hosts) {
			for _, a := range b.hosts[owner] {
				if !seen[a] {
					seen[a] = true
					baseRRs = append(baseRRs, addrRR(b.base, a, b.ttl))
				}
			}
		}
	} else {
		for _, a := range svc.ClusterIPs {
			baseRRs = append(baseRRs, addrRR(b.base, a, b.ttl))
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
	sortRRs(baseRRs)
	b.addrRR = b.hostNodes()
	b.addrRR[b.base] = baseRRs
	var srv, extra []dns.RR
	if len(b.all) > 0 {
		srv, extra = b.srvRecords(b.base, b.all)
	}
	b.out.nodes[b.base] = newNode(append(slices.Clip(baseRRs), srv...), extra, kindData)
	for key, targets := range b.named {
		proto := "_" + key[1] + "." + b.base
		owner := "_" + key[0] + "." + proto
		if !validLabel(key[0]) || !validName(owner) {
			continue
		}
		srv, extra := b.srvRecords(owner, targets)
		b.out.nodes[owner] = newNode(srv, extra, kindData)
		if b.out.nodes[proto] == nil {
			b.out.nodes[proto] = newNode(nil, nil, kindData) // empty non-terminal
		}
	}
	return b.out
}

// collectEndpoints merges every ready endpoint of every slice: host names,
// PTRs, and (for headless services) SRV targets from the slice ports.
func (b *svcBuilder) collectEndpoints(svc *svcModel, eps []*sliceModel) {
	seenPTR := map[ptrEntry]bool{}
	seenAddr := map[netip.Addr]bool{}
	owners := map[string]string{} // host label → owner name, built once
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			a, label := ep.Addr, ep.Hostname
			if !validLabel(label) || !validName(label+"."+b.base) {
				label = dashedIP(a)
			}
			owner, ok := owners[label]
			if !ok {
				owner = label + "." + b.base
				owners[label] = owner
			}
			if !slices.Contains(b.hosts[owner], a) {
				b.hosts[owner] = append(b.hosts[owner], a)
			}
			if pe := (ptrEntry{rev: reverseName(a), target: owner}); !seenPTR[pe] {
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
				k := srvKey{target: owner, port: p.Port}
				b.all = append(b.all, k) // srvRecords removes duplicates
				if p.Name != "" {
					nk := [2]string{p.Name, p.Protocol}
					b.named[nk] = append(b.named[nk], k)
				}
			}
		}
	}
}

// hostNodes adds one node per host name and returns owner → address RRs.
func (b *svcBuilder) hostNodes() map[string][]dns.RR {
	out := make(map[string][]dns.RR, len(b.hosts)+1)
	for owner, addrs := range b.hosts {
		rrs := make([]dns.RR, 0, len(addrs))
		sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
		for _, a := range addrs {
			rrs = append(rrs, addrRR(owner, a, b.ttl))
		}
		n := newNode(rrs, nil, kindData)
		out[owner] = n.rrs
		b.out.nodes[owner] = n
	}
	return out
}

// srvRecords builds the SRV RRset at owner, weight floor(100/N), with the
// targets' address records as additional section.
func (b *svcBuilder) srvRecords(owner string, keys []srvKey) (srv, extra []dns.RR) {
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
	for i, k := range keys {
		srv = append(srv, &dns.SRV{Hdr: b.hdr(owner, dns.TypeSRV), Priority: 0, Weight: weight, Port: k.port, Target: k.target})
		if i == 0 || keys[i-1].target != k.target {
			extra = append(extra, b.addrRR[k.target]...)
		}
	}
	return srv, extra
}

func (b *svcBuilder) hdr(owner string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: b.ttl}
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
