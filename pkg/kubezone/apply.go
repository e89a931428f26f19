package kubezone

import (
	"slices"
	"sort"
	"time"
)

// event is one object change waiting to be applied.
type event struct {
	key     string // ns/name, or the namespace name
	obj     any    // *svcModel, *sliceModel, *podModel, nsPresent; nil for a deletion
	kind    objKind
	arrived time.Time // when the informer delivered it
	written time.Time // the object's last write time (zero: unknown or initial list)
}

type objKind uint8

const (
	objService objKind = iota
	objSlice
	objNamespace
	objPod
)

// nsPresent is the obj of a namespace event that is not a deletion.
type nsPresent struct{ snap bool }

// batch collects what one drain must rebuild and publish.
type batch struct {
	svcs    map[string]bool  // services to rebuild
	nss     map[string]bool  // namespaces whose empty non-terminals to recheck
	ptrDel  []ptrSlot        // PTR index slots of replaced service entries
	ptrAdd  []ptrSlot        // PTR index slots of new service entries
	podRecs map[string]bool  // verified pod names to rebuild
	local   bool             // node-local pods changed
	changes map[string]*node // name → new node (nil: delete)
	events  []event          // applied, for the latency histogram
}

func newBatch() *batch {
	return &batch{svcs: map[string]bool{}, nss: map[string]bool{}, podRecs: map[string]bool{}, changes: map[string]*node{}}
}

// enqueue queues an event for the writer and wakes it.
func (z *Zone) enqueue(ev event) {
	z.qmu.Lock()
	z.queue = append(z.queue, ev)
	z.qmu.Unlock()
	select {
	case z.kick <- struct{}{}:
	default:
	}
}

// drain applies every queued event and publishes the result as one new
// generation. Bursts (the initial list) coalesce into few generations.
func (z *Zone) drain() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.qmu.Lock()
	evs := z.queue
	z.queue = nil
	z.qmu.Unlock()
	z.applyLocked(evs)
}

// apply applies evs at once, as one new generation, without the queue:
// the EndpointSlice watch (slicewatch.go) applies from its own goroutine.
func (z *Zone) apply(evs []event) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.applyLocked(evs)
}

// applyLocked applies evs and publishes them as one generation.
func (z *Zone) applyLocked(evs []event) {
	if len(evs) == 0 {
		return
	}
	b := newBatch()
	for _, ev := range evs {
		z.applyEventLocked(ev, b)
	}
	b.events = evs
	z.publishLocked(b)
}

// applyEventLocked updates the object models and marks what to rebuild.
func (z *Zone) applyEventLocked(ev event, b *batch) {
	st := z.st
	switch ev.kind {
	case objService:
		if old := st.services[ev.key]; old != nil {
			st.nsRefs[old.Namespace]--
			if st.nsRefs[old.Namespace] <= 0 {
				delete(st.nsRefs, old.Namespace)
			}
			b.nss[old.Namespace] = true
		}
		delete(st.services, ev.key)
		if s, ok := ev.obj.(*svcModel); ok {
			st.services[ev.key] = s
			st.nsRefs[s.Namespace]++
			b.nss[s.Namespace] = true
		}
		b.svcs[ev.key] = true
	case objSlice:
		if old := st.slices[ev.key]; old != nil {
			svcKey := nsKey(old.Namespace, old.Service)
			st.slicesBySvc[svcKey] = slices.DeleteFunc(st.slicesBySvc[svcKey], func(s *sliceModel) bool { return s == old })
			if len(st.slicesBySvc[svcKey]) == 0 {
				delete(st.slicesBySvc, svcKey)
			}
			b.svcs[svcKey] = true
		}
		delete(st.slices, ev.key)
		if s, ok := ev.obj.(*sliceModel); ok {
			svcKey := nsKey(s.Namespace, s.Service)
			st.slices[ev.key] = s
			list := st.slicesBySvc[svcKey]
			i := sort.Search(len(list), func(i int) bool { return list[i].Name >= s.Name })
			st.slicesBySvc[svcKey] = slices.Insert(list, i, s)
			b.svcs[svcKey] = true
		}
	case objNamespace:
		delete(st.namespaces, ev.key)
		if p, ok := ev.obj.(nsPresent); ok {
			st.namespaces[ev.key] = p.snap
		}
		b.nss[ev.key] = true
	case objPod:
		z.applyPodLocked(ev, b)
	}
}

// publishLocked rebuilds what b marked, stores the changed names and bumps
// the generation.
func (z *Zone) publishLocked(b *batch) {
	st := z.st
	for key := range b.svcs {
		z.rebuildServiceLocked(key, b)
	}
	for ns := range b.nss {
		z.nsNodesLocked(ns, b)
	}
	for name := range b.podRecs {
		b.changes[name] = z.podRecordNode(name, st.podRecs[name])
	}
	if b.local {
		z.publishLocalPodsLocked()
	}
	z.tab.apply(b.changes)
	z.ptrs.apply(b.ptrDel, b.ptrAdd)
	gen := z.meta.Load().gen + 1
	z.meta.Store(z.newMeta(gen))
	z.snapDirty = true
	z.observeLocked(b)
}

// nsNodesLocked publishes or removes the empty non-terminals of namespace
// ns: <ns>.svc.<zone> and, unless pod records are disabled, <ns>.pod.<zone>.
func (z *Zone) nsNodesLocked(ns string, b *batch) {
	_, exists := z.st.namespaces[ns]
	exists = exists || z.st.nsRefs[ns] > 0
	for _, ent := range []struct {
		name string
		want bool
	}{
		{ns + ".svc." + z.cfg.Domain, exists},
		{ns + ".pod." + z.cfg.Domain, exists && z.cfg.Pods != PodsDisabled},
	} {
		if !validLabel(ns) || !validName(ent.name) {
			continue
		}
		if ent.want {
			b.changes[ent.name] = newNode(nil, nil, kindData)
		} else {
			b.changes[ent.name] = nil
		}
	}
}

// rebuildServiceLocked replaces the records of service key (removing them
// when the service is gone) and queues the PTR index changes.
func (z *Zone) rebuildServiceLocked(key string, b *batch) {
	st := z.st
	var nb built
	if svc := st.services[key]; svc != nil {
		nb = z.buildService(svc, slices.Clone(st.slicesBySvc[key]))
	}
	if old := st.contrib[key]; old != nil {
		// The old names, found without building the old records again;
		// those the new build keeps are simply replaced.
		old.nodeNames(func(name string) {
			if _, kept := nb.nodes[name]; !kept {
				b.changes[name] = nil
			}
		})
		b.ptrDel = slices.Grow(b.ptrDel, old.ptrCount())
		old.ptrKeys(func(k addrKey) { b.ptrDel = append(b.ptrDel, ptrSlot{key: k, svc: old}) })
		st.endpoints -= int(old.endpoints)
		st.hostNames -= int(old.hostNames)
		delete(st.contrib, key)
	}
	if nb.entry == nil {
		return
	}
	for name, n := range nb.nodes {
		b.changes[name] = n
	}
	e := nb.entry
	b.ptrAdd = slices.Grow(b.ptrAdd, e.ptrCount())
	e.ptrKeys(func(k addrKey) { b.ptrAdd = append(b.ptrAdd, ptrSlot{key: k, svc: e}) })
	st.endpoints += int(e.endpoints)
	st.hostNames += int(e.hostNames)
	st.contrib[key] = e
}

// observeLocked updates the object gauges and the programming latency.
func (z *Zone) observeLocked(b *batch) {
	st := z.st
	z.counts.Store(&Stats{Namespaces: len(st.namespaces), Services: len(st.services), EndpointSlices: len(st.slices),
		Endpoints: st.endpoints, Pods: len(st.pods), Names: st.hostNames + int(z.ptrs.keys.Load())})
	for i, n := range [len(objectKinds)]int{len(st.namespaces), len(st.services), len(st.slices), st.endpoints, len(st.pods)} {
		z.met.kindGauges[i].Set(float64(n))
	}
	if !z.synced.Load() {
		return // the initial list measures the list, not programming
	}
	now := z.now()
	for _, ev := range b.events {
		if !ev.arrived.IsZero() {
			z.met.fromEvent.Observe(now.Sub(ev.arrived).Seconds())
		}
		if !ev.written.IsZero() {
			z.met.fromWrite.Observe(max(0, now.Sub(ev.written).Seconds()))
		}
	}
}
