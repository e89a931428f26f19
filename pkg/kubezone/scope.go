package kubezone

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
)

// Scoped versions: what lets the server keep a memoized answer across
// generations that did not touch it. Every name of the zone falls in one
// scope, found from the name alone:
//
//	<ns>.svc.<zone>, <ns>.pod.<zone>          the namespace ns
//	[<x>.[<y>.]]<svc>.<ns>.svc.<zone>         the service ns/svc (its names, SRV names, endpoint names)
//	<ip>.<ns>.pod.<zone>                      the pod name, and the namespace ns (insecure mode answers while it exists)
//	a reverse name of an address              that address (the services owning it, their PTR targets)
//	the apex                                  every change (its SOA serial follows the generation)
//	any other name                            none: static names, and names no object can create
//
// A scope hashes to one of scopeBuckets counters. Each publish stores its
// generation into the counters of the scopes it touched, after the data is
// published; a name's version is the largest of its counters and the base
// (the generation of the last publish that touched everything). A reader
// that reads the version before it looks the name up thus never keeps an
// answer older than the version it files it under. Two scopes sharing a
// counter cost a needless recomputation, never a stale answer.
//
// The SOA in a negative answer carries the serial of the generation the
// answer was built at: a memoized NXDOMAIN keeps its serial until its scope
// changes.

// scopeBuckets is the number of version counters: 128 KiB. At 20 updates
// a second of ten-endpoint services (12 scopes each), ~1.5 % of the
// counters change per second.
const scopeBuckets = 1 << 14

// maxBumps is the number of scopes one publish records; past it the
// publish bumps the base instead (the initial list, a snapshot).
const maxBumps = 4096

// scope kinds, hashed in first.
const (
	scopeNamespace = 'n'
	scopeService   = 's'
	scopePod       = 'p'
	scopeAddr      = 'r'
)

// noScope marks a name in no scope (its version is the base) and allScope
// a name that every change touches (the apex).
const (
	noScope  = -1
	allScope = -2
)

type scopes struct {
	seed uint64        // set once by newScopes
	base atomic.Uint64 // generation of the last publish that touched every scope
	gens [scopeBuckets]atomic.Uint64
}

func newScopes() *scopes { return &scopes{seed: rand.Uint64()} }

// fnv1a mixes s into h (FNV-1a), then a separator.
func fnv1a[T ~string | ~[]byte](h uint64, s T) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 0x100000001b3
	}
	return (h ^ 0xff) * 0x100000001b3
}

// bucket is the counter of scope (kind, a, b).
func bucket[T ~string | ~[]byte](seed uint64, kind byte, a, b T) int {
	h := (seed ^ uint64(kind)) * 0x100000001b3
	h = fnv1a(fnv1a(h, a), b)
	h ^= h >> 29
	return int(h & (scopeBuckets - 1))
}

// The writer's side of the scopes; scopeOf computes the same from a name's
// wire form (the same bytes hash alike as string or []byte).
func (s *scopes) service(ns, name string) int { return bucket(s.seed, scopeService, ns, name) }
func (s *scopes) namespace(ns string) int     { return bucket(s.seed, scopeNamespace, ns, "") }
func (s *scopes) pod(ns, label string) int    { return bucket(s.seed, scopePod, ns, label) }
func (s *scopes) addr(k *addrKey) int         { return bucket(s.seed, scopeAddr, k[:], nil) }

// version is the version of a name in scopes a and b (b: noScope when the
// name has one scope), gen the current generation.
func (s *scopes) version(a, b int, gen uint64) uint64 {
	switch a {
	case allScope:
		return gen
	case noScope:
		return s.base.Load()
	}
	v := max(s.base.Load(), s.gens[a].Load())
	if b >= 0 {
		v = max(v, s.gens[b].Load())
	}
	return v
}

// bump records scope i as touched by the publish being built.
func (b *batch) bump(i int) {
	if b.all || len(b.bumps) >= maxBumps {
		b.all = true
		return
	}
	b.bumps = append(b.bumps, uint32(i))
}

// publishScopes stores gen into the counters b touched (every counter, as
// the base, when it touched too many). Called once gen's data is
// published.
func (s *scopes) publish(b *batch, gen uint64) {
	if b.all {
		s.base.Store(gen)
		return
	}
	for _, i := range b.bumps {
		s.gens[i].Store(gen)
	}
}

// Version returns a number that changes whenever the answer to a question
// at name may have changed; name is a lowercased owner name in wire form.
// Read it before Lookup: the answer is then at least as new as the
// version. Cheaper than Generation to keep answers by: it changes only with
// the objects name's answers are built from (see scope.go). A name whose
// answer may follow a CNAME to another name in the zone is only as stable
// as Generation.
func (z *Zone) Version(name []byte) uint64 {
	a, b := z.scopeOf(name)
	v := z.scopes.version(a, b, z.meta.Load().gen)
	if z.snapshotStale() {
		v |= 1 << 63
	}
	return v
}

// scopeOf returns the scopes of name (lowercased wire form), as counter
// indices, noScope or allScope.
func (z *Zone) scopeOf(name []byte) (a, b int) {
	dw := z.domainWire
	if len(name) < len(dw) || string(name[len(name)-len(dw):]) != string(dw) {
		if k, ok := reverseKeyWire(name); ok {
			return z.scopes.addr(&k), noScope
		}
		return allScope, noScope // not a name of the zone: nothing to keep
	}
	end := len(name) - len(dw)
	if bytes.IndexByte(name[:end], '.') >= 0 {
		// A label holding a dot is presented with it escaped, which the
		// zone's string lookups treat apart: keep it in step with
		// everything. (A length byte of 46 lands here too: no harm.)
		return allScope, noScope
	}
	// The labels before the domain, at most six (more: no object can
	// create the name).
	var labels [6][]byte
	n, off := 0, 0
	for off < end {
		l := int(name[off])
		if l == 0 || off+1+l > end {
			return allScope, noScope // not a name the zone looks up
		}
		if n == len(labels) {
			return noScope, noScope
		}
		labels[n] = name[off+1 : off+1+l]
		n++
		off += 1 + l
	}
	if off != end {
		return allScope, noScope // the domain does not start at a label
	}
	if n == 0 {
		return allScope, noScope // the apex: its SOA serial is the generation
	}
	seed := z.scopes.seed
	switch string(labels[n-1]) {
	case "svc":
		switch {
		case n == 2:
			return bucket(seed, scopeNamespace, labels[0], nil), noScope
		case n >= 3 && n <= 5:
			return bucket(seed, scopeService, labels[n-2], labels[n-3]), noScope
		}
	case "pod":
		switch n {
		case 2:
			return bucket(seed, scopeNamespace, labels[0], nil), noScope
		case 3:
			return bucket(seed, scopePod, labels[1], labels[0]), bucket(seed, scopeNamespace, labels[1], nil)
		}
	}
	return noScope, noScope
}

// reverseKeyWire parses a canonical reverse name in wire form, as
// parseReverse does its presentation form.
func reverseKeyWire(name []byte) (addrKey, bool) {
	const v4, v6 = "\x07in-addr\x04arpa\x00", "\x03ip6\x04arpa\x00"
	var k addrKey
	switch {
	case len(name) > len(v4) && string(name[len(name)-len(v4):]) == v4:
		var oct [4]byte
		off := 0
		for i := range 4 {
			if off >= len(name)-len(v4) {
				return k, false
			}
			l := int(name[off])
			if off+1+l > len(name)-len(v4) {
				return k, false
			}
			v, ok := parseOctet(string(name[off+1 : off+1+l]))
			if !ok {
				return k, false
			}
			oct[3-i] = v
			off += 1 + l
		}
		if off != len(name)-len(v4) {
			return k, false
		}
		return netip.AddrFrom4(oct).As16(), true
	case len(name) == 64+len(v6) && string(name[64:]) == v6:
		for j := range 32 {
			if name[2*j] != 1 {
				return k, false
			}
			nib, ok := hexNibble(name[2*j+1])
			if !ok {
				return k, false
			}
			k[15-j/2] |= nib << (4 * (j % 2))
		}
		if netip.AddrFrom16(k).Is4In6() {
			return k, false // its PTR is under in-addr.arpa.
		}
		return k, true
	}
	return k, false
}
