package kubezone

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// ptrShardCount is the number of copy-on-write shards of the PTR index:
// ~27 addresses a shard for 100k endpoints and 10k ClusterIPs, so one
// service update of ten endpoints copies ~4 KB (at 1024 shards it copied
// 14 KB, the largest allocation of an update; 4096 cost 0.3 MB more heap).
const ptrShardCount = 4096

// addrKey is an address in 16-byte form (As16). Models hold unmapped
// addresses only, so an IPv4 address and its ::ffff: form never both occur.
type addrKey [16]byte

// ptrSlot says that the service of svc publishes at least one PTR at the
// reverse name of key: the form in which the writer adds and removes
// owners. A slot names the service's stable ref, not its entry, so that it
// outlives entries that keep the address (see svcRef).
type ptrSlot struct {
	key addrKey
	svc *svcRef
}

// ptrIndex maps the addresses the zone answers PTRs for (ClusterIPs and
// ready endpoint IPs) to the services that own them: 12 bytes an IPv4
// address, 24 an IPv6 one, against ~170 for a prebuilt reverse name, node
// and PTR record. The PTR targets are computed per query from the
// services' current entries. Readers never lock: each shard is an atomic pointer
// to an immutable ptrShard, replaced whole by the single writer (Zone.mu
// held).
type ptrIndex struct {
	seed   maphash.Seed // set once by newPTRIndex
	keys   atomic.Int64 // number of distinct addresses stored
	shards [ptrShardCount]atomic.Pointer[ptrShard]
}

// ptrShard holds the slots of one shard as parallel arrays sorted by key,
// IPv4 addresses apart as 4-byte keys: a slot of an IPv4 address costs 12
// bytes instead of 24 as a ptrSlot (16-byte key and pointer), ~1.2 MB less
// for 100k endpoints. The other addresses, rarer, hang off v6, so that a
// shard without any costs 56 bytes rather than 96 (4096 shards). Immutable.
type ptrShard struct {
	keys4 []uint32   // IPv4 addresses (big endian, so in address order), sorted
	svcs4 []*svcRef  // owners, by index of keys4
	v6    *ptrShard6 // nil when the shard holds no other address
}

// ptrShard6 holds a shard's slots of addresses other than IPv4.
type ptrShard6 struct {
	keys []addrKey // sorted
	svcs []*svcRef // owners, by index of keys
}

// six returns the shard's slots of other addresses (nil when none).
func (sh *ptrShard) six() ([]addrKey, []*svcRef) {
	if sh.v6 == nil {
		return nil, nil
	}
	return sh.v6.keys, sh.v6.svcs
}

func newPTRIndex() *ptrIndex { return &ptrIndex{seed: maphash.MakeSeed()} }

func (x *ptrIndex) shardOf(k *addrKey) uint32 {
	return uint32(maphash.Bytes(x.seed, k[:]) % ptrShardCount)
}

// key4 is the 4-byte key of k when k is an IPv4 address (::ffff:a.b.c.d);
// it and fromKey4 work on the bytes, being on the writer's path for every
// slot of every touched shard.
func key4(k *addrKey) (uint32, bool) {
	if [12]byte(k[:12]) != [12]byte{10: 0xff, 11: 0xff} {
		return 0, false
	}
	return binary.BigEndian.Uint32(k[12:]), true
}

// fromKey4 is the addrKey of a 4-byte key.
func fromKey4(k4 uint32) addrKey {
	k := addrKey{10: 0xff, 11: 0xff}
	binary.BigEndian.PutUint32(k[12:], k4)
	return k
}

// owners returns the services with slots at k (a sub-slice of the shard,
// read-only).
func (x *ptrIndex) owners(k addrKey) []*svcRef {
	sh := x.shards[x.shardOf(&k)].Load()
	if sh == nil {
		return nil
	}
	if k4, ok := key4(&k); ok {
		lo, found := slices.BinarySearch(sh.keys4, k4)
		return ownersAt(sh.keys4, sh.svcs4, k4, lo, found)
	}
	keys6, svcs6 := sh.six()
	lo, found := slices.BinarySearchFunc(keys6, k, compareKeys)
	return ownersAt(keys6, svcs6, k, lo, found)
}

// ownersAt returns the services of the run of k in keys, which starts at
// lo when found.
func ownersAt[K comparable](keys []K, svcs []*svcRef, k K, lo int, found bool) []*svcRef {
	if !found {
		return nil
	}
	end := lo + 1
	for end < len(keys) && keys[end] == k {
		end++
	}
	return svcs[lo:end:end]
}

func compareKeys(a, b addrKey) int { return bytes.Compare(a[:], b[:]) }

// apply removes the slots of del and adds those of add, copying each
// touched shard once. The caller holds Zone.mu.
func (x *ptrIndex) apply(del, add []ptrSlot) {
	if len(del)+len(add) == 0 {
		return
	}
	type change struct {
		add4, del4 []keyedSlot[uint32]
		add6, del6 []keyedSlot[addrKey]
	}
	byShard := map[uint32]*change{}
	at := func(s *ptrSlot) *change {
		i := x.shardOf(&s.key)
		c := byShard[i]
		if c == nil {
			c = &change{}
			byShard[i] = c
		}
		return c
	}
	for _, s := range del {
		c := at(&s)
		c.del4, c.del6 = appendSlot(c.del4, c.del6, s)
	}
	for _, s := range add {
		c := at(&s)
		c.add4, c.add6 = appendSlot(c.add4, c.add6, s)
	}
	for i, c := range byShard {
		old := x.shards[i].Load()
		if old == nil {
			old = &ptrShard{}
		}
		next := &ptrShard{}
		next.keys4, next.svcs4 = mergeSlots(old.keys4, old.svcs4, c.add4, c.del4, cmp.Compare[uint32])
		oldKeys6, oldSvcs6 := old.six()
		keys6, svcs6 := mergeSlots(oldKeys6, oldSvcs6, c.add6, c.del6, compareKeys)
		if len(keys6) > 0 {
			next.v6 = &ptrShard6{keys: keys6, svcs: svcs6}
		}
		x.keys.Add(int64(distinctKeys(next.keys4) + distinctKeys(keys6) -
			distinctKeys(old.keys4) - distinctKeys(oldKeys6)))
		x.shards[i].Store(next)
	}
}

// keyedSlot is a slot with its key in a shard's form.
type keyedSlot[K any] struct {
	key K
	svc *svcRef
}

// appendSlot appends s to v4 when its address is IPv4, else to v6.
func appendSlot(v4 []keyedSlot[uint32], v6 []keyedSlot[addrKey], s ptrSlot) ([]keyedSlot[uint32], []keyedSlot[addrKey]) {
	if k4, ok := key4(&s.key); ok {
		return append(v4, keyedSlot[uint32]{k4, s.svc}), v6
	}
	return v4, append(v6, keyedSlot[addrKey](s))
}

// mergeSlots returns the slots of keys and svcs (sorted by key) but those
// of del, merged with add, in exactly sized new arrays (a shard lives
// until its next change); nil when none is left. The slots of del are
// found by binary search: a service update removes a few slots of a shard
// of ~100, and the others are copied without being looked at.
func mergeSlots[K comparable](keys []K, svcs []*svcRef, add, del []keyedSlot[K], cmp func(a, b K) int) ([]K, []*svcRef) {
	var skip []int // indexes of the slots of del, sorted
	for _, d := range del {
		i, found := slices.BinarySearchFunc(keys, d.key, cmp)
		for ; found && i < len(keys) && keys[i] == d.key; i++ {
			if svcs[i] == d.svc {
				skip = append(skip, i)
				break
			}
		}
	}
	slices.Sort(skip)
	skip = slices.Compact(skip)
	slices.SortFunc(add, func(a, b keyedSlot[K]) int { return cmp(a.key, b.key) })
	n := len(keys) - len(skip) + len(add)
	if n == 0 {
		return nil, nil
	}
	nk, ns := make([]K, 0, n), make([]*svcRef, 0, n)
	j := 0
	for i := range keys {
		if len(skip) > 0 && skip[0] == i {
			skip = skip[1:]
			continue
		}
		for ; j < len(add) && cmp(add[j].key, keys[i]) < 0; j++ {
			nk, ns = append(nk, add[j].key), append(ns, add[j].svc)
		}
		nk, ns = append(nk, keys[i]), append(ns, svcs[i])
	}
	for ; j < len(add); j++ {
		nk, ns = append(nk, add[j].key), append(ns, add[j].svc)
	}
	return nk, ns
}

// distinctKeys counts the addresses of sorted keys.
func distinctKeys[K comparable](keys []K) int {
	n := 0
	for i := range keys {
		if i == 0 || keys[i] != keys[i-1] {
			n++
		}
	}
	return n
}

// each calls f for every address and the services with slots at it (for
// List, not the query path).
func (x *ptrIndex) each(f func(k addrKey, owners []*svcRef)) {
	for i := range x.shards {
		sh := x.shards[i].Load()
		if sh == nil {
			continue
		}
		eachRun(sh.keys4, sh.svcs4, func(k4 uint32, owners []*svcRef) { f(fromKey4(k4), owners) })
		keys6, svcs6 := sh.six()
		eachRun(keys6, svcs6, f)
	}
}

// eachRun calls f for every run of equal keys of sorted keys and the
// services at the same indexes.
func eachRun[K comparable](keys []K, svcs []*svcRef, f func(K, []*svcRef)) {
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi] == keys[lo] {
			hi++
		}
		f(keys[lo], svcs[lo:hi:hi])
		lo = hi
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
	v, ok := parseQuad(s, '.')
	if !ok {
		return addrKey{}, false
	}
	return netip.AddrFrom4([4]byte{v[3], v[2], v[1], v[0]}).As16(), true
}

// parseQuad parses four octets separated by sep, each written as itoa
// writes it; anything else (fewer or more parts, a stray character) is
// refused. It does not allocate.
func parseQuad(s string, sep byte) (v [4]byte, ok bool) {
	for i := range 4 {
		part := s
		if i < 3 {
			cut := strings.IndexByte(s, sep)
			if cut < 0 {
				return v, false
			}
			part, s = s[:cut], s[cut+1:]
		}
		if v[i], ok = parseOctet(part); !ok {
			return v, false
		}
	}
	return v, true
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
