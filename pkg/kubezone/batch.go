package kubezone

// batch collects what one drain must rebuild and publish. A caller makes
// one with newBatch, applies events to it (applyEventLocked) and publishes
// it (publishLocked), all under Zone.mu. Its maps are made on first use:
// most drains are one EndpointSlice update, which marks one service and,
// for a ClusterIP service, changes no name. drain reuses the zone's spare batch (reset after
// each publish) rather than make one each time.
type batch struct {
	svcs    map[string]bool  // services to rebuild
	nss     map[string]bool  // namespaces whose empty non-terminals to recheck
	ptrDel  []ptrSlot        // PTR index slots to remove: addresses services no longer publish
	ptrAdd  []ptrSlot        // PTR index slots to add: addresses services publish anew
	podRecs map[string]bool  // verified pod names to rebuild
	local   bool             // node-local pods changed
	changes map[string]*node // name → new node (nil: delete)
	events  []event          // applied, for the latency histogram
	bumps   []uint32         // scope counters touched (scope.go)
	all     bool             // every scope touched: bumps is not kept
}

func newBatch() *batch { return &batch{} }

// mark adds key to the set *m, making the set when it is nil.
func mark(m *map[string]bool, key string) {
	if *m == nil {
		*m = map[string]bool{}
	}
	(*m)[key] = true
}

// change records the new node of name (nil: delete the name).
func (b *batch) change(name string, n *node) {
	if b.changes == nil {
		b.changes = map[string]*node{}
	}
	b.changes[name] = n
}

// queued reports whether b already holds a change of name.
func (b *batch) queued(name string) bool {
	_, ok := b.changes[name]
	return ok
}

// batchMapMax is the size beyond which reset drops a map rather than
// clear it: clearing costs its capacity, which a burst (the initial list)
// makes large.
const batchMapMax = 64

// reset empties b for the next drain, keeping small maps and slices and
// nothing they referred to.
func (b *batch) reset() {
	b.svcs, b.nss, b.podRecs = clearSmall(b.svcs), clearSmall(b.nss), clearSmall(b.podRecs)
	b.changes = clearSmall(b.changes)
	clear(b.ptrDel)
	clear(b.ptrAdd)
	b.ptrDel, b.ptrAdd = shrink(b.ptrDel), shrink(b.ptrAdd)
	b.local, b.events = false, nil
	b.bumps, b.all = shrink(b.bumps), false
}

func clearSmall[V any](m map[string]V) map[string]V {
	if len(m) > batchMapMax {
		return nil
	}
	clear(m)
	return m
}

// scratchMax is the capacity beyond which reused slices are dropped rather
// than kept for the next use: one burst must not pin memory.
const scratchMax = 4096

// shrink empties s for reuse, dropping it when it grew large.
func shrink[T any](s []T) []T {
	if cap(s) > scratchMax {
		return nil
	}
	return s[:0]
}
