package cache

import (
	"bytes"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// entryOverhead is what an entry costs beyond its allocation (its fields,
// its Packed and its reply, counted by BufSize): the LRU's list element
// (80: links, key, value, and an expiry simplelru keeps for its expirable
// sibling) and its map slot (16 bytes, plus a control byte, in a table
// 7/16 to 7/8 full: at most 40). It errs high, so that the byte budget
// stays a bound on the heap the cache holds; BenchmarkMemoryPerName
// reports both figures.
const entryOverhead = 80 + 40

// entry is one cached reply: its fields, then its wire.Packed, then the
// reply's bytes, all in one pointer-free allocation (see newEntry), so a
// hit reads the entry and the reply with one pointer from the LRU, not
// two. Its first fields never change after insert; the rest are guarded
// by the owning shard's mu. It keeps no key: the name, type and class are
// the reply's own question, and only the DO and CD bits, which a reply
// does not carry, are stored beside it. Fields are ordered and sized so
// that the head, fields and Packed, is 40 bytes (see TestEntrySize); what
// few entries need, the time of an upstream failure while stale, is kept
// in the shard (shard.failed). An entry is never copied, nor made but by
// newEntry (a literal has no reply after it).
type entry struct {
	stored int64  // wall clock, Unix nanoseconds (not time.Time: 8 bytes, not 24, per entry)
	ttl    uint32 // lifetime in whole seconds, > 0
	// touched is the owning shard's insert count when e was last moved to
	// the front of its LRU (inserted or promoted by a hit; see touchLocked).
	touched uint32
	hits    uint32 // fresh hits in this entry's life
	kind    kind
	do, cd  bool // the key's DNSSEC bits

	prefetching bool // a prefetch was started; never again for this entry

	// packed is last: the reply's bytes follow it. Its question is the
	// key's name, type and class.
	packed wire.Packed
}

// entryRoom is the room a reply is packed with for an entry (packEntry,
// packScannedEntry): the entry's fields before its Packed. The fields are
// pointer-free, as the allocation is.
const entryRoom = int(unsafe.Offsetof(entry{}.packed))

// packEntry packs m, ours, for an entry (newEntry), refusing what does not
// unpack again (packChecked); packScannedEntry packs a reply
// wire.ScanUpstream read as u, its TTLs lowered to maxTTL.
func packEntry(m *dns.Msg) (*wire.Packed, error) { return packChecked(m, entryRoom) }

func packScannedEntry(msg []byte, u *wire.Upstream, maxTTL uint32) *wire.Packed {
	return wire.PackUpstream(msg, u, maxTTL, entryRoom)
}

// newEntry stores p, the reply to key packed by packEntry or
// packScannedEntry, for ttl (whole seconds, > 0; capped at the 136 years a
// uint32 holds, beyond any record's TTL): the entry is the room in front
// of p. Lookups compare queries with p's own question, so even a reply
// that did not answer key could never be served for another name.
func newEntry(key *wire.Key, p *wire.Packed, k kind, stored time.Time, ttl time.Duration) *entry {
	if p.Room() != entryRoom {
		panic(fmt.Sprintf("cache: reply packed with %d bytes of room, want %d for an entry", p.Room(), entryRoom))
	}
	e := (*entry)(unsafe.Add(unsafe.Pointer(p), -entryRoom))
	e.kind, e.do, e.cd, e.stored = k, key.DO, key.CD, stored.UnixNano()
	e.ttl = uint32(min(ttl/time.Second, math.MaxUint32))
	return e
}

// size is the bytes e is charged against the shard budget.
func (e *entry) size() int64 { return int64(e.packed.BufSize() + entryOverhead) }

// key returns e's cache key. It allocates the name: for the slow paths.
func (e *entry) key() wire.Key {
	name, typ, class := e.packed.Question()
	return wire.Key{Name: string(name), Type: typ, Class: class, DO: e.do, CD: e.cd}
}

// answers reports whether e is the entry for q, without allocating: a
// hash collision must be a miss, never another name's reply.
func (e *entry) answers(q *wire.Query) bool {
	name, typ, class := e.packed.Question()
	return q.Type == typ && q.Class == class && q.DO == e.do && q.CD() == e.cd && bytes.Equal(q.LowerName(), name)
}

// hasKey reports whether e is the entry for k, without allocating.
func (e *entry) hasKey(k *wire.Key) bool {
	name, typ, class := e.packed.Question()
	return k.Type == typ && k.Class == class && k.DO == e.do && k.CD == e.cd && k.Name == string(name)
}

// hasName reports whether e's name is name (wire form, lowercased).
func (e *entry) hasName(name string) bool {
	n, _, _ := e.packed.Question()
	return string(n) == name
}

// sameKey reports whether a and b are entries for the same key.
func sameKey(a, b *entry) bool {
	an, at, ac := a.packed.Question()
	bn, bt, bc := b.packed.Question()
	return at == bt && ac == bc && a.do == b.do && a.cd == b.cd && bytes.Equal(an, bn)
}

// lifetime is how long e is fresh.
func (e *entry) lifetime() time.Duration { return time.Duration(e.ttl) * time.Second }

// expire is when e stops being fresh.
func (e *entry) expire() time.Time { return time.Unix(0, e.stored+int64(e.lifetime())) }

// remaining is how long e stays fresh after now (negative once stale):
// integer nanoseconds, as e.stored is, rather than time.Time arithmetic,
// for it is read on every hit.
func (e *entry) remaining(now time.Time) time.Duration {
	return time.Duration(e.stored + int64(e.lifetime()) - now.UnixNano())
}

func (e *entry) fresh(now time.Time) bool { return now.UnixNano() < e.stored+int64(e.lifetime()) }

// elapsed is the whole seconds since e was stored, rounded up, so that a
// TTL decremented by it is never larger than what the entry has left.
func (e *entry) elapsed(now time.Time) uint32 {
	d := time.Duration(now.UnixNano() - e.stored)
	if d <= 0 {
		return 0
	}
	return uint32(min((d+time.Second-1)/time.Second, math.MaxUint32))
}

// shard is one independently locked LRU with its own byte budget.
type shard struct {
	mu    sync.Mutex                     // guards following
	lru   *simplelru.LRU[uint64, *entry] // keyed by the seeded key hash
	bytes int64                          // sum of entry sizes
	// inserts counts the entries stored (wrapping): the clock that
	// touchLocked measures an entry's place in the LRU by.
	inserts uint32
	hits    uint64        // fresh answers served from this shard
	kinds   [numKinds]int // entries held, by kind
	// evictedDenials counts negative and SERVFAIL entries evicted for space.
	evictedDenials uint64
	// failed holds, for the entries served stale after an upstream failure,
	// the time of the last failure (Unix nanoseconds), until the entry
	// leaves the shard. Few entries ever have one, so it is not a field of
	// every entry.
	failed map[*entry]int64
	budget int64 // immutable

	_ [64]byte // keeps neighbouring shards' locks off one cache line
}

func newShard(budget int64) *shard {
	l, err := simplelru.NewLRU[uint64, *entry](math.MaxInt, nil)
	if err != nil { // only for a size <= 0
		panic(err)
	}
	return &shard{lru: l, budget: budget}
}

// dead reports whether e is past use even as a stale answer.
func dead(e *entry, now time.Time, staleMaxAge time.Duration) bool {
	if staleMaxAge < 0 {
		return !e.fresh(now)
	}
	return now.Sub(e.expire()) > staleMaxAge
}

// staleable reports whether e may be served stale: expired, within
// staleMaxAge, and not a SERVFAIL (answering one stale says nothing more
// than failing).
func staleable(e *entry, now time.Time, staleMaxAge time.Duration) bool {
	return !e.fresh(now) && e.kind != kindServfail && !dead(e, now, staleMaxAge)
}

// usable reports whether e may still answer, fresh or stale.
func usable(e *entry, now time.Time, staleMaxAge time.Duration) bool {
	return e.fresh(now) || staleable(e, now, staleMaxAge)
}

// insertLocked stores e under h, replacing any entry there, drops dead
// entries at the old end, then evicts the least recently used entries
// until the shard is within budget. It returns the number of live entries
// evicted for space.
func (s *shard) insertLocked(h uint64, e *entry, now time.Time, staleMaxAge time.Duration) (evicted int) {
	s.removeLocked(h)
	for {
		_, old, ok := s.lru.GetOldest()
		if !ok || !dead(old, now, staleMaxAge) {
			break
		}
		s.removeOldestLocked()
	}
	s.inserts++
	e.touched = s.inserts
	s.lru.Add(h, e)
	s.bytes += e.size()
	s.kinds[e.kind]++
	for s.bytes > s.budget {
		if k, ok := s.removeOldestLocked(); ok && k != kindPositive {
			s.evictedDenials++
		}
		evicted++
	}
	return evicted
}

// touchLocked records a hit on e, the entry under h, for the LRU order. A
// strict LRU would move e to the front on every hit, rewriting the list's
// links each time; here a hit moves e only once more than a quarter of the
// shard's entries have been inserted since e was last inserted or moved.
// So a name hit over and over costs a map probe and no list writes, while
// a name that has drifted towards the old end is moved on its next hit.
// The order stays an LRU at that grain: an entry is evicted only after
// every entry last inserted or moved before it, and one hit at least once
// per quarter-shard of inserts is never evicted for space. It inlines into
// the hit path; the move, kept out of line, does not.
func (s *shard) touchLocked(h uint64, e *entry) {
	if s.inserts-e.touched > uint32(s.lru.Len())/4 {
		s.promoteLocked(h, e)
	}
}

//go:noinline
func (s *shard) promoteLocked(h uint64, e *entry) {
	s.lru.Get(h) // moves it to the front
	e.touched = s.inserts
}

func (s *shard) removeLocked(h uint64) bool {
	old, ok := s.lru.Peek(h)
	if !ok {
		return false
	}
	s.lru.Remove(h)
	s.dropLocked(old)
	return true
}

// dropLocked forgets e, just removed from the LRU.
func (s *shard) dropLocked(e *entry) {
	s.bytes -= e.size()
	s.kinds[e.kind]--
	if s.failed != nil {
		delete(s.failed, e)
	}
}

// failedWithinLocked reports whether the upstream failed for e, while it
// was stale, less than d before now.
func (s *shard) failedWithinLocked(e *entry, now time.Time, d time.Duration) bool {
	at := s.failed[e] // Unix nanoseconds; zero: never
	return at != 0 && now.Sub(time.Unix(0, at)) < d
}

// setFailedLocked records an upstream failure for e, a cached entry, at at.
func (s *shard) setFailedLocked(e *entry, at int64) {
	if s.failed == nil {
		s.failed = make(map[*entry]int64)
	}
	s.failed[e] = at
}

// removeOldestLocked removes the least recently used entry and returns
// its kind, ok false when the shard was empty.
func (s *shard) removeOldestLocked() (kind, bool) {
	_, old, ok := s.lru.RemoveOldest()
	if !ok {
		return 0, false
	}
	s.dropLocked(old)
	return old.kind, true
}

// snapshot returns the shard's entries, most recently used first.
func (s *shard) snapshot() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.lru.Keys() // oldest first
	out := make([]*entry, 0, len(keys))
	for i := len(keys) - 1; i >= 0; i-- {
		if e, ok := s.lru.Peek(keys[i]); ok {
			out = append(out, e)
		}
	}
	return out
}
