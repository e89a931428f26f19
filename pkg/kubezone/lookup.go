package kubezone

import (
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// maxChain is the longest ExternalName CNAME chain followed inside the zone.
const maxChain = 8

// Answer is the zone's reply to one question. Its slices are shared with
// the zone and with other answers: treat them as read-only. The server sets
// AA on every in-zone answer.
type Answer struct {
	Rcode             int // dns.RcodeSuccess, dns.RcodeNameError or dns.RcodeServerFailure
	Answer, Ns, Extra []dns.RR
	// Chase is non-empty when the answer ends in a CNAME to a name outside
	// the zone: the server must resolve Chase (same qtype) through the
	// cache and upstream, append its records and take its rcode (RFC 6604).
	Chase string
}

// InZone reports whether the zone answers qname (a lowercased FQDN): the
// cluster domain and every name below it, and the reverse names of the
// ClusterIPs and ready endpoint IPs it knows. Other reverse names belong to
// the upstream resolvers.
func (z *Zone) InZone(qname string) bool {
	qname = lower(qname)
	if isReverse(qname) {
		k, ok := parseReverse(qname)
		return ok && ownsPTR(z.ptrs.owners(k), k)
	}
	return inDomain(qname, z.cfg.Domain)
}

// inDomain reports whether name is d or below d.
func inDomain(name, d string) bool {
	if len(name) == len(d) {
		return name == d
	}
	return len(name) > len(d) && name[len(name)-len(d)-1] == '.' && strings.HasSuffix(name, d)
}

// Lookup answers qname (a lowercased FQDN; upper case costs an allocation)
// for qtype. Answers for service and SRV names, and negative answers, are
// prebuilt and returned without allocating. Endpoint host names
// (<host>.<svc>.<ns>.svc.<zone>) and PTRs are answered from the service's
// models at query time and allocate their records (the server memoizes
// packed answers, so a repeated query does not come here). Names outside
// the zone (InZone false) get REFUSED. Negative answers at reverse names
// carry an in-addr.arpa. or ip6.arpa. SOA, as CoreDNS does.
func (z *Zone) Lookup(qname string, qtype uint16) Answer {
	qname = lower(qname)
	m := z.meta.Load()
	if !inDomain(qname, z.cfg.Domain) {
		if !isReverse(qname) {
			return Answer{Rcode: dns.RcodeRefused} // not ours: the server forwards it
		}
		k, ok := parseReverse(qname)
		if !ok {
			return Answer{Rcode: dns.RcodeRefused} // not a reverse name the zone can own: upstream's
		}
		return z.ptrAnswer(qname, k, z.ptrs.owners(k), qtype, m) // slots read once: the writer may replace the shard meanwhile
	}
	if z.snapshotStale() && !z.impossible(qname) {
		return Answer{Rcode: dns.RcodeServerFailure} // see SnapshotProblem
	}
	ans, target := z.lookupName(qname, qtype, m)
	if target == "" {
		return ans
	}
	chain := ans.Answer
	for step := 1; ; step++ {
		if !inDomain(target, z.cfg.Domain) {
			return Answer{Answer: chain, Chase: target}
		}
		if step >= maxChain {
			return Answer{Answer: chain} // chain cut: the client sees a dangling CNAME
		}
		next, nextTarget := z.lookupName(target, qtype, m)
		chain = append(chain[:len(chain):len(chain)], next.Answer...)
		if nextTarget == "" {
			next.Answer = chain
			return next
		}
		target = nextTarget
	}
}

// lookupName answers one name without following CNAMEs; target is the
// CNAME target when the answer is a CNAME that must be followed.
func (z *Zone) lookupName(qname string, qtype uint16, m *meta) (ans Answer, target string) {
	n := z.tab.get(qname)
	if n == nil {
		label, rest := firstLabel(qname)
		if a, ok := z.endpointHost(qname, label, rest, qtype, m); ok {
			return a, ""
		}
		if z.cfg.Pods == PodsInsecure {
			if a, ok := z.insecurePod(qname, label, rest, qtype, m); ok {
				return a, ""
			}
		}
		return z.negative(qname, dns.RcodeNameError, m), ""
	}
	switch n.kind {
	case kindApex:
		switch qtype {
		case dns.TypeSOA:
			return Answer{Answer: m.soaRR}, ""
		case dns.TypeNS:
			return Answer{Answer: n.answers(), Extra: n.extra()}, ""
		}
		return Answer{Ns: m.soaRR}, ""
	case kindCNAME:
		switch qtype {
		case dns.TypeCNAME:
			return Answer{Answer: n.answers()}, ""
		case dns.TypeSRV: // docs/dns-behaviour.md: SRV on an ExternalName service is NODATA
			return z.negative(qname, dns.RcodeSuccess, m), ""
		}
		return Answer{Answer: n.answers()}, n.rrs[0].(*dns.CNAME).Target
	}
	rrs := n.answers()
	if qtype != dns.TypeANY {
		rrs = n.typed(qtype)
	}
	if len(rrs) == 0 {
		if n.kind == kindStatic {
			return Answer{Ns: m.soaRR}, ""
		}
		return z.negative(qname, dns.RcodeSuccess, m), ""
	}
	if qtype == dns.TypeSRV {
		return Answer{Answer: rrs, Extra: n.extra()}, ""
	}
	return Answer{Answer: rrs}, ""
}

// negative is NXDOMAIN or NODATA with the SOA, or SERVFAIL while the zone
// has no complete view yet and the name could still turn out to exist.
func (z *Zone) negative(qname string, rcode int, m *meta) Answer {
	if !z.authoritative() && !z.impossible(qname) {
		return Answer{Rcode: dns.RcodeServerFailure}
	}
	switch {
	case strings.HasSuffix(qname, ".in-addr.arpa."):
		return Answer{Rcode: rcode, Ns: m.rev4}
	case strings.HasSuffix(qname, ".ip6.arpa."):
		return Answer{Rcode: rcode, Ns: m.rev6}
	}
	return Answer{Rcode: rcode, Ns: m.soaRR}
}

// impossible reports names that no cluster object can create: a label
// under the zone other than svc and pod (dns is ours), or too many labels.
func (z *Zone) impossible(qname string) bool {
	if !inDomain(qname, z.cfg.Domain) || qname == z.cfg.Domain {
		return false
	}
	rel := qname[:len(qname)-len(z.cfg.Domain)] // "a.b.svc."
	labels := strings.Count(rel, ".")
	top := rel[strings.LastIndexByte(rel[:len(rel)-1], '.')+1 : len(rel)-1]
	switch top {
	case "svc":
		return labels > 5 // _port._proto.<svc>.<ns>.svc
	case "pod":
		return labels > 3 // <ip>.<ns>.pod
	}
	return true
}

// insecurePod answers <dashed-ip>.<ns>.pod.<zone> when the namespace
// exists. ok is false for names that are not such a pod name.
// label and rest are qname's first label and the rest.
func (z *Zone) insecurePod(qname, label, rest string, qtype uint16, m *meta) (ans Answer, ok bool) {
	suffix := z.podSuffix
	if !strings.HasSuffix(rest, suffix) || strings.IndexByte(rest, '.') != len(rest)-len(suffix) {
		return Answer{}, false
	}
	if ns := z.tab.get(rest); ns == nil {
		return Answer{}, false
	}
	ip, valid := parseDashedIP(label)
	if !valid {
		return Answer{}, false
	}
	if (qtype == dns.TypeA && ip.Is4()) || (qtype == dns.TypeAAAA && ip.Is6()) || qtype == dns.TypeANY {
		return Answer{Answer: []dns.RR{addrRR(qname, ip, z.cfg.ttlSeconds())}}, true
	}
	return Answer{Ns: m.soaRR}, true
}

// Record is one record of the zone, for `nodecache zone list/show`.
type Record struct {
	Name string // owner name, lowercased FQDN
	Type string // A, AAAA, SRV, PTR, CNAME, TXT, NS
	TTL  uint32
	Data string // presentation form of the RDATA
}

// List returns the records of namespace ns (its service, endpoint, SRV
// names, verified pod names, and PTRs pointing into it), or of the whole
// zone when ns is empty, sorted by name and type. It walks the whole
// table and PTR index: for operators, not for the query path.
func (z *Zone) List(ns string) []Record {
	var svcSuffix, podSuffix string
	if ns != "" {
		svcSuffix = "." + ns + ".svc." + z.cfg.Domain
		podSuffix = "." + ns + ".pod." + z.cfg.Domain
	}
	under := func(name string) bool {
		return ns == "" || strings.HasSuffix(name, svcSuffix) || strings.HasSuffix(name, podSuffix)
	}
	var out []Record
	z.tab.each(func(name string, n *node) {
		for _, rr := range n.answers() {
			if under(name) {
				out = append(out, toRecord(rr))
			}
		}
		if n.svc != nil && under(name) {
			z.hostRecords(n.svc.entry(), func(rr dns.RR) { out = append(out, toRecord(rr)) })
		}
		if n.kind == kindApex && ns == "" {
			out = append(out, toRecord(z.meta.Load().soaRR[0]))
		}
	})
	z.ptrs.each(func(k addrKey, owners []*svcRef) {
		for _, rr := range z.ptrRecords(reverseName(keyAddr(k)), owners, k) {
			if under(rr.(*dns.PTR).Ptr) {
				out = append(out, toRecord(rr))
			}
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Data < out[j].Data
	})
	return out
}

func toRecord(rr dns.RR) Record {
	h := rr.Header()
	return Record{Name: h.Name, Type: dns.TypeToString[h.Rrtype], TTL: h.Ttl,
		Data: strings.TrimPrefix(rr.String(), h.String())}
}
