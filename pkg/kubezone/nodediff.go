package kubezone

import (
	"slices"

	"github.com/miekg/dns"
)

// publishBuildLocked queues the names of nb, the new build of a service
// whose previous entry was old (nil: none). A name whose node answers
// exactly as the one in the table is left alone (an update of a headless
// service changes its base and SRV names, rarely its empty non-terminals,
// and a slice of other ports changes none of a port's names); an old name
// the build no longer has is removed.
func (z *Zone) publishBuildLocked(old *svcEntry, nb built, b *batch) {
	if old != nil && validLabel(old.svc.Name) && validName(old.base) {
		// The names old may have had (those of nodeNames), each built as
		// text only when the new build lacks it.
		if nb.nodes[old.base] == nil {
			z.setNodeLocked(old.base, nil, b)
		}
		old.namedPorts(func(name, proto string) {
			if !slices.Contains(nb.srvNames, [2]string{name, proto}) {
				z.setNodeLocked("_"+name+"._"+proto+"."+old.base, nil, b)
			}
			if !slices.Contains(nb.ents, proto) {
				z.setNodeLocked("_"+proto+"."+old.base, nil, b)
			}
		})
	}
	for name, n := range nb.nodes {
		z.setNodeLocked(name, n, b)
	}
}

// setNodeLocked queues n (nil: none) as the node of name unless the table
// holds that already.
func (z *Zone) setNodeLocked(name string, n *node, b *batch) {
	o := z.tab.get(name)
	if b.queued(name) || (n == nil) != (o == nil) || n != nil && !sameNode(o, n) {
		b.change(name, n)
	}
}

// sameNode reports whether the stored node o answers as n: the same kind,
// service handle and records in the same order, sections included.
func sameNode(o, n *node) bool {
	if o == nil || o.kind != n.kind || o.svc != n.svc || o.nAns != n.nAns || len(o.rrs) != len(n.rrs) {
		return false
	}
	for i, rr := range o.rrs {
		if !sameRR(rr, n.rrs[i]) {
			return false
		}
	}
	return true
}

// sameRR reports whether two records of a service's names are equal, byte
// for byte (owner and target case included, unlike dns.IsDuplicate). Only
// the types a service's data names hold are compared; any other type is
// taken as changed.
func sameRR(a, b dns.RR) bool {
	if a == b {
		return true
	}
	ha, hb := a.Header(), b.Header()
	if ha.Name != hb.Name || ha.Rrtype != hb.Rrtype || ha.Class != hb.Class || ha.Ttl != hb.Ttl {
		return false
	}
	switch x := a.(type) {
	case *dns.A:
		y, ok := b.(*dns.A)
		return ok && x.A.Equal(y.A)
	case *dns.AAAA:
		y, ok := b.(*dns.AAAA)
		return ok && x.AAAA.Equal(y.AAAA)
	case *dns.SRV:
		y, ok := b.(*dns.SRV)
		return ok && x.Priority == y.Priority && x.Weight == y.Weight && x.Port == y.Port && x.Target == y.Target
	}
	return false
}
