package kubezone

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// TestPTRIndexMatchesMap applies random batches of slot removals and
// additions, IPv4 and IPv6 addresses mixed in the same shards, and checks
// the index against a plain map after each: owners, the address count and
// each.
func TestPTRIndexMatchesMap(t *testing.T) {
	x := newPTRIndex()
	svcs := []*svcRef{{}, {}, {}}
	var keys []addrKey
	for i := range 40 {
		keys = append(keys, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}).As16(),
			netip.AddrFrom16([16]byte{0xfd, 15: byte(i)}).As16())
	}
	want := map[addrKey][]*svcRef{}
	rng := rand.New(rand.NewPCG(1, 2))
	for batch := range 300 {
		var del, add []ptrSlot
		for range 1 + rng.IntN(20) {
			k, svc := keys[rng.IntN(len(keys))], svcs[rng.IntN(len(svcs))]
			s := ptrSlot{key: k, svc: svc}
			switch {
			case slices.Contains(add, s) || slices.Contains(del, s):
				// The writer never removes and adds the same slot in a batch
				// (it queues the difference of a service's old and new entry).
			case slices.Contains(want[k], svc):
				del = append(del, s)
				want[k] = slices.DeleteFunc(want[k], func(r *svcRef) bool { return r == svc })
			default:
				add = append(add, s)
				want[k] = append(want[k], svc)
			}
		}
		x.apply(del, add)
		n := 0
		for _, k := range keys {
			got := x.owners(k)
			if len(want[k]) > 0 {
				n++
			}
			if !sameOwners(got, want[k]) {
				t.Fatalf("batch %d: owners of %v: got %v, want %v", batch, keyAddr(k), got, want[k])
			}
		}
		if got := int(x.keys.Load()); got != n {
			t.Fatalf("batch %d: keys: got %d, want %d", batch, got, n)
		}
		seen := 0
		x.each(func(k addrKey, owners []*svcRef) {
			seen++
			if !sameOwners(owners, want[k]) {
				t.Fatalf("batch %d: each at %v: got %v, want %v", batch, keyAddr(k), owners, want[k])
			}
		})
		if seen != n {
			t.Fatalf("batch %d: each visited %d addresses, want %d", batch, seen, n)
		}
	}
}

// sameOwners compares two sets of services.
func sameOwners(a, b []*svcRef) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
