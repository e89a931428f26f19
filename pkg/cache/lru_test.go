package cache

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// fullShard returns a one-shard cache filled until it has evicted, and
// the questions of the names it holds, oldest first.
func fullShard(t *testing.T) (*Cache, *clock, []*question) {
	t.Helper()
	clk := newClock()
	c := newTestCache(t, Config{MaxBytes: 8 << 10, Shards: 1}, &fakeUpstream{reply: answerA(300)}, clk)
	var qs []*question
	for i := 0; c.Stats().Evictions == 0; i++ {
		qs = append(qs, newQuestion(t, fmt.Sprintf("name-%d.example.", i), dns.TypeA))
		resolve(t, c, qs[len(qs)-1])
	}
	held := qs[len(qs)-c.Stats().Entries:]
	if n := len(held); n < 16 {
		t.Fatalf("entries held: got %d, want at least 16 for these tests", n)
	}
	return c, clk, held
}

func (c *Cache) holds(qs *question) bool {
	s := c.shardOf(qs.key.Hash(c.seed))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.lru.Peek(qs.key.Hash(c.seed))
	return ok && e.hasKey(&qs.key)
}

// TestHitPromotesOldEntry pins that a hit moves an entry from the old end
// of the LRU: the oldest name, hit once, outlives the never-hit names
// stored after it.
func TestHitPromotesOldEntry(t *testing.T) {
	c, clk, held := fullShard(t)
	oldest, next := held[0], held[1]
	if _, _, ok := c.Lookup(&oldest.q, clk.Now()); !ok {
		t.Fatal("oldest entry: got a miss, want a hit")
	}
	for i := 0; c.holds(next); i++ {
		resolve(t, c, newQuestion(t, fmt.Sprintf("more-%d.example.", i), dns.TypeA))
	}
	if !c.holds(oldest) {
		t.Error("oldest entry, hit: got evicted before the never-hit entry after it, want kept")
	}
}

// TestHitEveryHalfShardKeepsEntry: a name hit once per half a shard's
// worth of inserts is never evicted, however many names pass through.
func TestHitEveryHalfShardKeepsEntry(t *testing.T) {
	c, clk, held := fullShard(t)
	hot, period := held[0], len(held)/2
	for i := range 8 * len(held) {
		if i%period == 0 {
			if _, _, ok := c.Lookup(&hot.q, clk.Now()); !ok {
				t.Fatalf("hot entry after %d inserts: got evicted, want kept", i)
			}
		}
		resolve(t, c, newQuestion(t, fmt.Sprintf("churn-%d.example.", i), dns.TypeA))
	}
}

// TestHitOnNewEntryKeepsOrder pins the saving: a hit on an entry among
// the newest quarter of its shard does not reorder the LRU.
func TestHitOnNewEntryKeepsOrder(t *testing.T) {
	c, clk, held := fullShard(t)
	newest, before := held[len(held)-1], held[len(held)-2]
	if _, _, ok := c.Lookup(&before.q, clk.Now()); !ok {
		t.Fatal("second newest entry: got a miss, want a hit")
	}
	snap := c.shards[0].snapshot()
	if !snap[0].hasKey(&newest.key) || !snap[1].hasKey(&before.key) {
		k0, k1 := snap[0].key(), snap[1].key()
		t.Errorf("LRU front after a hit on the second newest: got %s, %s, want %s, %s",
			k0.PresentationName(), k1.PresentationName(), newest.key.PresentationName(), before.key.PresentationName())
	}
}
