package kubezone

import (
	"cmp"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// namedSRV is one SRV target of a named port.
type namedSRV struct {
	name, proto string
	key         srvKey
}

// makeHostRRs makes the address records of every host name, for the
// additional sections of SRV answers. Host names get no node: Lookup
// answers them from the svcEntry.
func (b *svcBuilder) makeHostRRs() {
	all := make([]dns.RR, 0, len(b.hosts)) // the owners' slices share it
	b.hostRRs = make([]ownerRRs, 0, len(b.hosts))
	b.eachHost(func(owner string, addrs []hostAddr) {
		slices.SortFunc(addrs, func(x, y hostAddr) int { return x.addr.Compare(y.addr) })
		start := len(all)
		for _, h := range addrs {
			all = append(all, b.arena.rr(owner, h.addr, b.ttl))
		}
		rrs := all[start:len(all):len(all)]
		sortRRs(rrs)
		b.hostRRs = append(b.hostRRs, ownerRRs{owner: owner, rrs: rrs})
	})
}

// eachTarget calls f with the address records of each distinct target of
// keys (sorted), in order: the service name's, or a host name's (found by
// walking the host names, sorted too, alongside).
func (b *svcBuilder) eachTarget(keys []srvKey, f func(rrs []dns.RR)) {
	j := 0
	for i, k := range keys {
		switch {
		case i > 0 && keys[i-1].target == k.target:
			continue
		case k.target == b.base:
			f(b.baseRRs)
			continue
		}
		for j < len(b.hostRRs) && b.hostRRs[j].owner < k.target {
			j++
		}
		if j < len(b.hostRRs) && b.hostRRs[j].owner == k.target {
			f(b.hostRRs[j].rrs)
		}
	}
}

// namedNodes adds the SRV name of every named port and its _<proto> empty
// non-terminal. A SRV name whose records the table holds already keeps
// its node: nothing is built for it.
func (b *svcBuilder) namedNodes() {
	slices.SortFunc(b.named, func(x, y namedSRV) int {
		return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.proto, y.proto))
	})
	for lo := 0; lo < len(b.named); {
		hi := lo + 1
		for hi < len(b.named) && b.named[hi].name == b.named[lo].name && b.named[hi].proto == b.named[lo].proto {
			hi++
		}
		g := b.named[lo:hi]
		lo = hi
		owner := "_" + g[0].name + "._" + g[0].proto + "." + b.base
		proto := owner[len(g[0].name)+2:] // _<proto>.<base>, sharing owner's bytes (one string less per service)
		if !validLabel(g[0].name) || !validName(owner) {
			continue
		}
		keys := slices.Grow(b.keys[:0], len(g))
		for _, t := range g {
			keys = append(keys, t.key)
		}
		b.keys = keys
		b.out.nodes[owner] = b.srvNode(owner, sortSRVKeys(keys))
		b.out.srvNames = append(b.out.srvNames, [2]string{g[0].name, g[0].proto})
		if b.out.nodes[proto] == nil && !b.hasHost(proto) {
			b.out.nodes[proto] = newNode(nil, nil, kindData) // empty non-terminal (unless a host has the name)
			b.out.ents = append(b.out.ents, g[0].proto)
		}
	}
}

// srvNode is the node of SRV name owner with targets keys (sorted and
// distinct): the table's own when it holds these records already.
func (b *svcBuilder) srvNode(owner string, keys []srvKey) *node {
	if o := b.prev(owner); o != nil && b.sameSRV(o, owner, keys) {
		return o
	}
	rrs, nAns := b.appendSRV(nil, owner, keys)
	return &node{rrs: rrs, nAns: uint32(nAns), kind: kindData}
}

// sameSRV reports whether o holds exactly the records srvNode would build.
func (b *svcBuilder) sameSRV(o *node, owner string, keys []srvKey) bool {
	ans := o.answers()
	if o.kind != kindData || o.svc != nil || len(ans) != len(keys) {
		return false
	}
	weight := uint16(100 / len(keys))
	for i, k := range keys {
		s, ok := ans[i].(*dns.SRV)
		if !ok || s.Hdr != b.hdr(owner, dns.TypeSRV) || s.Priority != 0 || s.Weight != weight || s.Port != k.port || s.Target != k.target {
			return false
		}
	}
	extra, same := o.extra(), true
	b.eachTarget(keys, func(rrs []dns.RR) {
		for _, rr := range rrs {
			same = same && len(extra) > 0 && sameRR(extra[0], rr)
			if same {
				extra = extra[1:]
			}
		}
	})
	return same && len(extra) == 0
}

// sortSRVKeys sorts keys by target and port and removes duplicates, in
// place.
func sortSRVKeys(keys []srvKey) []srvKey {
	slices.SortFunc(keys, func(x, y srvKey) int { return cmp.Or(strings.Compare(x.target, y.target), cmp.Compare(x.port, y.port)) })
	return slices.Compact(keys)
}

// appendSRV returns, in one new array, the records ans, then the SRV
// RRset at owner for keys (sorted and distinct), weight floor(100/N),
// then the targets' address records as additional section; nAns counts
// the records before that section.
func (b *svcBuilder) appendSRV(ans []dns.RR, owner string, keys []srvKey) (rrs []dns.RR, nAns int) {
	weight := uint16(100 / len(keys))
	n := 0
	b.eachTarget(keys, func(rrs []dns.RR) { n += len(rrs) })
	rrs = make([]dns.RR, 0, len(ans)+len(keys)+n)
	rrs = append(rrs, ans...)
	// The records of a name share one array: a dns.SRV is 56 bytes, 64
	// when allocated alone (~0.6 MB over the SRVs of 10k services). They
	// live and die together with the node anyway.
	recs := make([]dns.SRV, len(keys))
	for i, k := range keys {
		recs[i] = dns.SRV{Hdr: b.hdr(owner, dns.TypeSRV), Priority: 0, Weight: weight, Port: k.port, Target: k.target}
		rrs = append(rrs, &recs[i])
	}
	nAns = len(rrs)
	b.eachTarget(keys, func(addrs []dns.RR) { rrs = append(rrs, addrs...) })
	return rrs, nAns
}
