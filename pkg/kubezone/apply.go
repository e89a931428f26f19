package kubezone

import (
	"sort"
	"time"

	"github.com/miekg/dns"
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
	ptrs    map[string]bool  // reverse names to rebuild
	podRecs map[string]bool  // verified pod names to rebuild
	local   bool             // node-local pods changed
	changes map[string]*node // name → new node (nil: delete)
	events  []event          // applied, for the latency histogram
}

func newBatch() *batch {
	return &batch{svcs: map[string]bool{}, nss: map[string]bool{}, ptrs: map[string]bool{}, podRecs: map[string]bool{},
		changes: map[string]*node{}}
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
			delete(st.slicesBySvc[svcKey], ev.key)
			if len(st.slicesBySvc[svcKey]) == 0 {
				delete(st.slicesBySvc, svcKey)
			}
			b.svcs[svcKey] = true
		}
		delete(st.slices, ev.key)
		if s, ok := ev.obj.(*sliceModel); ok {
			svcKey := nsKey(s.Namespace, s.Service)
			st.slices[ev.key] = s
			if st.slicesBySvc[svcKey] == nil {
				st.slicesBySvc[svcKey] = map[string]*sliceModel{}
			}
			st.slicesBySvc[svcKey][ev.key] = s
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
		old := st.contrib[key]
		for name := range old.nodes {
			b.changes[name] = nil
		}
		for _, p := range old.ptrs {
			b.ptrs[p.rev] = true
			st.ptrOwners[p.rev] = removePTR(st.ptrOwners[p.rev], p)
		}
		st.endpoints -= old.endpoints
		delete(st.contrib, key)
		svc := st.services[key]
		if svc == nil {
			continue
		}
		nb := z.buildService(svc, st.slicesBySvc[key])
		for name, n := range nb.nodes {
			b.changes[name] = n
		}
		for _, p := range nb.ptrs {
			b.ptrs[p.rev] = true
			st.ptrOwners[p.rev] = append(st.ptrOwners[p.rev], p)
		}
		st.endpoints += nb.endpoints
		st.contrib[key] = nb
	}
	for rev := range b.ptrs {
		b.changes[rev] = z.ptrNode(rev, st.ptrOwners[rev])
		if len(st.ptrOwners[rev]) == 0 {
			delete(st.ptrOwners, rev)
		}
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
	gen := z.meta.Load().gen + 1
	z.meta.Store(&meta{gen: gen, soaRR: []dns.RR{z.soa(gen)}})
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
			b.changes[ent.name] = &node{}
		} else {
			b.changes[ent.name] = nil
		}
	}
}

// ptrNode builds the PTR node of a reverse name, one PTR per distinct
// target in a stable order; nil when no service owns the name.
func (z *Zone) ptrNode(rev string, owners []ptrEntry) *node {
	if len(owners) == 0 {
		return nil
	}
	targets := make([]string, 0, len(owners))
	for _, p := range owners {
		targets = append(targets, p.target)
	}
	sort.Strings(targets)
	n := &node{rrs: make([]dns.RR, 0, len(targets))}
	for i, t := range targets {
		if i > 0 && targets[i-1] == t {
			continue
		}
		n.rrs = append(n.rrs, &dns.PTR{Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET,
			Ttl: z.cfg.ttlSeconds()}, Ptr: t})
	}
	return n
}

func removePTR(ps []ptrEntry, p ptrEntry) []ptrEntry {
	for i := range ps {
		if ps[i] == p {
			return append(ps[:i:i], ps[i+1:]...)
		}
	}
	return ps
}

// observeLocked updates the object gauges and the programming latency.
func (z *Zone) observeLocked(b *batch) {
	st := z.st
	z.met.objects.WithLabelValues("namespaces").Set(float64(len(st.namespaces)))
	z.met.objects.WithLabelValues("services").Set(float64(len(st.services)))
	z.met.objects.WithLabelValues("endpointslices").Set(float64(len(st.slices)))
	z.met.objects.WithLabelValues("endpoints").Set(float64(st.endpoints))
	z.met.objects.WithLabelValues("pods").Set(float64(len(st.pods)))
	if !z.synced.Load() {
		return // the initial list measures the list, not programming
	}
	now := z.now()
	for _, ev := range b.events {
		if !ev.arrived.IsZero() {
			z.met.programming.WithLabelValues("event").Observe(now.Sub(ev.arrived).Seconds())
		}
		if !ev.written.IsZero() {
			z.met.programming.WithLabelValues("write").Observe(max(0, now.Sub(ev.written).Seconds()))
		}
	}
}
