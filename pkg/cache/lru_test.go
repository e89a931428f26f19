package cache

import (
	"fmt"
	"hash/maphash"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// lruEntry is an entry answering name, and its key hash under seed.
func lruEntry(tb testing.TB, seed maphash.Seed, name string, do bool) (uint64, *entry) {
	tb.Helper()
	qs := newQuestion(tb, name, dns.TypeA)
	qs.key.DO = do
	p, err := wire.Pack(replyA(qs.req, 300))
	if err != nil {
		tb.Fatal(err)
	}
	return qs.key.Hash(seed), newEntry(&qs.key, *p, kindPositive, time.Unix(1, 0), 300*time.Second)
}

// TestLRUOrder: Get makes an entry the newest, Peek does not; the oldest
// goes first; Remove, Keys and Purge see the same order and the map.
func TestLRUOrder(t *testing.T) {
	seed := maphash.MakeSeed()
	l := newLRU(seed)
	hs := make([]uint64, 4)
	es := make([]*entry, 4)
	for i := range hs {
		hs[i], es[i] = lruEntry(t, seed, fmt.Sprintf("n%d.example.", i), i == 3)
		if !l.Add(hs[i], es[i]) {
			t.Fatalf("Add of n%d refused", i)
		}
	}
	if e, ok := l.Get(hs[0]); !ok || e != es[0] {
		t.Fatalf("Get n0: got %v, %v", e, ok)
	}
	if e, ok := l.Peek(hs[1]); !ok || e != es[1] {
		t.Fatalf("Peek n1: got %v, %v", e, ok)
	}
	// Oldest first: n1 n2 n3 n0.
	if got, want := l.Keys(), []uint64{hs[1], hs[2], hs[3], hs[0]}; !slices.Equal(got, want) {
		t.Errorf("Keys: got %v, want %v (n1 n2 n3 n0)", got, want)
	}
	if !l.Remove(hs[2]) || l.Remove(hs[2]) {
		t.Errorf("Remove n2: want true once, then false")
	}
	for _, want := range []int{1, 3, 0} {
		if e, ok := l.Oldest(); !ok || e != es[want] {
			t.Fatalf("Oldest: got %v, want n%d", e, want)
		}
		if e, ok := l.RemoveOldest(); !ok || e != es[want] {
			t.Fatalf("RemoveOldest: got %v, want n%d", e, want)
		}
		if _, ok := l.Peek(hs[want]); ok {
			t.Errorf("n%d still in the map after RemoveOldest", want)
		}
	}
	if _, ok := l.RemoveOldest(); ok || l.Len() != 0 {
		t.Errorf("empty list: RemoveOldest ok %v, Len %d; want false, 0", ok, l.Len())
	}
	for i := range hs {
		l.Add(hs[i], es[i])
	}
	l.Add(hs[0], es[0]) // replacing: still one entry
	if l.Len() != 4 {
		t.Errorf("Len after re-adding n0: got %d, want 4", l.Len())
	}
	l.Purge()
	if l.Len() != 0 || l.newest != nil || l.oldest != nil || len(l.Keys()) != 0 {
		t.Errorf("after Purge: Len %d, want an empty list", l.Len())
	}
}

// TestLRURefusesForeignEntry: an entry whose question is not its key's is
// refused, since eviction finds an entry by its own key's hash.
func TestLRURefusesForeignEntry(t *testing.T) {
	seed := maphash.MakeSeed()
	l := newLRU(seed)
	h, _ := lruEntry(t, seed, "a.example.", false)
	_, other := lruEntry(t, seed, "b.example.", false)
	if l.Add(h, other) {
		t.Errorf("Add of b.example.'s entry under a.example.'s hash: got accepted, want refused")
	}
	if l.Len() != 0 {
		t.Errorf("Len: got %d, want 0", l.Len())
	}
}
