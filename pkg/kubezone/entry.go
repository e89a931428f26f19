package kubezone

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// svcRef is the stable handle of one service's current entry: the base
// node and the PTR index slots hold it rather than the entry, so replacing
// the entry (an endpoint change) rewrites neither the service's names nor
// the slots of the addresses it keeps. A service keeps its ref until it is
// deleted.
//
// A reader may load a slot of an address and then the ref's entry of a
// later generation, which no longer publishes that address: ownsPTR tells,
// and the address is then answered as not owned by that service, as the
// later generation answers it.
type svcRef struct {
	cur atomic.Pointer[svcEntry] // always non-nil once the ref is in the table or the PTR index
}

func (r *svcRef) entry() *svcEntry { return r.cur.Load() }

// writerScratch is memory the writer reuses from one service to the next.
// Guarded by Zone.mu.
type writerScratch struct {
	oldKeys, newKeys []addrKey // sorted PTR addresses of a service's old and new entry
	labels           []labelKey
}

// newEntry is the entry of svc with a copy of slices eps, with its counts
// and endpoint index, and the addresses it publishes PTRs for, sorted
// (scratch memory, valid until the next newEntry).
func (z *Zone) newEntry(svc *svcModel, base string, eps []*sliceModel) (*svcEntry, []addrKey) {
	e := &svcEntry{svc: svc, base: base}
	switch len(eps) {
	case 0:
	case 1:
		e.one[0] = eps[0]
		e.slices = e.one[:]
	default:
		e.slices = slices.Clone(eps)
	}
	e.published = svc.ExternalName == "" && validLabel(svc.Name) && validName(base)
	sc := &z.scratch
	var endpoints int
	sc.newKeys, endpoints = e.ptrKeys(shrink(sc.newKeys))
	if e.published {
		e.endpoints = int32(endpoints)
		e.hostNames = int32(e.countHostNames(sc, endpoints))
		e.idx = newEPIndex(e)
	}
	return e, sc.newKeys
}

// ptrKeys returns every address e publishes a PTR for (its ready endpoint
// addresses and, unless headless, its ClusterIPs), sorted and distinct, in
// buf's array. endpoints is the number of distinct endpoint addresses.
func (e *svcEntry) ptrKeys(buf []addrKey) (keys []addrKey, endpoints int) {
	keys = buf[:0]
	if !e.published {
		return keys, 0
	}
	odd := false // an address with a zone or in IPv4-mapped form: never from the API
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			a := es.Endpoints.addr(i)
			odd = odd || a.Zone() != "" || a.Is4In6()
			keys = append(keys, a.As16())
		}
	}
	slices.SortFunc(keys, compareKeys)
	keys = slices.Compact(keys)
	endpoints = len(keys)
	if odd { // addresses that As16 merges are distinct endpoints
		endpoints = e.countOdd()
	}
	if !e.svc.Headless && len(e.svc.ClusterIPs) > 0 {
		for _, a := range e.svc.ClusterIPs {
			keys = append(keys, a.As16())
		}
		slices.SortFunc(keys, compareKeys)
		keys = slices.Compact(keys)
	}
	return keys, endpoints
}

// countOdd counts the distinct endpoint addresses of e as netip.Addr
// values (zones and mapped forms apart).
func (e *svcEntry) countOdd() int {
	seen := map[netip.Addr]bool{}
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			seen[es.Endpoints.addr(i)] = true
		}
	}
	return len(seen)
}

// labelKey identifies the host label of an endpoint without building it:
// the hostname, or for an endpoint named by its dashed IP, the address.
// A hostname that is itself the dashed form of an address is keyed by that
// address, so that it and the dashed label of that address are one name.
type labelKey struct {
	host string
	addr netip.Addr
}

func (e *svcEntry) labelKeyOf(ep epModel) labelKey {
	if e.hostLabel(ep.Hostname) {
		if d, ok := parseDashedLabel(ep.Hostname); ok {
			return labelKey{addr: d}
		}
		return labelKey{host: ep.Hostname}
	}
	if ep.Addr.Zone() != "" || ep.Addr.Is4In6() {
		return labelKey{host: dashedIP(ep.Addr)} // never from the API: compared as text
	}
	return labelKey{addr: ep.Addr}
}

// countHostNames counts the distinct host labels of e's endpoints: those
// of collectEndpoints and hostOwner. Without hostnames every endpoint is
// named by its address, so there are as many as distinct addresses.
func (e *svcEntry) countHostNames(sc *writerScratch, endpoints int) int {
	plain := true
	for _, es := range e.slices {
		plain = plain && es.Endpoints.hosts == nil
	}
	if plain {
		return endpoints
	}
	keys := shrink(sc.labels)
	for _, es := range e.slices {
		for i := range es.Endpoints.len() {
			keys = append(keys, e.labelKeyOf(es.Endpoints.at(i)))
		}
	}
	slices.SortFunc(keys, func(a, b labelKey) int {
		return cmp.Or(strings.Compare(a.host, b.host), a.addr.Compare(b.addr))
	})
	sc.labels = keys
	return len(slices.Compact(keys))
}

// namesKept reports whether the names buildService publishes for e's
// service are those it published for old, the entry of the same service
// model with other slices: the endpoints only feed the names of a
// published headless service, and of a ClusterIP service only whether an
// endpoint host name takes the name of a _<proto> empty non-terminal.
func namesKept(old, e *svcEntry) bool {
	if !e.published {
		return true // ExternalName or an invalid name: no endpoint records
	}
	if e.svc.Headless {
		return false
	}
	for _, p := range e.svc.Ports {
		if p.Name != "" && old.hostIsProto(p.Protocol) != e.hostIsProto(p.Protocol) {
			return false
		}
	}
	return true
}

// hostIsProto reports whether an endpoint of e has the host label
// _<proto>.
func (e *svcEntry) hostIsProto(proto string) bool {
	for _, es := range e.slices {
		if es.Endpoints.hosts == nil {
			continue
		}
		for _, h := range es.Endpoints.hosts {
			if len(h) == len(proto)+1 && h[0] == '_' && h[1:] == proto && e.hostLabel(h) {
				return true
			}
		}
	}
	return false
}

// ptrDiffLocked queues the PTR index changes of ref's entry going from old
// to the entry whose sorted PTR addresses are keys (old nil: a new
// service; keys empty: none, or the service is gone): slots only for the
// addresses one of them publishes and the other does not. It bumps the
// scope of every address either publishes: a kept address's PTR targets
// come from the new entry.
func (z *Zone) ptrDiffLocked(ref *svcRef, old *svcEntry, keys []addrKey, b *batch) {
	sc := &z.scratch
	sc.oldKeys = shrink(sc.oldKeys)
	if old != nil {
		sc.oldKeys, _ = old.ptrKeys(sc.oldKeys)
	}
	o, n := sc.oldKeys, keys
	for len(o) > 0 || len(n) > 0 {
		switch c := compareNext(o, n); {
		case c < 0:
			b.ptrDel = append(b.ptrDel, ptrSlot{key: o[0], svc: ref})
			b.bump(z.scopes.addr(&o[0]))
			o = o[1:]
		case c > 0:
			b.ptrAdd = append(b.ptrAdd, ptrSlot{key: n[0], svc: ref})
			b.bump(z.scopes.addr(&n[0]))
			n = n[1:]
		default:
			// Kept, but its PTR targets come from the new entry.
			b.bump(z.scopes.addr(&o[0]))
			o, n = o[1:], n[1:]
		}
	}
}

// compareNext compares the heads of two sorted key lists, an empty list
// sorting last.
func compareNext(o, n []addrKey) int {
	switch {
	case len(o) == 0:
		return 1
	case len(n) == 0:
		return -1
	}
	return compareKeys(o[0], n[0])
}
