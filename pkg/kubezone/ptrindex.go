package kubezone

import (
	"bytes"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// ptrShardCount is the number of copy-on-write shards of the PTR index:
// ~100 addresses a shard for 100k endpoints, so one service update copies
// a few kilobytes.
const ptrShardCount = 1024

// addrKey is an address in 16-byte form (As16). Models hold unmapped
// addresses only, so an IPv4 address and its ::ffff: form never both occur.
type addrKey [16]byte

// ptrSlot says that svc publishes at least one PTR at the reverse name of key.
type ptrSlot struct {
	key addrKey
	svc *svcEntry
}

// ptrIndex maps the addresses the zone answers PTRs for (ClusterIPs and
// ready endpoint IPs) to the services that own them: 24 bytes an address
// against ~170 for a prebuilt reverse name, node and PTR record. The PTR
// targets are computed per query from the services' entries. Readers never
// lock: each shard is an atomic pointer to an immutable array sorted by
// key, replaced whole by the single writer (Zone.mu held).
type ptrIndex struct {
	seed   maphash.Seed // set once by newPTRIndex
	keys   atomic.Int64 // number of distinct addresses stored
	shards [ptrShardCount]atomic.Pointer[[]ptrSlot]
}

func newPTRIndex() *ptrIndex { return &ptrIndex{seed: maphash.MakeSeed()} }

func (x *ptrIndex) shardOf(k *addrKey) uint32 {
	return uint32(maphash.Bytes(x.seed, k[:]) % ptrShardCount)
}

// owners returns the slots of k (a sub-slice of the shard, read-only).
func (x *ptrIndex) owners(k addrKey) []ptrSlot {
	p := x.shards[x.shardOf(&k)].Load()
	if p == nil {
		return nil
	}
	s := *p
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(s[m].key[:], k[:]) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	end := lo
	for end < len(s) && s[end].key == k {
		end++
	}
	return s[lo:end:end]
}

// apply removes the slots of del and adds those of add, copying each
// touched shard once. The caller holds Zone.mu.
func (x *ptrIndex) apply(del, add []ptrSlot) {
	if len(del)+len(add) == 0 {
		return
	}
	type change struct {
		del map[ptrSlot]bool
		add []ptrSlot
	}
	byShard := map[uint32]*change{}
	at := func(s *ptrSlot) *change {
		i := x.shardOf(&s.key)
		c := byShard[i]
		if c == nil {
			c = &change{del: map[ptrSlot]bool{}}
			byShard[i] = c
		}
		return c
	}
	for i := range del {
		at(&del[i]).del[del[i]] = true
	}
	for i := range add {
		c := at(&add[i])
		c.add = append(c.add, add[i])
	}
	for i, c := range byShard {
		var old []ptrSlot
		if p := x.shards[i].Load(); p != nil {
			old = *p
		}
		kept := 0
		for _, s := range old {
			if !c.del[s] {
				kept++
			}
		}
		next := make([]ptrSlot, 0, kept+len(c.add)) // exact: a shard lives until its next change
		for _, s := range old {
			if !c.del[s] {
				next = append(next, s)
			}
		}
		next = append(next, c.add...)
		slices.SortFunc(next, func(a, b ptrSlot) int { return bytes.Compare(a.key[:], b.key[:]) })
		x.keys.Add(int64(distinctKeys(next) - distinctKeys(old)))
		x.shards[i].Store(&next)
	}
}

// distinctKeys counts the addresses of a sorted shard.
func distinctKeys(s []ptrSlot) int {
	n := 0
	for i := range s {
		if i == 0 || s[i].key != s[i-1].key {
			n++
		}
	}
	return n
}

// each calls f for every address and its slots (for List, not the query path).
func (x *ptrIndex) each(f func(k addrKey, owners []ptrSlot)) {
	for i := range x.shards {
		p := x.shards[i].Load()
		if p == nil {
			continue
		}
		s := *p
		for lo := 0; lo < len(s); {
			hi := lo + 1
			for hi < len(s) && s[hi].key == s[lo].key {
				hi++
			}
			f(s[lo].key, s[lo:hi:hi])
			lo = hi
		}
	}
}

// keyAddr is the address of a key (IPv4 when it is in ::ffff: form).
func keyAddr(k addrKey) netip.Addr { return netip.AddrFrom16(k).Unmap() }

// parseReverse is the exact inverse of reverseName: the address whose
// reverse name is name (lowercased). Any other name is refused (ok false),
// so that partial names (10.in-addr.arpa.), non-canonical ones (leading
// zeros, upper-case nibbles) and ip6.arpa. names of IPv4-mapped addresses
// stay outside the zone, as they were when reverse names were prebuilt. It
// does not allocate.
func parseReverse(name string) (k addrKey, ok bool) {
	if rest, found := strings.CutSuffix(name, ".in-addr.arpa."); found {
		return parseReverse4(rest)
	}
	if rest, found := strings.CutSuffix(name, ".ip6.arpa."); found {
		return parseReverse6(rest)
	}
	return k, false
}

// parseReverse4 parses "4.3.2.1" (the octets of 1.2.3.4, reversed).
func parseReverse4(s string) (addrKey, bool) {
	var v [4]byte
	for i := 3; i >= 0; i-- {
		label := s
		if i > 0 {
			dot := strings.IndexByte(s, '.')
			if dot < 0 {
				return addrKey{}, false
			}
			label, s = s[:dot], s[dot+1:]
		}
		n, ok := parseOctet(label)
		if !ok {
			return addrKey{}, false
		}
		v[i] = n
	}
	return netip.AddrFrom4(v).As16(), true
}

// parseOctet parses a decimal 0..255 written as itoa writes it (no sign, no
// leading zero).
func parseOctet(s string) (byte, bool) {
	if len(s) == 0 || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > 255 {
		return 0, false
	}
	return byte(n), true
}

// parseReverse6 parses the 32 nibbles of an ip6.arpa. name, lowest first.
func parseReverse6(s string) (addrKey, bool) {
	var k addrKey
	if len(s) != 63 {
		return k, false
	}
	for j := range 32 {
		if j > 0 && s[2*j-1] != '.' {
			return k, false
		}
		c := s[2*j]
		var nib byte
		switch {
		case '0' <= c && c <= '9':
			nib = c - '0'
		case 'a' <= c && c <= 'f':
			nib = c - 'a' + 10
		default:
			return k, false
		}
		i := 15 - j/2
		if j%2 == 0 {
			k[i] |= nib
		} else {
			k[i] |= nib << 4
		}
	}
	if netip.AddrFrom16(k).Is4In6() {
		return k, false // its PTR is under in-addr.arpa.
	}
	return k, true
}
