package kubezone

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"
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
	work   ptrWork // the writer's (Zone.mu held)
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
// touched shard once (and of it, only the IPv4 or the other part when the
// other is untouched). The caller holds Zone.mu.
func (x *ptrIndex) apply(del, add []ptrSlot) {
	if len(del)+len(add) == 0 {
		return
	}
	w := &x.work
	for _, s := range del {
		w.slots = append(w.slots, shardSlot{shard: x.shardOf(&s.key), del: true, slot: s})
	}
	for _, s := range add {
		w.slots = append(w.slots, shardSlot{shard: x.shardOf(&s.key), slot: s})
	}
	slices.SortFunc(w.slots, func(a, b shardSlot) int { return cmp.Compare(a.shard, b.shard) })
	for run := w.slots; len(run) > 0; {
		n := 1
		for n < len(run) && run[n].shard == run[0].shard {
			n++
		}
		x.applyShard(run[0].shard, run[:n])
		run = run[n:]
	}
	clear(w.slots) // the scratch keeps no service alive
	w.slots = shrink(w.slots)
}

// ptrWork is the scratch memory of apply, reused from one call to the
// next (Zone.mu held).
type ptrWork struct {
	slots      []shardSlot
	add4, del4 []keyedSlot[uint32]
	add6, del6 []keyedSlot[addrKey]
	skip       []int
}

// shardSlot is a slot to add or remove with its shard.
type shardSlot struct {
	shard uint32
	del   bool
	slot  ptrSlot
}

// applyShard applies the slots of shard i.
func (x *ptrIndex) applyShard(i uint32, slots []shardSlot) {
	w := &x.work
	w.add4, w.del4, w.add6, w.del6 = w.add4[:0], w.del4[:0], w.add6[:0], w.del6[:0]
	for _, s := range slots {
		if s.del {
			w.del4, w.del6 = appendSlot(w.del4, w.del6, s.slot)
		} else {
			w.add4, w.add6 = appendSlot(w.add4, w.add6, s.slot)
		}
	}
	old := x.shards[i].Load()
	if old == nil {
		old = &ptrShard{}
	}
	next := *old // the untouched part is shared: shards are immutable
	delta := 0
	if len(w.add4)+len(w.del4) > 0 {
		next.keys4, next.svcs4, w.skip = mergeSlots(old.keys4, old.svcs4, w.add4, w.del4, cmp.Compare[uint32], w.skip)
		delta += distinctKeys(next.keys4) - distinctKeys(old.keys4)
	}
	if len(w.add6)+len(w.del6) > 0 {
		oldKeys6, oldSvcs6 := old.six()
		var keys6 []addrKey
		var svcs6 []*svcRef
		keys6, svcs6, w.skip = mergeSlots(oldKeys6, oldSvcs6, w.add6, w.del6, compareKeys, w.skip)
		next.v6 = nil
		if len(keys6) > 0 {
			next.v6 = &ptrShard6{keys: keys6, svcs: svcs6}
		}
		delta += distinctKeys(keys6) - distinctKeys(oldKeys6)
	}
	x.keys.Add(int64(delta))
	x.shards[i].Store(&next)
	clear(w.add4)
	clear(w.del4)
	clear(w.add6)
	clear(w.del6)
	w.add4, w.del4, w.add6, w.del6 = shrink(w.add4), shrink(w.del4), shrink(w.add6), shrink(w.del6)
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
//
// skip is scratch memory, returned for reuse.
func mergeSlots[K comparable](keys []K, svcs []*svcRef, add, del []keyedSlot[K], cmp func(a, b K) int,
	skip []int) ([]K, []*svcRef, []int) {
	skip = skip[:0] // indexes of the slots of del, sorted
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
		return nil, nil, skip
	}
	nk, ns := make([]K, 0, n), make([]*svcRef, 0, n)
	j, next := 0, 0 // next: index in skip of the next slot to leave out
	for i := range keys {
		if next < len(skip) && skip[next] == i {
			next++
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
	return nk, ns, skip
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
