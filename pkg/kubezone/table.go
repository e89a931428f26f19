package kubezone

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// shardCount is the number of copy-on-write shards of the name table. An
// update copies only the shards it touches; with 4096 shards a 250k-name
// zone has ~60 names per shard, so one service update copies a few
// kilobytes of map while readers keep reading the old shard.
const shardCount = 4096

// nodeKind tells Lookup how to read a node.
type nodeKind uint8

const (
	kindData   nodeKind = iota // records of rrs (none: empty non-terminal)
	kindCNAME                  // ExternalName service: rrs[0] is the CNAME
	kindStatic                 // fixed names (dns-version, svc, pod): valid before sync
	kindApex                   // the zone apex: SOA comes from meta
)

// node holds every record of one owner name. Nodes are immutable once
// stored in the table; their slices are shared by answers and read-only.
// One slice holds both sections to keep the nodes of a large cluster small
// (40 bytes each).
type node struct {
	rrs  []dns.RR // the records, sorted by Rrtype, then from nAns on the additional section of SRV (NS) answers
	svc  *svcRef  // at a service's base name: answers its endpoint host names; else nil
	nAns uint32
	kind nodeKind
}

// newNode builds a node from its records (sorted here) and the additional
// records of its SRV (or NS) answers. rrs is kept when extra is empty.
func newNode(rrs, extra []dns.RR, kind nodeKind) *node {
	sortRRs(rrs)
	if len(extra) > 0 {
		all := make([]dns.RR, 0, len(rrs)+len(extra))
		rrs = append(append(all, rrs...), extra...)
	}
	return &node{rrs: rrs, nAns: uint32(len(rrs) - len(extra)), kind: kind}
}

// answers returns the node's own records (no allocation).
func (n *node) answers() []dns.RR { return n.rrs[:n.nAns:n.nAns] }

// extra returns the additional records of the node's SRV or NS answers.
func (n *node) extra() []dns.RR { return n.rrs[n.nAns:len(n.rrs):len(n.rrs)] }

// typed returns the records of type t, a sub-slice of the answers (no allocation).
func (n *node) typed(t uint16) []dns.RR {
	rrs := n.answers()
	lo, hi := 0, len(rrs)
	for lo < hi { // first index with Rrtype >= t
		m := int(uint(lo+hi) >> 1)
		if rrs[m].Header().Rrtype < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	end := lo
	for end < len(rrs) && rrs[end].Header().Rrtype == t {
		end++
	}
	return rrs[lo:end:end]
}

// table is the name → node index read by Lookup. Readers never lock:
// each shard is an atomic pointer to an immutable sorted array, replaced
// whole by the single writer (Zone.mu held). Sorted arrays cost 24 bytes a
// name against ~46 for a Go map, and a lookup is a hash plus a binary
// search over ~60 names.
type table struct {
	seed   maphash.Seed // set once by newTable
	names  atomic.Int64 // number of names stored
	shards [shardCount]atomic.Pointer[shard]

	// The writer's scratch (Zone.mu): the changed names by shard.
	byShard []shardName
	group   []string
}

// shardName is a changed name and its shard.
type shardName struct {
	shard uint32
	name  string
}

func newTable() *table { return &table{seed: maphash.MakeSeed()} }

// shard holds the names of one hash bucket, sorted, and their nodes
// (stored inline: no pointer and no allocation per node).
type shard struct {
	names []string
	nodes []node
}

// shardOf hashes the name (runtime AES hash) to a shard index.
func (t *table) shardOf(name string) uint32 {
	return uint32(maphash.String(t.seed, name) % shardCount)
}

func (t *table) get(name string) *node {
	s := t.shards[t.shardOf(name)].Load()
	if s == nil {
		return nil
	}
	lo, hi := 0, len(s.names)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.names[m] < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.names) && s.names[lo] == name {
		return &s.nodes[lo]
	}
	return nil
}

// apply stores every change (a nil node deletes the name), copying each
// touched shard once. The caller holds Zone.mu.
func (t *table) apply(changes map[string]*node) {
	if len(changes) == 0 {
		return
	}
	byShard := shrink(t.byShard)
	for name := range changes {
		byShard = append(byShard, shardName{shard: t.shardOf(name), name: name})
	}
	slices.SortFunc(byShard, func(x, y shardName) int {
		return cmp.Or(cmp.Compare(x.shard, y.shard), strings.Compare(x.name, y.name))
	})
	for lo := 0; lo < len(byShard); {
		i := byShard[lo].shard
		names := shrink(t.group)
		for ; lo < len(byShard) && byShard[lo].shard == i; lo++ {
			names = append(names, byShard[lo].name)
		}
		t.group = names
		old := t.shards[i].Load()
		if old == nil {
			old = &shard{}
		}
		n := old.sizeAfter(names, changes) // exact: a shard lives until its next change
		next := &shard{names: make([]string, 0, n), nodes: make([]node, 0, n)}
		j := 0 // merge the sorted old names with the sorted changed names
		for _, name := range names {
			for j < len(old.names) && old.names[j] < name {
				next.names, next.nodes = append(next.names, old.names[j]), append(next.nodes, old.nodes[j])
				j++
			}
			if j < len(old.names) && old.names[j] == name {
				j++ // replaced or deleted
			}
			if n := changes[name]; n != nil {
				next.names, next.nodes = append(next.names, name), append(next.nodes, *n)
			}
		}
		next.names, next.nodes = append(next.names, old.names[j:]...), append(next.nodes, old.nodes[j:]...)
		t.names.Add(int64(len(next.names) - len(old.names)))
		t.shards[i].Store(next)
	}
	clear(byShard) // keep no name alive
	clear(t.group)
	t.byShard = shrink(byShard)
}

// sizeAfter is the number of names s holds once changes (of the sorted
// names) are applied.
func (s *shard) sizeAfter(names []string, changes map[string]*node) int {
	n := len(s.names)
	for _, name := range names {
		_, found := slices.BinarySearch(s.names, name)
		switch {
		case found && changes[name] == nil:
			n--
		case !found && changes[name] != nil:
			n++
		}
	}
	return n
}

// each calls f for every name in the table (used by List and Stats, not
// on the query path).
func (t *table) each(f func(name string, n *node)) {
	for i := range t.shards {
		if s := t.shards[i].Load(); s != nil {
			for j, name := range s.names {
				f(name, &s.nodes[j])
			}
		}
	}
}
