package kubezone

import (
	"net/netip"
	"slices"
	"sort"
	"strings"
)

// epIndexMin is the number of endpoints from which a service entry gets an
// epIndex. Below it a scan of the endpoints is as fast (~5 ns an endpoint
// for a host name, ~9 for a PTR); at 1,000 endpoints the scan costs 5-9 µs
// a query and the index ~0.3 µs, for 4 bytes an endpoint (8 with hostnames).
const epIndexMin = 64

// epRef locates one endpoint model of an entry: slice index << epRefBits |
// endpoint index within the slice.
type epRef uint32

const epRefBits = 20

// epIndex orders the endpoints of a large service for binary search.
// Immutable, built with its entry.
type epIndex struct {
	byAddr []epRef // every endpoint, by address
	byHost []epRef // endpoints labelled by their hostname, by hostname
}

func (e *svcEntry) ep(r epRef) epModel {
	return e.slices[r>>epRefBits].Endpoints.at(int(r & (1<<epRefBits - 1)))
}

// newEPIndex indexes the endpoints of e, or returns nil when e is small,
// or holds addresses the index cannot order like the scan compares them
// (zones, IPv4-mapped IPv6: never from the API), or too many to locate.
func newEPIndex(e *svcEntry) *epIndex {
	n := 0
	for _, es := range e.slices {
		n += es.Endpoints.len()
		if es.Endpoints.len() >= 1<<epRefBits {
			return nil
		}
	}
	if n < epIndexMin || len(e.slices) >= 1<<(32-epRefBits) {
		return nil
	}
	x := &epIndex{byAddr: make([]epRef, 0, n)}
	for i, es := range e.slices {
		for j := range es.Endpoints.len() {
			ep := es.Endpoints.at(j)
			if ep.Addr.Zone() != "" || ep.Addr.Is4In6() {
				return nil
			}
			r := epRef(i<<epRefBits | j)
			x.byAddr = append(x.byAddr, r)
			if e.hostLabel(ep.Hostname) {
				x.byHost = append(x.byHost, r)
			}
		}
	}
	slices.SortFunc(x.byAddr, func(a, b epRef) int { return e.ep(a).Addr.Compare(e.ep(b).Addr) })
	slices.SortFunc(x.byHost, func(a, b epRef) int { return strings.Compare(e.ep(a).Hostname, e.ep(b).Hostname) })
	x.byHost = slices.Clip(x.byHost)
	return x
}

// withAddr returns the endpoints of e whose address is a.
func (x *epIndex) withAddr(e *svcEntry, a netip.Addr) []epRef {
	s := x.byAddr
	i := sort.Search(len(s), func(i int) bool { return e.ep(s[i]).Addr.Compare(a) >= 0 })
	j := i
	for j < len(s) && e.ep(s[j]).Addr == a {
		j++
	}
	return s[i:j]
}

// hostAddrs is svcEntry.hostAddrs through the index.
func (x *epIndex) hostAddrs(e *svcEntry, label string) []netip.Addr {
	var out []netip.Addr
	s := x.byHost
	for i := sort.Search(len(s), func(i int) bool { return e.ep(s[i]).Hostname >= label }); i < len(s); i++ {
		ep := e.ep(s[i])
		if ep.Hostname != label {
			break
		}
		out = append(out, ep.Addr)
	}
	if a, ok := parseDashedLabel(label); ok {
		for _, r := range x.withAddr(e, a) {
			if ep := e.ep(r); !e.hostLabel(ep.Hostname) {
				out = append(out, ep.Addr)
			}
		}
	}
	return out
}

// ptrTargets appends the host names of the endpoints of e with address a.
func (x *epIndex) ptrTargets(e *svcEntry, a netip.Addr, out []string) []string {
	for _, r := range x.withAddr(e, a) {
		out = append(out, e.hostOwner(e.ep(r)))
	}
	return out
}
