package kubezone

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// zoneWith runs a zone on a fake clientset seeded with objects, in a
// synctest bubble (so it takes a *testing.T).
func zoneWith(t *testing.T, cfg Config, objects []runtime.Object, f func(t *testing.T, z *Zone, c *fake.Clientset)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(objects...)
		z, _ := newZone(t, cfg)
		runZone(t, z, client)
		if !z.Synced() {
			t.Fatal("zone not synced")
		}
		f(t, z, client)
	})
}

func TestEndpointEdgeCases(t *testing.T) {
	const hl = "hl.ns.svc.cluster.local."
	long := strings.Repeat("a", 64)
	pg := []discoveryv1.EndpointPort{slicePort("pg", 5432)}
	world := objs(namespace("ns"),
		service("ns", "hl", []string{"None"}, svcPort("pg", 5432)),
		// The same endpoint in two slices (an EndpointSlice controller hand-over).
		slice("ns", "hl-a", "hl", pg, ep{addrs: []string{"10.0.0.1"}, hostname: "h1"}, ep{addrs: []string{"10.0.0.2"}}),
		slice("ns", "hl-b", "hl", pg, ep{addrs: []string{"10.0.0.1"}, hostname: "h1"},
			ep{addrs: []string{"10.0.0.3"}, ready: ptrTo(false)}),
		// Endpoints without ports.
		service("ns", "noports", []string{"None"}),
		slice("ns", "noports-a", "noports", nil, ep{addrs: []string{"10.0.1.1"}}),
		// A hostname longer than 63 bytes falls back to the dashed IP; a
		// long IPv6 dashed form is a valid label.
		service("ns", "long", []string{"None"}, svcPort("pg", 5432)),
		slice("ns", "long-a", "long", pg, ep{addrs: []string{"10.0.2.1"}, hostname: long},
			ep{addrs: []string{"fd00:1234:5678:9abc:def0:1234:5678:9abc"}}),
		// Two endpoints with the same hostname.
		service("ns", "coll", []string{"None"}, svcPort("pg", 5432)),
		slice("ns", "coll-a", "coll", pg, ep{addrs: []string{"10.0.3.1"}, hostname: "x"},
			ep{addrs: []string{"10.0.3.2"}, hostname: "x"}, ep{addrs: []string{"10.0.3.3"}, hostname: "y"}),
		// One IP behind two services.
		service("ns", "b-svc", []string{"10.96.1.2"}),
		service("ns", "a-svc", []string{"10.96.1.1"}),
		slice("ns", "a-svc-1", "a-svc", nil, ep{addrs: []string{"10.0.4.1"}}),
		slice("ns", "b-svc-1", "b-svc", nil, ep{addrs: []string{"10.0.4.1"}}),
		// ExternalName loop inside the zone.
		service("ns", "loop1", []string{"loop2.ns.svc.cluster.local."}),
		service("ns", "loop2", []string{"LOOP1.ns.svc.cluster.local."}),
	)
	cases := []lookupCase{
		{row: "duplicate endpoints across slices: A deduplicated", qname: hl, qtype: dns.TypeA, rcode: ok,
			answer: []string{hl + " A 10.0.0.1", hl + " A 10.0.0.2"}},
		{row: "duplicate endpoints: SRV deduplicated, weight floor(100/2)", qname: "_pg._tcp." + hl, qtype: dns.TypeSRV, rcode: ok,
			answer: []string{"_pg._tcp." + hl + " SRV 0 50 5432 10-0-0-2." + hl, "_pg._tcp." + hl + " SRV 0 50 5432 h1." + hl},
			extra:  []string{"10-0-0-2." + hl + " A 10.0.0.2", "h1." + hl + " A 10.0.0.1"}},
		{row: "duplicate endpoints: one PTR", qname: "1.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok,
			answer: []string{"1.0.0.10.in-addr.arpa. PTR h1." + hl}},
		{row: "not-ready endpoint: no A", qname: "10-0-0-3." + hl, qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "not-ready endpoint: no PTR, the name is not ours", qname: "3.0.0.10.in-addr.arpa.", qtype: dns.TypePTR,
			rcode: dns.RcodeRefused},
		{row: "endpoints without ports: A", qname: "noports.ns.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"noports.ns.svc.cluster.local. A 10.0.1.1"}},
		{row: "endpoints without ports: SRV NODATA", qname: "noports.ns.svc.cluster.local.", qtype: dns.TypeSRV, rcode: ok, soa: true},
		{row: "hostname > 63 bytes: dashed IP instead", qname: "10-0-2-1.long.ns.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"10-0-2-1.long.ns.svc.cluster.local. A 10.0.2.1"}},
		{row: "hostname > 63 bytes: no such name", qname: long + ".long.ns.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "long dashed v6 label", qname: "fd00-1234-5678-9abc-def0-1234-5678-9abc.long.ns.svc.cluster.local.", qtype: dns.TypeAAAA,
			rcode: ok, answer: []string{"fd00-1234-5678-9abc-def0-1234-5678-9abc.long.ns.svc.cluster.local. AAAA fd00:1234:5678:9abc:def0:1234:5678:9abc"}},
		{row: "hostname collision: both addresses", qname: "x.coll.ns.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"x.coll.ns.svc.cluster.local. A 10.0.3.1", "x.coll.ns.svc.cluster.local. A 10.0.3.2"}},
		{row: "hostname collision: one SRV per target", qname: "_pg._tcp.coll.ns.svc.cluster.local.", qtype: dns.TypeSRV, rcode: ok,
			answer: []string{"_pg._tcp.coll.ns.svc.cluster.local. SRV 0 50 5432 x.coll.ns.svc.cluster.local.",
				"_pg._tcp.coll.ns.svc.cluster.local. SRV 0 50 5432 y.coll.ns.svc.cluster.local."}},
		{row: "PTR of an IP behind two services, stable order", qname: "1.4.0.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok,
			answer: []string{"1.4.0.10.in-addr.arpa. PTR 10-0-4-1.a-svc.ns.svc.cluster.local.",
				"1.4.0.10.in-addr.arpa. PTR 10-0-4-1.b-svc.ns.svc.cluster.local."}},
	}
	zoneWith(t, Config{}, world, func(t *testing.T, z *Zone, _ *fake.Clientset) {
		runCases(t, z, cases)
		ptr := z.Lookup("1.4.0.10.in-addr.arpa.", dns.TypePTR)
		if len(ptr.Answer) == 2 && ptr.Answer[0].(*dns.PTR).Ptr > ptr.Answer[1].(*dns.PTR).Ptr {
			t.Errorf("PTR order: got %v, want sorted by target", rrText(ptr.Answer))
		}
		loop := z.Lookup("loop1.ns.svc.cluster.local.", dns.TypeA)
		if len(loop.Answer) != maxChain || loop.Rcode != ok || loop.Chase != "" {
			t.Errorf("CNAME loop: got %d records rcode %d chase %q, want %d CNAMEs, NOERROR, no chase",
				len(loop.Answer), loop.Rcode, loop.Chase, maxChain)
		}
	})
}

func TestSRVWeights(t *testing.T) {
	for _, c := range []struct {
		endpoints int
		want      uint16
	}{{1, 100}, {2, 50}, {3, 33}, {7, 14}, {101, 0}} {
		var eps []ep
		for i := range c.endpoints {
			eps = append(eps, ep{addrs: []string{"10.1." + itoa(i/250) + "." + itoa(i%250+1)}})
		}
		world := objs(service("ns", "s", []string{"None"}, svcPort("p", 1)),
			slice("ns", "s-1", "s", []discoveryv1.EndpointPort{slicePort("p", 1)}, eps...))
		zoneWith(t, Config{}, world, func(t *testing.T, z *Zone, _ *fake.Clientset) {
			got := z.Lookup("_p._tcp.s.ns.svc.cluster.local.", dns.TypeSRV)
			if len(got.Answer) != c.endpoints {
				t.Fatalf("%d endpoints: got %d SRV, want %d", c.endpoints, len(got.Answer), c.endpoints)
			}
			for _, rr := range got.Answer {
				if w := rr.(*dns.SRV).Weight; w != c.want {
					t.Errorf("%d endpoints: weight: got %d, want %d", c.endpoints, w, c.want)
				}
			}
		})
	}
}

func TestPodModes(t *testing.T) {
	world := objs(namespace("demo"), pod("demo", "p1", "node-a", "10.244.1.5", "fd00::5"),
		pod("other", "p2", "node-b", "10.244.2.5"))
	cases := map[PodsMode][]lookupCase{
		PodsVerified: {
			{row: "verified: existing pod", qname: "10-244-1-5.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: ok,
				answer: []string{"10-244-1-5.demo.pod.cluster.local. A 10.244.1.5"}},
			{row: "verified: existing pod v6", qname: "fd00--5.demo.pod.cluster.local.", qtype: dns.TypeAAAA, rcode: ok,
				answer: []string{"fd00--5.demo.pod.cluster.local. AAAA fd00::5"}},
			{row: "verified: AAAA on v4 pod", qname: "10-244-1-5.demo.pod.cluster.local.", qtype: dns.TypeAAAA, rcode: ok, soa: true},
			{row: "verified: IP of no pod", qname: "10-244-1-6.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
			{row: "verified: pod of another namespace", qname: "10-244-2-5.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
			{row: "verified: pod in its namespace (no Namespace object)", qname: "10-244-2-5.other.pod.cluster.local.",
				qtype: dns.TypeA, rcode: ok, answer: []string{"10-244-2-5.other.pod.cluster.local. A 10.244.2.5"}},
		},
		PodsDisabled: {
			{row: "disabled: pod name", qname: "10-244-1-5.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
			{row: "disabled: namespace under pod", qname: "demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
			{row: "disabled: pod.<zone> stays", qname: "pod.cluster.local.", qtype: dns.TypeA, rcode: ok, soa: true},
		},
		PodsInsecure: {
			{row: "insecure: any IP", qname: "10-9-9-9.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: ok,
				answer: []string{"10-9-9-9.demo.pod.cluster.local. A 10.9.9.9"}},
			{row: "insecure: namespace must exist", qname: "10-9-9-9.other.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		},
	}
	for mode, cs := range cases {
		t.Run(string(mode), func(t *testing.T) {
			zoneWith(t, Config{Pods: mode, NodeName: "node-a"}, world, func(t *testing.T, z *Zone, _ *fake.Clientset) {
				runCases(t, z, cs)
			})
		})
	}
}

func TestPodByIP(t *testing.T) {
	host := pod("kube-system", "proxy", "node-a", "192.168.0.5")
	host.Spec.HostNetwork = true
	host2 := pod("kube-system", "agent", "node-a", "192.168.0.5")
	host2.Spec.HostNetwork = true
	custom := pod("demo", "custom", "node-a", "10.244.1.6")
	custom.Spec.DNSConfig = &corev1.PodDNSConfig{Searches: []string{"example.com"}}
	world := objs(pod("demo", "p1", "node-a", "10.244.1.5", "fd00::5"), pod("demo", "p2", "node-b", "10.244.2.5"), host, host2,
		custom)
	for _, mode := range []PodsMode{PodsInsecure, PodsVerified} {
		zoneWith(t, Config{Pods: mode, NodeName: "node-a"}, world, func(t *testing.T, z *Zone, _ *fake.Clientset) {
			cases := []struct {
				ip   string
				want PodInfo
				ok   bool
			}{
				{"10.244.1.5", PodInfo{Namespace: "demo", Name: "p1", Phase: "Running", DNSPolicy: "ClusterFirst"}, true},
				{"fd00::5", PodInfo{Namespace: "demo", Name: "p1", Phase: "Running", DNSPolicy: "ClusterFirst"}, true},
				{"::ffff:10.244.1.5", PodInfo{Namespace: "demo", Name: "p1", Phase: "Running", DNSPolicy: "ClusterFirst"}, true},
				{"10.244.2.5", PodInfo{}, false}, // other node
				{"10.244.1.6", PodInfo{Namespace: "demo", Name: "custom", Phase: "Running", DNSPolicy: "ClusterFirst",
					CustomDNS: true}, true},
				{"192.168.0.5", PodInfo{Namespace: "kube-system", Name: "agent", Phase: "Running", DNSPolicy: "ClusterFirst",
					HostNetwork: true, Shared: true}, true},
			}
			for _, c := range cases {
				got, found := z.PodByIP(mustAddr(t, c.ip))
				if found != c.ok || got != c.want {
					t.Errorf("%s PodByIP(%s): got %+v %v, want %+v %v", mode, c.ip, got, found, c.want, c.ok)
				}
			}
			if p, _ := z.PodByIP(mustAddr(t, "192.168.0.5")); !p.DefaultDNS() {
				t.Errorf("host-network ClusterFirst pod: DefaultDNS got false, want true")
			}
		})
	}
}
