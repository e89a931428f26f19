package kubezone

import (
	"testing"
	"testing/synctest"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// wireName is name (lowercased FQDN) in wire form.
func wireName(tb testing.TB, name string) []byte {
	tb.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		tb.Fatalf("packing %q: %v", name, err)
	}
	return buf[:n]
}

// TestVersionScoped: an EndpointSlice update of one service changes the
// Version of that service's names and addresses, and of no other name;
// a new service changes the Version of its name, which was NXDOMAIN.
func TestVersionScoped(t *testing.T) {
	http := []discoveryv1.EndpointPort{slicePort("http", 80)}
	world := objs(namespace("ns"),
		service("ns", "web", []string{"10.96.0.1"}, svcPort("http", 80)),
		slice("ns", "web-1", "web", http, ep{addrs: []string{"10.0.0.1"}}),
		service("ns", "other", []string{"10.96.0.2"}, svcPort("http", 80)),
		slice("ns", "other-1", "other", http, ep{addrs: []string{"10.0.0.2"}}),
		service("ns", "hl", []string{"None"}, svcPort("http", 80)),
		slice("ns", "hl-1", "hl", http, ep{addrs: []string{"10.0.0.3"}, hostname: "h0"}))
	web := []string{"web.ns.svc.cluster.local.", "_http._tcp.web.ns.svc.cluster.local.",
		"1.0.96.10.in-addr.arpa.", "1.0.0.10.in-addr.arpa.", "9.0.0.10.in-addr.arpa."}
	others := []string{"other.ns.svc.cluster.local.", "_http._tcp.other.ns.svc.cluster.local.", "_tcp.other.ns.svc.cluster.local.",
		"2.0.96.10.in-addr.arpa.", "2.0.0.10.in-addr.arpa.", "hl.ns.svc.cluster.local.", "h0.hl.ns.svc.cluster.local.",
		"3.0.0.10.in-addr.arpa.", "ns.svc.cluster.local.", "nope.ns.svc.cluster.local.", "www.example.com.cluster.local.",
		"10-0-0-9.ns.pod.cluster.local.", "dns-version.cluster.local."}
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(world...)
		z, _ := newZone(t, Config{})
		z.scopes.seed = 1 // fixed, so that the scopes below are known not to share a counter
		runZone(t, z, client)
		webScopes := map[int]bool{}
		for _, name := range web {
			a, _ := z.scopeOf(wireName(t, name))
			webScopes[a] = true
		}
		for _, name := range others {
			if a, b := z.scopeOf(wireName(t, name)); webScopes[a] || webScopes[b] {
				t.Fatalf("%s shares a counter with a name of web with this seed: pick another", name)
			}
		}
		version := func(name string) uint64 { return z.Version(wireName(t, name)) }
		before := map[string]uint64{}
		for _, name := range append(append([]string{}, web...), others...) {
			before[name] = version(name)
		}
		apex := version("cluster.local.")

		es := slice("ns", "web-1", "web", http, ep{addrs: []string{"10.0.0.1"}}, ep{addrs: []string{"10.0.0.9"}})
		es.ResourceVersion = "2"
		if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(t.Context(), es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		for _, name := range web {
			if got := version(name); got == before[name] {
				t.Errorf("%s: Version %d unchanged by its service's update, want changed", name, got)
			}
		}
		for _, name := range others {
			if got := version(name); got != before[name] {
				t.Errorf("%s: Version went from %d to %d on another service's update, want unchanged", name, before[name], got)
			}
		}
		if got := version("cluster.local."); got == apex {
			t.Errorf("apex: Version %d unchanged, want changed (its SOA serial follows every change)", got)
		}
		checkAnswer(t, "new endpoint's PTR", z.Lookup("9.0.0.10.in-addr.arpa.", dns.TypePTR), ok,
			[]string{"9.0.0.10.in-addr.arpa. PTR 10-0-0-9.web.ns.svc.cluster.local."}, false, "")

		nope := version("nope.ns.svc.cluster.local.")
		if _, err := client.CoreV1().Services("ns").Create(t.Context(), service("ns", "nope", []string{"10.96.0.3"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		settle()
		if got := version("nope.ns.svc.cluster.local."); got == nope {
			t.Errorf("nope.ns.svc.cluster.local.: Version %d unchanged by the service's creation, want changed", got)
		}
		if got := version("other.ns.svc.cluster.local."); got != before["other.ns.svc.cluster.local."] {
			t.Errorf("other.ns.svc.cluster.local.: Version changed on another service's creation")
		}
	})
}

// TestScopeOf: the scope of each kind of name, from its wire form.
func TestScopeOf(t *testing.T) {
	z, _ := newZone(t, Config{})
	s := z.scopes
	v6, _ := parseReverse("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.")
	v4 := netipKey(t, "10.0.0.1")
	for _, tc := range []struct {
		name string
		a, b int
	}{
		{"cluster.local.", allScope, noScope},
		{"dns-version.cluster.local.", noScope, noScope},
		{"svc.cluster.local.", noScope, noScope},
		{"www.example.com.cluster.local.", noScope, noScope},
		{"ns.svc.cluster.local.", s.namespace("ns"), noScope},
		{"ns.pod.cluster.local.", s.namespace("ns"), noScope},
		{"web.ns.svc.cluster.local.", s.service("ns", "web"), noScope},
		{"_http._tcp.web.ns.svc.cluster.local.", s.service("ns", "web"), noScope},
		{"a.b.c.web.ns.svc.cluster.local.", noScope, noScope}, // no object makes it
		{"www.google.com.ns.svc.cluster.local.", s.service("ns", "com"), noScope},
		{"10-0-0-1.ns.pod.cluster.local.", s.pod("ns", "10-0-0-1"), s.namespace("ns")},
		{"1.0.0.10.in-addr.arpa.", s.addr(&v4), noScope},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", s.addr(&v6), noScope},
		{"01.0.0.10.in-addr.arpa.", allScope, noScope}, // not canonical: never the zone's
		{"example.org.", allScope, noScope},
	} {
		a, b := z.scopeOf(wireName(t, tc.name))
		if a != tc.a || b != tc.b {
			t.Errorf("%s: got scopes (%d, %d), want (%d, %d)", tc.name, a, b, tc.a, tc.b)
		}
	}
	// A label holding a dot reads as two labels to the string lookups.
	a, _ := z.scopeOf([]byte("\x07web.foo\x02ns\x03svc\x07cluster\x05local\x00"))
	if a != allScope {
		t.Errorf("label with a dot: got scope %d, want allScope", a)
	}
}

func netipKey(tb testing.TB, s string) addrKey {
	tb.Helper()
	return mustAddr(tb, s).As16()
}

// BenchmarkVersion is what the server's memo pays per zone answer to check
// that a memoized answer still holds.
func BenchmarkVersion(b *testing.B) {
	z := buildZone(b, synthCluster(1000, 10))
	for _, name := range []string{"svc-7.ns-7.svc.cluster.local.", "_http._tcp.svc-7.ns-7.svc.cluster.local.",
		"7.0.16.172.in-addr.arpa."} {
		w := wireName(b, name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				z.Version(w)
			}
		})
	}
}
