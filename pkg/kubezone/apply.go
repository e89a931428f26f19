package kubezone

import (
	"slices"
	"sort"
	"strings"
	"sync/atomic"
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
	z.queue, z.queueSpare = z.queueSpare, nil
	z.qmu.Unlock()
	z.applyLocked(evs)
	clear(evs) // the models they hold may be garbage now
	z.queueSpare = shrink(evs)
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
	b := z.spare
	for _, ev := range evs {
		z.applyEventLocked(ev, b)
	}
	b.events = evs
	z.publishLocked(b)
	b.reset()
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
			mark(&b.nss, old.Namespace)
		}
		delete(st.services, ev.key)
		if s, ok := ev.obj.(*svcModel); ok {
			st.services[ev.key] = s
			st.nsRefs[s.Namespace]++
			mark(&b.nss, s.Namespace)
		}
		mark(&b.svcs, ev.key)
	case objSlice:
		if z.replaceSliceLocked(ev, b) {
			return
		}
		if old := st.slices[ev.key]; old != nil {
			svcKey := nsKey(old.Namespace, old.Service)
			st.slicesBySvc[svcKey] = slices.DeleteFunc(st.slicesBySvc[svcKey], func(s *sliceModel) bool { return s == old })
			if len(st.slicesBySvc[svcKey]) == 0 {
				delete(st.slicesBySvc, svcKey)
			}
			mark(&b.svcs, svcKey)
		}
		delete(st.slices, ev.key)
		if s, ok := ev.obj.(*sliceModel); ok {
			svcKey := nsKey(s.Namespace, s.Service)
			st.slices[ev.key] = s
			list := st.slicesBySvc[svcKey]
			i := sort.Search(len(list), func(i int) bool { return list[i].Name >= s.Name })
			st.slicesBySvc[svcKey] = slices.Insert(list, i, s)
			mark(&b.svcs, svcKey)
		}
	case objNamespace:
		delete(st.namespaces, ev.key)
		if p, ok := ev.obj.(nsPresent); ok {
			st.namespaces[ev.key] = p.snap
		}
		mark(&b.nss, ev.key)
	case objPod:
		z.applyPodLocked(ev, b)
	}
}

// replaceSliceLocked applies a slice update that keeps the slice's service,
// the common case, in place in the service's list, and reports whether it
// did.
func (z *Zone) replaceSliceLocked(ev event, b *batch) bool {
	st := z.st
	old := st.slices[ev.key]
	s, _ := ev.obj.(*sliceModel)
	if old == nil || s == nil || old.Namespace != s.Namespace || old.Service != s.Service || old.Name != s.Name {
		return false
	}
	svcKey := nsKey(s.Namespace, s.Service)
	list := st.slicesBySvc[svcKey] // the state's own array: entries hold copies
	i := slices.Index(list, old)
	if i < 0 {
		return false
	}
	list[i] = s
	st.slices[ev.key] = s
	mark(&b.svcs, svcKey)
	return true
}

// publishLocked rebuilds what b marked, stores the changed names and bumps
// the generation.
func (z *Zone) publishLocked(b *batch) {
	st := z.st
	for key := range b.svcs {
		z.rebuildServiceLocked(key, b)
		ns, name, _ := strings.Cut(key, "/")
		b.bump(z.scopes.service(ns, name))
	}
	for ns := range b.nss {
		z.nsNodesLocked(ns, b)
		b.bump(z.scopes.namespace(ns))
	}
	for name := range b.podRecs {
		b.change(name, z.podRecordNode(name, st.podRecs[name]))
		label, rest := firstLabel(name)
		ns, _, _ := strings.Cut(rest, ".")
		b.bump(z.scopes.pod(ns, label))
	}
	if b.local {
		z.publishLocalPodsLocked()
	}
	z.tab.apply(b.changes)
	z.ptrs.apply(b.ptrDel, b.ptrAdd)
	gen := z.meta.Load().gen + 1
	z.meta.Store(z.newMeta(gen))
	z.scopes.publish(b, gen) // after the data: see scope.go
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
		var n *node
		if ent.want {
			n = newNode(nil, nil, kindData)
		}
		z.setNodeLocked(ent.name, n, b)
	}
}

// rebuildServiceLocked replaces the records of service key (removing them
// when the service is gone) and queues the PTR index changes. When only
// its slices changed and they feed none of its names (a ClusterIP
// service, as most are), it replaces the entry alone: no name is rebuilt,
// and PTR slots change only for the addresses added or removed.
func (z *Zone) rebuildServiceLocked(key string, b *batch) {
	st := z.st
	ref := st.contrib[key]
	var old *svcEntry
	if ref != nil {
		old = ref.entry()
		st.endpoints -= int(old.endpoints)
		st.hostNames -= int(old.hostNames)
	}
	svc := st.services[key]
	if svc == nil {
		if old != nil {
			old.nodeNames(func(name string) { b.change(name, nil) })
			z.ptrDiffLocked(ref, old, nil, b)
			delete(st.contrib, key)
		}
		return
	}
	eps := st.slicesBySvc[key] // the entries built take copies
	// A published headless service's names list its endpoints: always rebuilt.
	if old != nil && old.svc == svc && (!svc.Headless || !old.published) {
		if e, keys := z.newEntry(svc, old.base, eps); namesKept(old, e) {
			z.ptrDiffLocked(ref, old, keys, b)
			z.setEntryLocked(ref, e)
			return
		}
	}
	if ref == nil {
		ref = &svcRef{}
		st.contrib[key] = ref
	}
	base := ""
	if old != nil {
		base = old.base
	}
	nb := z.buildService(svc, eps, ref, base)
	z.publishBuildLocked(old, nb, b)
	z.ptrDiffLocked(ref, old, nb.keys, b)
	z.setEntryLocked(ref, nb.entry)
}

// setEntryLocked makes e the current entry of ref and counts it.
func (z *Zone) setEntryLocked(ref *svcRef, e *svcEntry) {
	z.st.endpoints += int(e.endpoints)
	z.st.hostNames += int(e.hostNames)
	ref.cur.Store(e)
}

// objectCounts are the object counts of the last publish, stored field by
// field (a Stats allocated per publish was most of what a publish
// allocated); Stats reads them without locking, each as new as the last
// publish or the one before.
type objectCounts struct {
	kinds [len(objectKinds)]atomic.Int64 // by objectKinds
	names atomic.Int64                   // endpoint host names and PTR index addresses
}

func (c *objectCounts) load() Stats {
	return Stats{Namespaces: int(c.kinds[0].Load()), Services: int(c.kinds[1].Load()),
		EndpointSlices: int(c.kinds[2].Load()), Endpoints: int(c.kinds[3].Load()), Pods: int(c.kinds[4].Load()),
		Names: int(c.names.Load())}
}

// observeLocked updates the object counts and gauges and the programming
// latency.
func (z *Zone) observeLocked(b *batch) {
	st := z.st
	for i, n := range [len(objectKinds)]int{len(st.namespaces), len(st.services), len(st.slices), st.endpoints, len(st.pods)} {
		z.counts.kinds[i].Store(int64(n))
		z.met.kindGauges[i].Set(float64(n))
	}
	z.counts.names.Store(int64(st.hostNames) + z.ptrs.keys.Load())
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
