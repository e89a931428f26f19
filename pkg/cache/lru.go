package cache

import (
	"hash/maphash"
	"unsafe"

	"github.com/nodecache/nodecache/pkg/wire"
)

// lru is a shard's least-recently-used order of its entries, keyed by the
// seeded key hash. It is intrusive: the links are the entries' own prev
// and next, so an entry costs its struct and a map slot, not also a list
// element (80 bytes with golang-lru's simplelru, which this replaces: a
// third of the heap a cached name held).
// The map holds no key beside the hash: an entry's hash is recomputed
// from its reply's question and DNSSEC bits when it is evicted, which
// is why add refuses an entry whose question is not its key's. Not safe
// for concurrent use: the shard's mu guards it.
type lru struct {
	seed   maphash.Seed
	m      map[uint64]*entry
	newest *entry // nil when empty
	oldest *entry
}

func newLRU(seed maphash.Seed) *lru { return &lru{seed: seed, m: make(map[uint64]*entry)} }

// hashOf is e's key hash, as wire.Key.Hash computes it for e.key(),
// without allocating the name.
func (l *lru) hashOf(e *entry) uint64 {
	name, typ, class := e.packed.Question()
	k := wire.Key{Type: typ, Class: class, DO: e.do, CD: e.cd}
	if len(name) > 0 {
		k.Name = unsafe.String(&name[0], len(name)) // Hash copies it and keeps nothing
	}
	return k.Hash(l.seed)
}

// Len returns the number of entries.
func (l *lru) Len() int { return len(l.m) }

// Peek returns the entry under h without touching its recency.
func (l *lru) Peek(h uint64) (*entry, bool) {
	e, ok := l.m[h]
	return e, ok
}

// Get returns the entry under h and makes it the most recently used.
func (l *lru) Get(h uint64) (*entry, bool) {
	e, ok := l.m[h]
	if ok && e != l.newest {
		l.unlink(e)
		l.pushNewest(e)
	}
	return e, ok
}

// Add stores e under h as the most recently used entry, replacing any
// entry there. It refuses (false) an entry whose own key does not hash
// to h: it could never answer a lookup, and eviction could not find it.
func (l *lru) Add(h uint64, e *entry) bool {
	if l.hashOf(e) != h {
		return false
	}
	l.Remove(h)
	l.m[h] = e
	l.pushNewest(e)
	return true
}

// Remove removes the entry under h and reports whether there was one.
func (l *lru) Remove(h uint64) bool {
	e, ok := l.m[h]
	if !ok {
		return false
	}
	delete(l.m, h)
	l.unlink(e)
	return true
}

// Oldest returns the least recently used entry.
func (l *lru) Oldest() (*entry, bool) { return l.oldest, l.oldest != nil }

// RemoveOldest removes the least recently used entry and returns it.
func (l *lru) RemoveOldest() (*entry, bool) {
	e := l.oldest
	if e == nil {
		return nil, false
	}
	delete(l.m, l.hashOf(e))
	l.unlink(e)
	return e, true
}

// Keys returns the hashes of the entries, oldest first.
func (l *lru) Keys() []uint64 {
	out := make([]uint64, 0, len(l.m))
	for e := l.oldest; e != nil; e = e.prev {
		out = append(out, l.hashOf(e))
	}
	return out
}

// Purge removes every entry.
func (l *lru) Purge() {
	for e := l.oldest; e != nil; {
		prev := e.prev
		e.prev, e.next = nil, nil
		e = prev
	}
	l.m = make(map[uint64]*entry) // clear would keep the table's size
	l.newest, l.oldest = nil, nil
}

// pushNewest links e in as the most recently used. e.next points towards
// the older entries, e.prev towards the newer.
func (l *lru) pushNewest(e *entry) {
	e.prev, e.next = nil, l.newest
	if l.newest != nil {
		l.newest.prev = e
	} else {
		l.oldest = e
	}
	l.newest = e
}

func (l *lru) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.newest = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.oldest = e.prev
	}
	e.prev, e.next = nil, nil
}
