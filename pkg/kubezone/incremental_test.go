package kubezone

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestIncrementalMatchesRebuild: after every step of a sequence of service
// and slice changes (ports renamed and dropped, headless and back, slices
// emptied and removed, services deleted and renamed to invalid names),
// the zone updated event by event holds exactly the names, records, PTR
// owners and counts of a zone built at once from the same objects.
func TestIncrementalMatchesRebuild(t *testing.T) {
	z, _ := newZone(t, Config{})
	objects := map[string]event{} // the current objects, by kind and key
	set := func(ev event) {
		k := fmt.Sprint(ev.kind, ev.key)
		if ev.obj == nil {
			delete(objects, k)
		} else {
			objects[k] = ev
		}
		z.enqueue(ev)
	}
	svc := func(name string, headless bool, ports ...portModel) event {
		s := &svcModel{Namespace: "ns", Name: name, Ports: ports, Headless: headless}
		if !headless {
			s.ClusterIPs = []netip.Addr{netip.MustParseAddr("10.96.0.1")}
		}
		return event{kind: objService, key: s.key(), obj: s}
	}
	sl := func(name, svcName string, ports []portModel, eps ...epModel) event {
		s := &sliceModel{Namespace: "ns", Name: name, Service: svcName, Ports: ports, Endpoints: newEPList(eps)}
		return event{kind: objSlice, key: s.key(), obj: s}
	}
	gone := func(ev event) event { ev.obj = nil; return ev }
	http, grpc := portModel{Name: "http", Protocol: "tcp", Port: 80}, portModel{Name: "grpc", Protocol: "tcp", Port: 9000}
	dnsUDP := portModel{Name: "dns", Protocol: "udp", Port: 53}
	a, b := epAt("10.0.0.1", "a"), epAt("10.0.0.2", "")
	tcpHost := epAt("10.0.0.3", "_tcp") // a host name that is also the _tcp ENT's label
	steps := []struct {
		name string
		evs  []event
	}{
		{"create", []event{{kind: objNamespace, key: "ns", obj: nsPresent{}}, svc("web", false, http, grpc),
			sl("web-1", "web", []portModel{http, grpc}, a, b), svc("db", true, dnsUDP), sl("db-1", "db", []portModel{dnsUDP}, a)}},
		{"port renamed", []event{svc("web", false, grpc, dnsUDP)}},
		{"slice port renamed", []event{sl("db-1", "db", []portModel{http}, a, b)}},
		{"headless", []event{svc("web", true, grpc)}},
		{"host named _tcp", []event{sl("web-1", "web", []portModel{grpc}, tcpHost, a)}},
		{"no endpoints", []event{sl("web-1", "web", []portModel{grpc})}},
		{"clusterIP again", []event{svc("web", false)}},
		{"second slice", []event{sl("web-2", "web", []portModel{http}, b)}},
		{"slice moves to another service", []event{sl("web-2", "db", []portModel{http}, b, tcpHost)}},
		{"and back", []event{sl("web-2", "web", []portModel{http}, b)}},
		{"slice removed", []event{gone(sl("web-1", "web", nil))}},
		{"invalid name", []event{gone(svc("db", true)), svc(strings.Repeat("x", 64), false, http)}},
		{"service removed", []event{gone(svc("web", false))}},
	}
	for _, step := range steps {
		for _, ev := range step.evs {
			set(ev)
		}
		z.drain()
		fresh, _ := newZone(t, Config{})
		for _, ev := range objects {
			fresh.enqueue(ev)
		}
		fresh.drain()
		if got, want := zoneDump(z), zoneDump(fresh); got != want {
			t.Errorf("%s: updated zone differs from a fresh build\n got: %s\nwant: %s", step.name, got, want)
		}
	}
}

// zoneDump is every name of z with its records, every PTR address with its
// owners' base names, and the counts, as sorted text.
func zoneDump(z *Zone) string {
	var lines []string
	z.tab.each(func(name string, n *node) {
		var rrs []string
		for _, rr := range n.rrs {
			rrs = append(rrs, strings.ReplaceAll(rr.String(), "\t", " "))
		}
		lines = append(lines, fmt.Sprintf("%s kind=%d ans=%d %v svc=%v", name, n.kind, n.nAns, rrs, n.svc != nil))
	})
	z.ptrs.each(func(k addrKey, owners []*svcRef) {
		var bases []string
		for _, o := range owners {
			bases = append(bases, o.entry().base)
		}
		slices.Sort(bases)
		lines = append(lines, fmt.Sprintf("ptr %s %v", keyAddr(k), bases))
	})
	slices.Sort(lines)
	st := z.Stats()
	lines = append(lines, fmt.Sprintf("endpoints=%d names=%d services=%d slices=%d", st.Endpoints, st.Names,
		st.Services, st.EndpointSlices))
	if a := z.Lookup("_tcp.web.ns.svc.cluster.local.", dns.TypeA); a.Rcode != dns.RcodeSuccess || len(a.Answer) > 0 {
		lines = append(lines, fmt.Sprintf("_tcp.web A: rcode %d, %d records", a.Rcode, len(a.Answer)))
	}
	return strings.Join(lines, "\n")
}
