package kubezone

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// applyBatch applies evs to z as one batch, the way a watch loop does
// (newBatch, applyEventLocked, publishLocked under z.mu), and returns the
// batch for inspection.
func applyBatch(z *Zone, evs ...event) *batch {
	z.mu.Lock()
	defer z.mu.Unlock()
	b := newBatch()
	for _, ev := range evs {
		z.applyEventLocked(ev, b)
	}
	z.publishLocked(b)
	return b
}

// slotsText renders PTR index slots as "address@service", sorted.
func slotsText(slots []ptrSlot) []string {
	var out []string
	for _, s := range slots {
		out = append(out, fmt.Sprintf("%s@%s", keyAddr(s.key), s.svc.entry().svc.Name))
	}
	slices.Sort(out)
	return out
}

// changesText renders the names a batch re-publishes, sorted, a removed
// name with a leading "-".
func changesText(b *batch) []string {
	var out []string
	for name, n := range b.changes {
		if n == nil {
			name = "-" + name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// metricsSlice is a second slice of the headless service db, of another
// named port than its first.
func metricsSlice(eps ...epModel) *sliceModel {
	s := lazySlice("db-2", "db", eps...)
	s.Ports = []portModel{{Name: "metrics", Protocol: "tcp", Port: 9090}}
	return s
}

func sliceEvent(s *sliceModel) event { return event{kind: objSlice, key: s.key(), obj: s} }

// TestSliceUpdateTouchesChangedOnly: an EndpointSlice update queues PTR
// index slots only for the addresses a service gains or loses (not for
// those it keeps, nor for a host name that changes), re-publishes no name
// of a ClusterIP service and only the names of a headless service whose
// records change (not its empty non-terminals, not the SRV names of a
// port whose targets stay), and every PTR and host name answers as a zone
// built afresh would.
func TestSliceUpdateTouchesChangedOnly(t *testing.T) {
	const web, db = ".web.ns.svc.cluster.local.", ".db.ns.svc.cluster.local."
	steps := []struct {
		name     string
		evs      []event
		del, add []string
		names    []string            // names re-published ("-": removed), sorted
		ptrs     map[string]string   // address → PTR targets (ptrs form)
		hosts    map[string][]string // host name → A records (nil: NXDOMAIN)
	}{{
		name: "ClusterIP: one endpoint goes, one comes",
		evs:  []event{sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.1", ""), epAt("10.0.0.3", ""), epAt("10.0.0.4", "")))},
		del:  []string{"10.0.0.2@web"}, add: []string{"10.0.0.4@web"},
		ptrs: map[string]string{"10.0.0.1": "10-0-0-1" + web, "10.0.0.2": "REFUSED", "10.0.0.4": "10-0-0-4" + web,
			"10.96.0.1": "web.ns.svc.cluster.local."},
		hosts: map[string][]string{"10-0-0-2" + web: nil, "10-0-0-4" + web: {"10-0-0-4" + web + " A 10.0.0.4"}},
	}, {
		name: "ClusterIP: an address gets a host name",
		evs:  []event{sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.1", "w-1"), epAt("10.0.0.3", ""), epAt("10.0.0.4", "")))},
		ptrs: map[string]string{"10.0.0.1": "w-1" + web},
		hosts: map[string][]string{"10-0-0-1" + web: nil, "w-1" + web: {"w-1" + web + " A 10.0.0.1"},
			"10-0-0-3" + web: {"10-0-0-3" + web + " A 10.0.0.3"}},
	}, {
		name:  "ClusterIP: a host name takes the _tcp empty non-terminal's name",
		evs:   []event{sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.1", "_tcp"), epAt("10.0.0.3", ""), epAt("10.0.0.4", "")))},
		names: []string{"-_tcp" + web},
		ptrs:  map[string]string{"10.0.0.1": "_tcp" + web},
		hosts: map[string][]string{"_tcp" + web: {"_tcp" + web + " A 10.0.0.1"}},
	}, {
		name:  "ClusterIP: and gives it back",
		evs:   []event{sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.1", ""), epAt("10.0.0.3", ""), epAt("10.0.0.4", "")))},
		names: []string{"_tcp" + web},
		ptrs:  map[string]string{"10.0.0.1": "10-0-0-1" + web},
	}, {
		name: "headless: an endpoint goes",
		evs:  []event{sliceEvent(lazySlice("db-1", "db", epAt("10.0.0.7", "db-0")))},
		del:  []string{"10.0.0.8@db"}, names: []string{"_http._tcp" + db, db[1:]}, // not the _tcp empty non-terminal
		ptrs:  map[string]string{"10.0.0.7": "db-0" + db + " web-0.web.ns.svc.cluster.local.", "10.0.0.8": "REFUSED"},
		hosts: map[string][]string{"db-0" + db: {"db-0" + db + " A 10.0.0.7"}, "db-1" + db: nil},
	}, {
		name: "an address two services share leaves one",
		evs:  []event{sliceEvent(lazySlice("web-2", "web"))},
		del:  []string{"10.0.0.7@web"},
		ptrs: map[string]string{"10.0.0.7": "db-0" + db},
	}, {
		name: "an address moves between services in one batch",
		evs: []event{sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.3", ""), epAt("10.0.0.4", ""))),
			sliceEvent(lazySlice("db-1", "db", epAt("10.0.0.7", "db-0"), epAt("10.0.0.1", "db-1")))},
		del: []string{"10.0.0.1@web"}, add: []string{"10.0.0.1@db"}, names: []string{"_http._tcp" + db, db[1:]},
		ptrs:  map[string]string{"10.0.0.1": "db-1" + db},
		hosts: map[string][]string{"10-0-0-1" + web: nil, "db-1" + db: {"db-1" + db + " A 10.0.0.1"}},
	}, {
		name: "headless: an update that changes no record",
		evs:  []event{sliceEvent(lazySlice("db-1", "db", epAt("10.0.0.7", "db-0"), epAt("10.0.0.1", "db-1")))},
		ptrs: map[string]string{"10.0.0.1": "db-1" + db},
	}, {
		name: "headless: a slice of another port comes",
		evs:  []event{sliceEvent(metricsSlice(epAt("10.0.0.9", "db-2")))},
		add:  []string{"10.0.0.9@db"}, names: []string{"_metrics._tcp" + db, db[1:]}, // not _http._tcp
		ptrs:  map[string]string{"10.0.0.9": "db-2" + db},
		hosts: map[string][]string{"db-2" + db: {"db-2" + db + " A 10.0.0.9"}},
	}, {
		name: "headless: and its endpoint changes",
		evs:  []event{sliceEvent(metricsSlice(epAt("10.0.0.10", "db-2")))},
		del:  []string{"10.0.0.9@db"}, add: []string{"10.0.0.10@db"}, names: []string{"_metrics._tcp" + db, db[1:]},
		ptrs:  map[string]string{"10.0.0.9": "REFUSED", "10.0.0.10": "db-2" + db},
		hosts: map[string][]string{"db-2" + db: {"db-2" + db + " A 10.0.0.10"}},
	}, {
		name:  "a service goes",
		evs:   []event{{kind: objService, key: "ns/web"}},
		del:   []string{"10.0.0.3@web", "10.0.0.4@web", "10.96.0.1@web"},
		names: []string{"-_http._tcp" + web, "-_tcp" + web, "-" + web[1:]},
		ptrs:  map[string]string{"10.0.0.3": "REFUSED", "10.96.0.1": "REFUSED", "10.0.0.1": "db-1" + db},
	}}
	initial := []event{{kind: objNamespace, key: "ns", obj: nsPresent{}},
		{kind: objService, key: "ns/web", obj: lazySvc("web", "10.96.0.1")}, {kind: objService, key: "ns/db", obj: lazySvc("db")},
		sliceEvent(lazySlice("web-1", "web", epAt("10.0.0.1", ""), epAt("10.0.0.2", ""), epAt("10.0.0.3", ""))),
		sliceEvent(lazySlice("web-2", "web", epAt("10.0.0.7", "web-0"))),
		sliceEvent(lazySlice("db-1", "db", epAt("10.0.0.7", "db-0"), epAt("10.0.0.8", "db-1")))}
	z := buildZone(t, initial)
	objects := map[string]event{} // the current objects, by kind and key
	for _, ev := range initial {
		objects[fmt.Sprint(ev.kind, ev.key)] = ev
	}
	for _, step := range steps {
		b := applyBatch(z, step.evs...)
		if got := slotsText(b.ptrDel); !slices.Equal(got, step.del) {
			t.Errorf("%s: PTR slots removed: got %v, want %v", step.name, got, step.del)
		}
		if got := slotsText(b.ptrAdd); !slices.Equal(got, step.add) {
			t.Errorf("%s: PTR slots added: got %v, want %v", step.name, got, step.add)
		}
		if got := changesText(b); !slices.Equal(got, step.names) {
			t.Errorf("%s: names re-published: got %q, want %q", step.name, got, step.names)
		}
		for ip, want := range step.ptrs {
			if got := ptrs(t, z, ip); got != want {
				t.Errorf("%s: PTR %s: got %q, want %q", step.name, ip, got, want)
			}
		}
		for name, want := range step.hosts {
			rcode := ok
			if want == nil {
				rcode = nx
			}
			checkAnswer(t, step.name+": "+name, z.Lookup(name, dns.TypeA), rcode, want, want == nil, "")
		}
		for _, ev := range step.evs {
			if ev.obj == nil {
				delete(objects, fmt.Sprint(ev.kind, ev.key))
			} else {
				objects[fmt.Sprint(ev.kind, ev.key)] = ev
			}
		}
		fresh, _ := newZone(t, Config{})
		for _, ev := range objects {
			fresh.enqueue(ev)
		}
		fresh.drain()
		fresh.synced.Store(true) // as z is
		if got, want := zoneDump(z), zoneDump(fresh); got != want {
			t.Errorf("%s: updated zone differs from a fresh build\n got: %s\nwant: %s", step.name, got, want)
		}
	}
}

// TestEntryCounts: the endpoint and host name counts of an entry, taken
// without building names, are the number of distinct addresses and of
// distinct host owner names (hostOwner, which answers them), over random
// services mixing hostnames, dashed forms of other endpoints' addresses,
// non-canonical and too long hostnames, IPv6 and repeated addresses.
func TestEntryCounts(t *testing.T) {
	z, _ := newZone(t, Config{})
	addrs := []string{"10.0.0.1", "10.0.0.2", "10.0.0.10", "fd00::1", "fd00::2", "fd00:0:0:1::"}
	hosts := []string{"", "", "a", "b", "10-0-0-2", "10-0-0-02", "fd00--1", "fd00-0-0-1--0", "fd00-0-0-1--", strings.Repeat("h", 64)}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		var sls []*sliceModel
		for s := range 1 + rng.IntN(3) {
			var eps []epModel
			for range rng.IntN(6) {
				eps = append(eps, epAt(addrs[rng.IntN(len(addrs))], hosts[rng.IntN(len(hosts))]))
			}
			sls = append(sls, lazySlice(fmt.Sprint("s-", s), "web", eps...))
		}
		e, _ := z.newEntry(lazySvc("web", "10.96.0.1"), "web.ns.svc.cluster.local.", sls)
		owners, distinct := map[string]bool{}, map[netip.Addr]bool{}
		for _, es := range sls {
			for j := range es.Endpoints.len() {
				owners[e.hostOwner(es.Endpoints.at(j))] = true
				distinct[es.Endpoints.addr(j)] = true
			}
		}
		if int(e.hostNames) != len(owners) || int(e.endpoints) != len(distinct) {
			t.Fatalf("service %d: got %d host names and %d endpoints, want %d (%v) and %d", i, e.hostNames, e.endpoints,
				len(owners), owners, len(distinct))
		}
	}
}
