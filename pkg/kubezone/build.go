package kubezone

import (
	"cmp"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// built is what one service contributes to the zone: its prebuilt names
// (base, SRV and their empty non-terminals) and its entry, from which the
// endpoint host names and PTRs are answered at query time, with the
// addresses the entry publishes PTRs for (scratch, see newEntry).
type built struct {
	nodes    map[string]*node
	entry    *svcEntry
	keys     []addrKey
	srvNames [][2]string // (port name, proto) of every _<port>._<proto> name in nodes
	ents     []string    // proto of every _<proto> empty non-terminal in nodes
}

// srvKey identifies one SRV record before weights are known.
type srvKey struct {
	target string
	port   uint16
}

// svcBuilder collects the records of one service.
type svcBuilder struct {
	base    string
	ttl     uint32
	hosts   []hostAddr // every distinct (host owner name, address), by owner name, else as listed
	named   []namedSRV // the SRV targets of every named port, unsorted
	all     []srvKey   // SRV records at the service name
	out     built
	baseRRs []dns.RR                // the address records at the service name
	hostRRs []ownerRRs              // each host name's address records, by owner name (headless), for SRV additional sections
	arena   addrArena               // the headless service's address records
	prev    func(name string) *node // the node the table holds at name, nil for none
	keys    []srvKey                // scratch for one SRV name's targets
}

// ownerRRs are the address records of one owner name.
type ownerRRs struct {
	owner string
	rrs   []dns.RR
}

// hostAddr is an address of an endpoint host name.
type hostAddr struct {
	owner string
	addr  netip.Addr
}

// buildService computes every record of svc from its EndpointSlices; the
// base node answers host names through ref, whose entry the caller sets
// to the built one. base is the service's name when known (the entry
// before holds it), else "".
func (z *Zone) buildService(svc *svcModel, eps []*sliceModel, ref *svcRef, base string) built {
	if base == "" {
		base = svc.Name + "." + svc.Namespace + ".svc." + z.cfg.Domain
	}
	names := 1 + len(svc.Ports) // base, SRV names and empty non-terminals: a hint
	for _, es := range eps {
		names += len(es.Ports)
	}
	b := &svcBuilder{base: base, ttl: z.cfg.ttlSeconds(), out: built{nodes: make(map[string]*node, names)}, prev: z.tab.get}
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
		baseRRs = b.headlessRRs()
	} else {
		for _, a := range svc.ClusterIPs {
			baseRRs = append(baseRRs, addrRR(b.base, a, b.ttl))
		}
		for _, p := range svc.Ports {
			k := srvKey{target: b.base, port: p.Port}
			b.all = append(b.all, k)
			if p.Name != "" {
				b.named = append(b.named, namedSRV{name: p.Name, proto: p.Protocol, key: k})
			}
		}
	}
	sortRRs(baseRRs)
	b.baseRRs = baseRRs
	if svc.Headless {
		b.makeHostRRs() // the SRV targets of a headless service are its host names
	}
	rrs, nAns := slices.Clip(baseRRs), len(baseRRs)
	if len(b.all) > 0 { // address records sort before SRV records
		rrs, nAns = b.appendSRV(baseRRs, b.base, sortSRVKeys(b.all))
	}
	b.out.nodes[b.base] = &node{rrs: rrs, nAns: uint32(nAns), kind: kindData, svc: ref}
	b.namedNodes()
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
	e.namedPorts(func(name, proto string) {
		f("_" + name + "._" + proto + "." + e.base)
		f("_" + proto + "." + e.base)
	})
}

// namedPorts calls f for every named port of e's service and slices.
func (e *svcEntry) namedPorts(f func(name, proto string)) {
	for _, p := range e.svc.Ports {
		if p.Name != "" {
			f(p.Name, p.Protocol)
		}
	}
	for _, es := range e.slices {
		for _, p := range es.Ports {
			if p.Name != "" {
				f(p.Name, p.Protocol)
			}
		}
	}
}

// collectEndpoints merges every ready endpoint of every slice: host names
// and (for headless services) SRV targets from the slice ports. The label
// choice must stay that of svcEntry.hostLabel, which answers host names,
// and labelKeyOf, which counts them.
func (b *svcBuilder) collectEndpoints(svc *svcModel, eps []*sliceModel) {
	n, srvs, named := 0, 0, 0
	for _, es := range eps {
		n += es.Endpoints.len()
		srvs += es.Endpoints.len() * len(es.Ports)
		for _, p := range es.Ports {
			if p.Name != "" {
				named += es.Endpoints.len()
			}
		}
	}
	// The owner names share one string: they live and die with the
	// service's nodes.
	labels := make([]string, 0, n)
	size := 0
	for _, es := range eps {
		for i := range es.Endpoints.len() {
			label := es.Endpoints.host(i)
			if !b.out.entry.hostLabel(label) { // the base name is valid: only the label and the length can fail
				label = dashedIP(es.Endpoints.addr(i))
			}
			labels = append(labels, label)
			size += len(label) + 1 + len(b.base)
		}
	}
	var sb strings.Builder
	sb.Grow(size)
	for _, label := range labels {
		sb.WriteString(label)
		sb.WriteByte('.')
		sb.WriteString(b.base)
	}
	names := sb.String()
	b.hosts = make([]hostAddr, 0, n)
	if svc.Headless {
		b.all = make([]srvKey, 0, srvs)
		b.named = make([]namedSRV, 0, named)
	}
	for _, es := range eps {
		for i := range es.Endpoints.len() {
			end := len(labels[len(b.hosts)]) + 1 + len(b.base)
			owner := names[:end]
			names = names[end:]
			b.hosts = append(b.hosts, hostAddr{owner: owner, addr: es.Endpoints.addr(i)})
			if !svc.Headless {
				continue
			}
			for _, p := range es.Ports {
				k := srvKey{target: owner, port: p.Port}
				b.all = append(b.all, k) // srvRecords removes duplicates
				if p.Name != "" {
					b.named = append(b.named, namedSRV{name: p.Name, proto: p.Protocol, key: k})
				}
			}
		}
	}
	// By owner name, each owner's addresses in the order listed, each once.
	slices.SortStableFunc(b.hosts, func(x, y hostAddr) int { return strings.Compare(x.owner, y.owner) })
	out := b.hosts[:0]
	for lo := 0; lo < len(b.hosts); {
		hi := lo + 1
		for hi < len(b.hosts) && b.hosts[hi].owner == b.hosts[lo].owner {
			hi++
		}
		start := len(out)
		for _, h := range b.hosts[lo:hi] {
			if !slices.ContainsFunc(out[start:], func(o hostAddr) bool { return o.addr == h.addr }) {
				out = append(out, h)
			}
		}
		lo = hi
	}
	b.hosts = out
}

// hasHost reports whether owner is the name of an endpoint host.
func (b *svcBuilder) hasHost(owner string) bool {
	_, found := slices.BinarySearchFunc(b.hosts, owner, func(h hostAddr, o string) int { return strings.Compare(h.owner, o) })
	return found
}

// eachHost calls f with every host owner name and its addresses (a
// sub-slice of b.hosts, in owner name order).
func (b *svcBuilder) eachHost(f func(owner string, addrs []hostAddr)) {
	for lo := 0; lo < len(b.hosts); {
		hi := lo + 1
		for hi < len(b.hosts) && b.hosts[hi].owner == b.hosts[lo].owner {
			hi++
		}
		f(b.hosts[lo].owner, b.hosts[lo:hi])
		lo = hi
	}
}

// headlessRRs returns the address records at the name of a headless
// service: every distinct endpoint address, in the order of the host
// names, then as listed. It makes the arena for them and the host names'
// records (hostRRs).
func (b *svcBuilder) headlessRRs() []dns.RR {
	addrs := make([]netip.Addr, 0, len(b.hosts))
	for _, h := range b.hosts {
		if !slices.Contains(addrs, h.addr) {
			addrs = append(addrs, h.addr)
		}
	}
	n4 := 0
	for _, a := range addrs {
		if a.Is4() {
			n4++
		}
	}
	for _, h := range b.hosts {
		if h.addr.Is4() {
			n4++
		}
	}
	b.arena = newAddrArena(n4, len(addrs)+len(b.hosts)-n4)
	rrs := make([]dns.RR, len(addrs))
	for i, a := range addrs {
		rrs[i] = b.arena.rr(b.base, a, b.ttl)
	}
	return rrs
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

// addrArena hands out A and AAAA records from arrays made once: a
// headless service's records live and die together with its nodes, and
// one allocation for all costs less than two a record (record and IP).
type addrArena struct {
	a    []dns.A
	aaaa []dns.AAAA
	ip   []byte
}

// newAddrArena makes room for n4 A records and n6 AAAA records.
func newAddrArena(n4, n6 int) addrArena {
	return addrArena{a: make([]dns.A, n4), aaaa: make([]dns.AAAA, n6), ip: make([]byte, 4*n4+16*n6)}
}

// rr is an A or AAAA record for a, from the arena while it has room.
func (ar *addrArena) rr(owner string, a netip.Addr, ttl uint32) dns.RR {
	hdr := dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}
	switch {
	case a.Is4() && len(ar.a) > 0:
		v := a.As4()
		ip := ar.ip[:4:4]
		copy(ip, v[:])
		r := &ar.a[0]
		*r = dns.A{Hdr: hdr, A: net.IP(ip)}
		ar.a, ar.ip = ar.a[1:], ar.ip[4:]
		return r
	case !a.Is4() && len(ar.aaaa) > 0:
		v := a.As16()
		ip := ar.ip[:16:16]
		copy(ip, v[:])
		r := &ar.aaaa[0]
		hdr.Rrtype = dns.TypeAAAA
		*r = dns.AAAA{Hdr: hdr, AAAA: net.IP(ip)}
		ar.aaaa, ar.ip = ar.aaaa[1:], ar.ip[16:]
		return r
	}
	return addrRR(owner, a, ttl)
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
