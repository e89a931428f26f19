package kubezone

import (
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// svcEntry is what the zone keeps of one service to answer, at query time,
// its endpoint host names (<label>.<svc>.<ns>.svc.<zone>) and the PTRs of
// its ClusterIPs and endpoint IPs: the models themselves, shared with the
// informer stores, rather than a prebuilt name, node and record per
// endpoint. It is immutable, replaced whole in the service's svcRef when
// the service or one of its slices changes, and doubles as the writer's
// memory of what the service contributed (its models tell which names and
// PTR slots to remove).
type svcEntry struct {
	svc    *svcModel
	base   string        // <svc>.<ns>.svc.<zone>, the same string as the base node's name
	slices []*sliceModel // a copy of slicesBySvc at build time (in one when it holds one slice)
	// one holds the slice of a service of one slice, as most are, without
	// an allocation of its own: the entry's size class has room for it.
	one [1]*sliceModel
	// published is false when the service publishes no endpoint names or
	// PTRs: an ExternalName service or a name that is not a valid label.
	published bool
	endpoints int32    // distinct ready endpoint addresses
	hostNames int32    // distinct endpoint host names
	idx       *epIndex // for services of epIndexMin endpoints or more; else nil
}

// hostLabel reports whether the host name label of an endpoint with
// hostname host is that hostname (true) or its dashed IP: the hostname when
// it makes a valid name under base (validLabel, and validName of the whole
// name, base being valid already).
func (e *svcEntry) hostLabel(host string) bool {
	return validLabel(host) && len(host)+1+len(e.base) <= 254
}

// hostAddrs returns the addresses of the host name label.<base>: distinct,
// sorted (IPv4 first), as the prebuilt host node had them. It scans the
// service's endpoints (services have few) and allocates.
func (e *svcEntry) hostAddrs(label string) []netip.Addr {
	if e.idx != nil {
		out := e.idx.hostAddrs(e, label)
		slices.SortFunc(out, netip.Addr.Compare)
		return slices.Compact(out)
	}
	var dashed netip.Addr // the address label names when it is a dashed IP
	parsed := false       // dashed is parsed at the first endpoint without a hostname label
	var out []netip.Addr
	for _, es := range e.slices {
		l := &es.Endpoints
		for i := range l.len() {
			// The hostname is read first and the address only when
			// needed: most endpoints are told apart by their hostname.
			if host := l.host(i); e.hostLabel(host) {
				if host == label {
					out = append(out, l.addr(i))
				}
				continue
			}
			a := l.addr(i)
			var match bool
			if a.Zone() != "" { // never from the API; parseDashedIP refuses zones
				match = dashedIP(a) == label
			} else {
				if !parsed {
					parsed = true
					if d, ok := parseDashedLabel(label); ok {
						dashed = d
					}
				}
				match = dashed.IsValid() && a == dashed
			}
			if match {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// parseDashedLabel parses label when it is exactly the dashed form of an
// address. Labels that cannot be one are refused without calling
// netip.ParseAddr, whose errors allocate: an NXDOMAIN under a service name
// stays free of allocations.
func parseDashedLabel(label string) (netip.Addr, bool) {
	dashes, letters := 0, false
	for i := 0; i < len(label); i++ {
		switch c := label[i]; {
		case c == '-':
			dashes++
		case '0' <= c && c <= '9':
		case 'a' <= c && c <= 'f':
			letters = true
		default:
			return netip.Addr{}, false
		}
	}
	switch {
	case dashes < 2: // 10-1-2-3 has three, fd00--1 two
		return netip.Addr{}, false
	case dashes == 3 && !letters && !strings.Contains(label, "--"):
		// IPv4, parsed here without allocating; four groups of digits
		// without "::" are no IPv6 address either (1--2-3 is 1::2:3).
		return parseDashed4(label)
	}
	a, ok := parseDashedIP(label)
	return a, ok && dashedIP(a) == label
}

// parseDashed4 parses "10-1-2-3" written as dashedIP writes it (no leading
// zeros).
func parseDashed4(label string) (netip.Addr, bool) {
	v, ok := parseQuad(label, '-')
	if !ok {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(v), true
}

// ptrTargets appends the PTR targets of address k that e publishes: its
// base name for a ClusterIP, the host name of every endpoint with k.
func (e *svcEntry) ptrTargets(k addrKey, out []string) []string {
	if !e.published {
		return out
	}
	if !e.svc.Headless {
		for _, a := range e.svc.ClusterIPs {
			if a.As16() == k {
				out = append(out, e.base)
			}
		}
	}
	if e.idx != nil {
		return e.idx.ptrTargets(e, keyAddr(k), out)
	}
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			if es.Endpoints.addr(i).As16() == k {
				out = append(out, e.hostOwner(es.Endpoints.at(i)))
			}
		}
	}
	return out
}

// hostOwner is the host name of ep.
func (e *svcEntry) hostOwner(ep epModel) string {
	if e.hostLabel(ep.Hostname) {
		return ep.Hostname + "." + e.base
	}
	return dashedIP(ep.Addr) + "." + e.base
}

// hasPTR reports whether e publishes a PTR for address k (as ptrTargets
// would find one), without allocating.
func (e *svcEntry) hasPTR(k addrKey) bool {
	if !e.published {
		return false
	}
	if !e.svc.Headless {
		for _, a := range e.svc.ClusterIPs {
			if a.As16() == k {
				return true
			}
		}
	}
	if e.idx != nil {
		return len(e.idx.withAddr(e, keyAddr(k))) > 0
	}
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			if es.Endpoints.addr(i).As16() == k {
				return true
			}
		}
	}
	return false
}

// ownsPTR reports whether a service of owners (the slots of k, read once)
// publishes a PTR for k in its current entry: a reader that loaded the
// slots before the writer removed one may find the entry that replaced
// the slot's, without the address.
func ownsPTR(owners []*svcRef, k addrKey) bool {
	for _, o := range owners {
		if o.entry().hasPTR(k) {
			return true
		}
	}
	return false
}

// endpointHost answers qname when it is the host name of an endpoint of a
// service (label.<svc>.<ns>.svc.<zone>, found through the service's base
// node; label and rest are qname's first label and the rest). ok is false
// for any other name.
func (z *Zone) endpointHost(qname, label, rest string, qtype uint16, m *meta) (ans Answer, ok bool) {
	mid, isSvc := strings.CutSuffix(rest, z.svcSuffix)
	if dot := strings.IndexByte(mid, '.'); !isSvc || dot < 0 || strings.IndexByte(mid[dot+1:], '.') >= 0 {
		return Answer{}, false // rest is not <svc>.<ns>.svc.<zone>: one dot in mid
	}
	n := z.tab.get(rest)
	if n == nil || n.svc == nil {
		return Answer{}, false
	}
	addrs := n.svc.entry().hostAddrs(label)
	if len(addrs) == 0 {
		return Answer{}, false
	}
	ttl := z.cfg.ttlSeconds()
	rrs := make([]dns.RR, 0, len(addrs))
	for _, a := range addrs {
		if qtype == dns.TypeANY || (qtype == dns.TypeA && a.Is4()) || (qtype == dns.TypeAAAA && !a.Is4()) {
			rrs = append(rrs, addrRR(qname, a, ttl))
		}
	}
	if len(rrs) == 0 {
		return z.negative(qname, dns.RcodeSuccess, m), true
	}
	return Answer{Answer: rrs}, true
}

// ptrAnswer answers the reverse name qname of address k, whose slots are
// owners: one PTR per distinct target, sorted; REFUSED (upstream's) when
// no service publishes one. Each entry is read once, so that a writer
// replacing it meanwhile cannot leave a NOERROR without records.
func (z *Zone) ptrAnswer(qname string, k addrKey, owners []*svcRef, qtype uint16, m *meta) Answer {
	if qtype != dns.TypePTR && qtype != dns.TypeANY || z.snapshotStale() {
		switch {
		case !ownsPTR(owners, k):
			return Answer{Rcode: dns.RcodeRefused}
		case z.snapshotStale():
			return Answer{Rcode: dns.RcodeServerFailure}
		}
		return z.negative(qname, dns.RcodeSuccess, m)
	}
	rrs := z.ptrRecords(qname, owners, k)
	if len(rrs) == 0 {
		return Answer{Rcode: dns.RcodeRefused}
	}
	return Answer{Answer: rrs}
}

// ptrRecords builds the PTR records at rev of the services in owners.
func (z *Zone) ptrRecords(rev string, owners []*svcRef, k addrKey) []dns.RR {
	var targets []string
	for _, o := range owners {
		targets = o.entry().ptrTargets(k, targets)
	}
	sort.Strings(targets)
	targets = slices.Compact(targets)
	rrs := make([]dns.RR, 0, len(targets))
	for _, t := range targets {
		rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET,
			Ttl: z.cfg.ttlSeconds()}, Ptr: t})
	}
	return rrs
}

// hostRecords calls f with the address records of every endpoint host name
// of e (for List).
func (z *Zone) hostRecords(e *svcEntry, f func(dns.RR)) {
	owners := map[string][]netip.Addr{}
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			ep := es.Endpoints.at(i)
			owner := e.hostOwner(ep)
			owners[owner] = append(owners[owner], ep.Addr)
		}
	}
	for owner, addrs := range owners {
		slices.SortFunc(addrs, netip.Addr.Compare)
		for _, a := range slices.Compact(addrs) {
			f(addrRR(owner, a, z.cfg.ttlSeconds()))
		}
	}
}
