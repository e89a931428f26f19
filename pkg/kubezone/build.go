package kubezone

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"sort"

	"github.com/miekg/dns"
)

// built is what one service contributes to the zone: its prebuilt names
// (base, SRV and their empty non-terminals) and its entry, from which the
// endpoint host names and PTRs are answered at query time, with the
// addresses the entry publishes PTRs for (scratch, see newEntry).
type built struct {
	nodes map[string]*node
	entry *svcEntry
	keys  []addrKey
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

// buildService computes every record of svc from its EndpointSlices; the
// base node answers host names through ref, whose entry the caller sets
// to the built one.
func (z *Zone) buildService(svc *svcModel, eps []*sliceModel, ref *svcRef) built {
	b := &svcBuilder{base: svc.Name + "." + svc.Namespace + ".svc." + z.cfg.Domain, ttl: z.cfg.ttlSeconds(),
		hosts: map[string][]netip.Addr{}, named: map[[2]string][]srvKey{}, out: built{nodes: map[string]*node{}}}
	e, keys := z.newEntry(svc, b.base, eps)
	b.out.entry, b.out.keys = e, keys
	if !validLabel(svc.Name) || !validName(b.base) {
		return b.out
	}
	if svc.ExternalName != "" {
		cname := &dns.CNAME{Hdr: b.hdr(b.base, dns.TypeCNAME), Target: svc.ExternalName}
		b.out.nodes[b.base] = newNode([]dns.RR{cname}, nil, kindCNAME)
		return b.out
	}
	b.collectEndpoints(svc, e.slices)
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
	b.addrRR = map[string][]dns.RR{b.base: baseRRs}
	if svc.Headless {
		b.hostRRs() // the SRV targets of a headless service are its host names
	}
	var srv, extra []dns.RR
	if len(b.all) > 0 {
		srv, extra = b.srvRecords(b.base, b.all)
	}
	base := newNode(append(slices.Clip(baseRRs), srv...), extra, kindData)
	base.svc = ref
	b.out.nodes[b.base] = base
	for key, targets := range b.named {
		owner := "_" + key[0] + "._" + key[1] + "." + b.base
		proto := owner[len(key[0])+2:] // _<proto>.<base>, sharing owner's bytes (one string less per service)
		if !validLabel(key[0]) || !validName(owner) {
			continue
		}
		srv, extra := b.srvRecords(owner, targets)
		b.out.nodes[owner] = newNode(srv, extra, kindData)
		if b.out.nodes[proto] == nil && b.hosts[proto] == nil {
			b.out.nodes[proto] = newNode(nil, nil, kindData) // empty non-terminal (unless a host has the name)
		}
	}
	return b.out
}

// nodeNames calls f for every name buildService may have published for
// e's service and slices, and possibly for a few it did not: the base
// name, and for every named port of the service and of its slices, the
// SRV owner and its _<proto> empty non-terminal. The writer deletes these
// when the service changes, before it stores the new build's names, so a
// superset is harmless (the names are all under the service's own base
// name), and it costs no record building.
func (e *svcEntry) nodeNames(f func(name string)) {
	if !validLabel(e.svc.Name) || !validName(e.base) {
		return
	}
	f(e.base)
	port := func(name, proto string) {
		if name != "" {
			f("_" + name + "._" + proto + "." + e.base)
			f("_" + proto + "." + e.base)
		}
	}
	for _, p := range e.svc.Ports {
		port(p.Name, p.Protocol)
	}
	for _, es := range e.slices {
		for _, p := range es.Ports {
			port(p.Name, p.Protocol)
		}
	}
}

// collectEndpoints merges every ready endpoint of every slice: host names
// and (for headless services) SRV targets from the slice ports. The label
// choice must stay that of svcEntry.hostLabel, which answers host names,
// and labelKeyOf, which counts them.
func (b *svcBuilder) collectEndpoints(svc *svcModel, eps []*sliceModel) {
	owners := map[string]string{} // host label → owner name, built once
	for _, es := range eps {
		for i := range es.Endpoints.len() {
			a, label := es.Endpoints.addr(i), es.Endpoints.host(i)
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

// hostRRs adds the address records of every host name to b.addrRR, for the
// additional sections of SRV answers. Host names get no node: Lookup
// answers them from the svcEntry.
func (b *svcBuilder) hostRRs() {
	for owner, addrs := range b.hosts {
		rrs := make([]dns.RR, 0, len(addrs))
		sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
		for _, a := range addrs {
			rrs = append(rrs, addrRR(owner, a, b.ttl))
		}
		sortRRs(rrs)
		b.addrRR[owner] = rrs
	}
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
	// The records of a name share one array: a dns.SRV is 56 bytes, 64
	// when allocated alone (~0.6 MB over the SRVs of 10k services). They
	// live and die together with the node anyway.
	recs := make([]dns.SRV, len(keys))
	for i, k := range keys {
		recs[i] = dns.SRV{Hdr: b.hdr(owner, dns.TypeSRV), Priority: 0, Weight: weight, Port: k.port, Target: k.target}
		srv = append(srv, &recs[i])
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
	slices.SortStableFunc(rrs, func(a, b dns.RR) int { return cmp.Compare(a.Header().Rrtype, b.Header().Rrtype) })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
