//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// agentRig is one node netns running the agent, one pod netns linked to it
// and the test upstream inside the node netns.
type agentRig struct {
	node  *netNS
	pod   *pod
	up    *dnsUpstream
	agent *runningAgent
}

func newAgentRig(t testing.TB, o agentOpts) *agentRig {
	t.Helper()
	r := &agentRig{node: newNetNS(t, "node")}
	r.pod = addPod(t, r.node, o.localIPs()...)
	r.up = startUpstream(t, r.node, "127.0.0.1")
	r.agent = startAgent(t, r.node, r.up, o)
	return r
}

// ask queries the agent from the pod netns, at linkLocalIP unless q names
// a server.
func (r *agentRig) ask(t testing.TB, q query) answer {
	t.Helper()
	if q.Server == "" {
		q.Server = linkLocalIP
	}
	return mustQuery(t, r.pod.NS, q)
}

// await repeats q from the pod until ok holds and returns the time since
// since; it fails the test after 30s with the last answer.
func (r *agentRig) await(t testing.TB, q query, since time.Time, ok func(answer) bool) time.Duration {
	t.Helper()
	if q.Server == "" {
		q.Server = linkLocalIP
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := runQuery(t.Context(), r.pod.NS, q)
		if err == nil && ok(a) {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s (tcp=%v): last answer %v, error %v; the wanted answer never came", q.Name, q.Type, q.TCP, a, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func hasData(t uint16, want ...string) func(answer) bool {
	slices.Sort(want)
	return func(a answer) bool { return a.Rcode == "NOERROR" && slices.Equal(a.Data(t), want) }
}

// equalSorted compares two string lists as sets with multiplicity.
func equalSorted(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func hasRcode(rcode string) func(answer) bool {
	return func(a answer) bool { return a.Rcode == rcode }
}

// TestServiceLifecycle creates a dual-stack Service through the API, waits
// for the agent to answer it over UDP and TCP from a pod through the
// link-local IP, deletes it and waits for NXDOMAIN, logging the time from
// each API write to the changed answer.
func TestServiceLifecycle(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{})
	ns := newNamespace(t, "svc")
	r.pod.NS.writeResolvConf(t, linkLocalIP, ns, clusterDomain)
	for _, tc := range []struct {
		proto string
		tcp   bool
	}{{"udp", false}, {"tcp", true}} {
		t.Run(tc.proto, func(t *testing.T) {
			name := "web-" + tc.proto
			fqdn := name + "." + ns + ".svc." + clusterDomain + "."
			if a := r.ask(t, query{Name: fqdn, TCP: tc.tcp}); a.Rcode != "NXDOMAIN" {
				t.Fatalf("%s before creation: got %v, want NXDOMAIN", fqdn, a)
			}
			start := time.Now()
			svc := createService(t, serviceSpec(ns, name, corev1.ServiceTypeClusterIP, true))
			d := r.await(t, query{Name: fqdn, TCP: tc.tcp}, start, hasData(dns.TypeA, svc.Spec.ClusterIPs[0]))
			t.Logf("%s: API create → A answer over %s: %v", fqdn, tc.proto, d.Round(time.Millisecond))

			a := r.ask(t, query{Name: fqdn, Type: "AAAA", TCP: tc.tcp})
			if got, want := a.Data(dns.TypeAAAA), svc.Spec.ClusterIPs[1:]; a.Rcode != "NOERROR" || !slices.Equal(got, want) {
				t.Errorf("%s AAAA: got %v, want NOERROR %v", fqdn, a, want)
			}
			if !slices.Contains(a.Flags, "aa") {
				t.Errorf("%s AAAA flags: got %v, want aa among them", fqdn, a.Flags)
			}
			k := r.ask(t, query{Tool: "kdig", Name: fqdn, TCP: tc.tcp})
			if got := k.Data(dns.TypeA); k.Rcode != "NOERROR" || !slices.Equal(got, svc.Spec.ClusterIPs[:1]) {
				t.Errorf("kdig %s: got %v, want NOERROR %v", fqdn, k, svc.Spec.ClusterIPs[:1])
			}
			if !tc.tcp {
				// glibc with the kubelet's resolv.conf: the short name
				// expands through the search path.
				got, err := getentAhosts(t.Context(), r.pod.NS, name)
				want := slices.Sorted(slices.Values(svc.Spec.ClusterIPs))
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("getent ahosts %s: got %v (err %v), want %v", name, got, err, want)
				}
			}

			start = time.Now()
			deleteService(t, ns, name)
			d = r.await(t, query{Name: fqdn, TCP: tc.tcp}, start, hasRcode("NXDOMAIN"))
			t.Logf("%s: API delete → NXDOMAIN over %s: %v", fqdn, tc.proto, d.Round(time.Millisecond))
		})
	}
}

// TestForwardAndCache resolves names outside the cluster zone through the
// agent: answers come from the upstream once and then from the cache.
func TestForwardAndCache(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{})
	cases := []struct {
		name, qname, qtype string
		tcp                bool
		wantRcode          string
		wantData           []string
	}{
		{"udp A", "www.example.com.", "A", false, "NOERROR", []string{"192.0.2.10"}},
		{"tcp AAAA", "www.example.com.", "AAAA", true, "NOERROR", []string{"2001:db8::10"}},
		{"udp TXT", "txt.example.com.", "TXT", false, "NOERROR", []string{`"nodecache e2e"`}},
		{"udp NXDOMAIN", "nope.example.com.", "A", false, "NXDOMAIN", nil},
		{"tcp NODATA", "www.example.com.", "MX", true, "NOERROR", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := query{Name: c.qname, Type: c.qtype, TCP: c.tcp}
			before := r.up.Queries.Load()
			a := r.ask(t, q)
			qt := dnsType(t, c.qtype)
			if a.Rcode != c.wantRcode || !slices.Equal(a.Data(qt), c.wantData) {
				t.Fatalf("first %s %s: got %v, want %s %v", c.qname, c.qtype, a, c.wantRcode, c.wantData)
			}
			if got := r.up.Queries.Load() - before; got != 1 {
				t.Errorf("upstream queries for the first ask: got %d, want 1", got)
			}
			a = r.ask(t, q)
			if a.Rcode != c.wantRcode || !slices.Equal(a.Data(qt), c.wantData) {
				t.Errorf("second %s %s: got %v, want %s %v", c.qname, c.qtype, a, c.wantRcode, c.wantData)
			}
			if got := r.up.Queries.Load() - before; got != 1 {
				t.Errorf("upstream queries after a repeat: got %d, want 1 (the repeat is a cache hit)", got)
			}
		})
	}
}

// TestInterceptKubeDNSIP runs the agent on the link-local IP and on the
// kube-dns ClusterIP too, as NodeLocal DNSCache does to catch pods that still
// point at kube-dns: both addresses answer over UDP and TCP, and a pod whose
// resolv.conf names the ClusterIP resolves through the agent.
func TestInterceptKubeDNSIP(t *testing.T) {
	requireSuite(t)
	const kubeDNS = "10.96.0.10"
	r := newAgentRig(t, agentOpts{ExtraLocalIPs: []string{kubeDNS}})
	ns := newNamespace(t, "icpt")
	r.pod.NS.writeResolvConf(t, kubeDNS, ns, clusterDomain)
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, false))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."
	r.await(t, query{Name: fqdn}, time.Now(), hasData(dns.TypeA, svc.Spec.ClusterIP))
	for _, server := range []string{linkLocalIP, kubeDNS} {
		for _, tcp := range []bool{false, true} {
			a := r.ask(t, query{Server: server, Name: fqdn, TCP: tcp})
			if got := a.Data(dns.TypeA); a.Rcode != "NOERROR" || !slices.Equal(got, []string{svc.Spec.ClusterIP}) {
				t.Errorf("%s at %s (tcp=%v): got %v, want NOERROR [%s]", fqdn, server, tcp, a, svc.Spec.ClusterIP)
			}
			a = r.ask(t, query{Server: server, Name: "www.example.com.", TCP: tcp})
			if got := a.Data(dns.TypeA); a.Rcode != "NOERROR" || !slices.Equal(got, []string{"192.0.2.10"}) {
				t.Errorf("www.example.com. at %s (tcp=%v): got %v, want NOERROR [192.0.2.10]", server, tcp, a)
			}
		}
	}
	got, err := getentAhosts(t.Context(), r.pod.NS, "web")
	if err != nil || !slices.Equal(got, []string{svc.Spec.ClusterIP}) {
		t.Errorf("getent ahosts web with nameserver %s: got %v (err %v), want [%s]", kubeDNS, got, err, svc.Spec.ClusterIP)
	}
}
