package cache

import (
	"math"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/nodecache/nodecache/pkg/wire"
)

// entryOverhead approximates what an entry costs beyond its reply and name:
// the entry struct, the LRU's list element and its map slot.
const entryOverhead = 256

// entry is one cached reply. Its first fields never change after insert;
// the rest are guarded by the owning shard's mu.
type entry struct {
	key    wire.Key
	packed *wire.Packed  // always non-nil
	stored int64         // wall clock, Unix nanoseconds (not time.Time: 8 bytes, not 24, per entry)
	ttl    time.Duration // whole seconds, > 0
	size   int64         // bytes charged against the shard budget
	kind   kind

	hits        uint32 // fresh hits in this entry's life
	prefetching bool   // a prefetch was started; never again for this entry
	failedAt    int64  // Unix nanoseconds of the last upstream failure while stale; 0: none
}

func newEntry(key wire.Key, p *wire.Packed, k kind, stored time.Time, ttl time.Duration) *entry {
	return &entry{
		key: key, packed: p, kind: k, stored: stored.UnixNano(), ttl: ttl,
		size: int64(p.Size() + len(key.Name) + entryOverhead),
	}
}

// expire is when e stops being fresh.
func (e *entry) expire() time.Time { return time.Unix(0, e.stored+int64(e.ttl)) }

func (e *entry) fresh(now time.Time) bool { return now.UnixNano() < e.stored+int64(e.ttl) }

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
	mu     sync.Mutex                     // guards following
	lru    *simplelru.LRU[uint64, *entry] // keyed by the seeded key hash
	bytes  int64                          // sum of entry sizes
	hits   uint64                         // fresh answers served from this shard
	budget int64                          // immutable

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
	s.lru.Add(h, e)
	s.bytes += e.size
	for s.bytes > s.budget {
		s.removeOldestLocked()
		evicted++
	}
	return evicted
}

func (s *shard) removeLocked(h uint64) bool {
	old, ok := s.lru.Peek(h)
	if !ok {
		return false
	}
	s.lru.Remove(h)
	s.bytes -= old.size
	return true
}

func (s *shard) removeOldestLocked() {
	if _, old, ok := s.lru.RemoveOldest(); ok {
		s.bytes -= old.size
	}
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
