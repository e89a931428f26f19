//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// zoneCase is one question to the agent and the answer the cluster zone
// contract (docs/dns-behaviour.md) asks for.
type zoneCase struct {
	qname, qtype string
	rcode        string
	check        uint16   // the record type whose data is compared; 0 = the qtype
	want         []string // rdata of the answer records of type check; nil = none
}

// TestClusterZone creates Services of every kind, EndpointSlices and Pods
// through the API and checks the agent's answers against the zone contract.
func TestClusterZone(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{NodeName: "node-1"})
	ns := newNamespace(t, "zone")
	sfx := "." + ns + ".svc." + clusterDomain + "."
	httpPort := svcPort("http", corev1.ProtocolTCP, 80)
	dnsPort := svcPort("dns", corev1.ProtocolUDP, 53)

	start := time.Now()
	cip := createService(t, serviceSpec(ns, "cip", corev1.ServiceTypeClusterIP, false, httpPort, dnsPort))
	dual := createService(t, serviceSpec(ns, "dual", corev1.ServiceTypeClusterIP, true))
	np := createService(t, serviceSpec(ns, "np", corev1.ServiceTypeNodePort, false))
	lb := createService(t, serviceSpec(ns, "lb", corev1.ServiceTypeLoadBalancer, true))
	createService(t, headlessSpec(ns, "hl", httpPort))
	createEndpointSlice(t, ns, "hl", discoveryv1.AddressTypeIPv4, []endpoint{
		{IP: "10.244.1.5", Hostname: "web-0", NodeName: "node-1"},
		{IP: "10.244.1.6", NodeName: "node-1"},
		{IP: "10.244.1.7", NotReady: true},
	}, httpPort)
	createEndpointSlice(t, ns, "hl", discoveryv1.AddressTypeIPv6, []endpoint{{IP: "fd00:10:244::5"}}, httpPort)
	createService(t, headlessSpec(ns, "empty"))
	createService(t, externalNameSpec(ns, "ext", "www.example.com"))
	createService(t, externalNameSpec(ns, "inzone", "cip."+ns+".svc."+clusterDomain))
	createPod(t, ns, "p1", "node-1", "host1", "sub", "10.244.1.20")
	createService(t, headlessSpec(ns, "sub"))
	createEndpointSlice(t, ns, "sub", discoveryv1.AddressTypeIPv4, []endpoint{{IP: "10.244.1.20", Hostname: "host1", NodeName: "node-1"}})
	// The last write is in the zone: everything before it is too.
	d := r.await(t, query{Name: "host1.sub" + sfx}, start, hasData(dns.TypeA, "10.244.1.20"))
	t.Logf("11 API writes → last one answered: %v", d.Round(time.Millisecond))

	ptr := func(ip string) string { s, _ := dns.ReverseAddr(ip); return s }
	cases := []zoneCase{
		{qname: "dns-version." + clusterDomain + ".", qtype: "TXT", rcode: "NOERROR", want: []string{`"1.1.0"`}},
		{qname: "cip" + sfx, qtype: "A", rcode: "NOERROR", want: cip.Spec.ClusterIPs},
		{qname: "CIP" + sfx, qtype: "A", rcode: "NOERROR", want: cip.Spec.ClusterIPs},
		{qname: "cip" + sfx, qtype: "AAAA", rcode: "NOERROR"},
		{qname: "cip" + sfx, qtype: "TXT", rcode: "NOERROR"},
		{qname: "_http._tcp.cip" + sfx, qtype: "SRV", rcode: "NOERROR", want: []string{"0 100 80 cip" + sfx}},
		{qname: "_dns._udp.cip" + sfx, qtype: "SRV", rcode: "NOERROR", want: []string{"0 100 53 cip" + sfx}},
		{qname: "_http._udp.cip" + sfx, qtype: "SRV", rcode: "NXDOMAIN"},
		{qname: ptr(cip.Spec.ClusterIP), qtype: "PTR", rcode: "NOERROR", want: []string{"cip" + sfx}},
		{qname: "dual" + sfx, qtype: "A", rcode: "NOERROR", want: dual.Spec.ClusterIPs[:1]},
		{qname: "dual" + sfx, qtype: "AAAA", rcode: "NOERROR", want: dual.Spec.ClusterIPs[1:]},
		{qname: ptr(dual.Spec.ClusterIPs[1]), qtype: "PTR", rcode: "NOERROR", want: []string{"dual" + sfx}},
		{qname: "np" + sfx, qtype: "A", rcode: "NOERROR", want: np.Spec.ClusterIPs},
		{qname: "lb" + sfx, qtype: "AAAA", rcode: "NOERROR", want: lb.Spec.ClusterIPs[1:]},
		{qname: "hl" + sfx, qtype: "A", rcode: "NOERROR", want: []string{"10.244.1.5", "10.244.1.6"}},
		{qname: "hl" + sfx, qtype: "AAAA", rcode: "NOERROR", want: []string{"fd00:10:244::5"}},
		{qname: "web-0.hl" + sfx, qtype: "A", rcode: "NOERROR", want: []string{"10.244.1.5"}},
		{qname: "10-244-1-6.hl" + sfx, qtype: "A", rcode: "NOERROR", want: []string{"10.244.1.6"}},
		{qname: "fd00-10-244--5.hl" + sfx, qtype: "AAAA", rcode: "NOERROR", want: []string{"fd00:10:244::5"}},
		{qname: "10-244-1-7.hl" + sfx, qtype: "A", rcode: "NXDOMAIN"},
		{qname: "_http._tcp.hl" + sfx, qtype: "SRV", rcode: "NOERROR", want: []string{
			"0 33 80 10-244-1-6.hl" + sfx, "0 33 80 fd00-10-244--5.hl" + sfx, "0 33 80 web-0.hl" + sfx}},
		{qname: ptr("10.244.1.5"), qtype: "PTR", rcode: "NOERROR", want: []string{"web-0.hl" + sfx}},
		{qname: "empty" + sfx, qtype: "A", rcode: "NXDOMAIN"},
		{qname: "ext" + sfx, qtype: "A", rcode: "NOERROR", check: dns.TypeCNAME, want: []string{"www.example.com."}},
		{qname: "ext" + sfx, qtype: "A", rcode: "NOERROR", want: []string{"192.0.2.10"}},
		{qname: "ext" + sfx, qtype: "SRV", rcode: "NOERROR"},
		{qname: "inzone" + sfx, qtype: "A", rcode: "NOERROR", check: dns.TypeCNAME, want: []string{"cip" + sfx}},
		{qname: "inzone" + sfx, qtype: "A", rcode: "NOERROR", want: cip.Spec.ClusterIPs},
		{qname: "inzone" + sfx, qtype: "AAAA", rcode: "NOERROR", check: dns.TypeCNAME, want: []string{"cip" + sfx}},
		{qname: "x.ext" + sfx, qtype: "A", rcode: "NXDOMAIN"},
		{qname: "10-244-1-9." + ns + ".pod." + clusterDomain + ".", qtype: "A", rcode: "NOERROR", want: []string{"10.244.1.9"}},
		{qname: "host1.sub" + sfx, qtype: "A", rcode: "NOERROR", want: []string{"10.244.1.20"}},
		{qname: ns + ".svc." + clusterDomain + ".", qtype: "A", rcode: "NOERROR"},
		{qname: "svc." + clusterDomain + ".", qtype: "TXT", rcode: "NOERROR"},
		{qname: clusterDomain + ".", qtype: "A", rcode: "NOERROR"},
		{qname: "nope" + sfx, qtype: "A", rcode: "NXDOMAIN"},
		{qname: "cip.nope-ns.svc." + clusterDomain + ".", qtype: "A", rcode: "NXDOMAIN"},
		{qname: "a.b.cip" + sfx, qtype: "A", rcode: "NXDOMAIN"},
		{qname: "cip." + ns + ".other." + clusterDomain + ".", qtype: "A", rcode: "NXDOMAIN"},
	}
	for _, c := range cases {
		t.Run(c.qname+"/"+c.qtype, func(t *testing.T) {
			a := r.ask(t, query{Name: c.qname, Type: c.qtype})
			check := c.check
			if check == 0 {
				check = dnsType(t, c.qtype)
			}
			want := slices.Sorted(slices.Values(c.want))
			if got := a.Data(check); a.Rcode != c.rcode || !slices.Equal(got, want) {
				t.Errorf("got %s %v, want %s %v\n%s", a.Rcode, got, c.rcode, want, a.Raw)
			}
			inZone := dns.IsSubDomain(clusterDomain+".", c.qname) && c.qname != "ext"+sfx
			if inZone && !slices.Contains(a.Flags, "aa") {
				t.Errorf("flags: got %v, want aa among them", a.Flags)
			}
		})
	}
}

// TestAPIServerUnreachable starts the agent while its path to the apiserver
// is cut: it must serve external names, answer SERVFAIL (never a false
// NXDOMAIN) for the cluster zone and report not ready; once the apiserver is
// reachable it syncs and answers. The time from reconnection to the first
// cluster answer is logged.
func TestAPIServerUnreachable(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{APIDown: true})
	ns := newNamespace(t, "down")
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, false))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."

	cases := []struct {
		qname, rcode string
	}{
		{fqdn, "SERVFAIL"},
		{"nope." + ns + ".svc." + clusterDomain + ".", "SERVFAIL"},
		{"www.example.com.", "NOERROR"},
	}
	for _, c := range cases {
		for _, tcp := range []bool{false, true} {
			if a := r.ask(t, query{Name: c.qname, TCP: tcp}); a.Rcode != c.rcode {
				t.Errorf("%s (tcp=%v) with the apiserver unreachable: got %v, want %s", c.qname, tcp, a, c.rcode)
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := httpOK(ctx, r.agent.http, "http://"+healthAddr+"/readyz", ""); err == nil {
		t.Errorf("/readyz with the apiserver unreachable: got 200, want an error status")
	}

	start := time.Now()
	r.agent.API.Resume()
	d := r.await(t, query{Name: fqdn}, start, hasData(dns.TypeA, svc.Spec.ClusterIP))
	t.Logf("apiserver reachable → first cluster answer: %v (client-go retry backoff included)", d.Round(time.Millisecond))
	r.agent.waitHTTP(t, "/readyz")
	if a := r.ask(t, query{Name: cases[1].qname}); a.Rcode != "NXDOMAIN" {
		t.Errorf("%s after sync: got %v, want NXDOMAIN", cases[1].qname, a)
	}

	// Losing the apiserver after sync keeps the zone being served.
	r.agent.API.Pause()
	if a := r.ask(t, query{Name: fqdn}); a.Rcode != "NOERROR" || !slices.Equal(a.Data(dns.TypeA), []string{svc.Spec.ClusterIP}) {
		t.Errorf("%s after losing the apiserver: got %v, want NOERROR [%s]", fqdn, a, svc.Spec.ClusterIP)
	}
}

// TestPodRecordsVerified runs the agent with --pods=verified: a pod record
// exists only while a pod with that IP exists in that namespace. The times
// from pod creation and deletion to the changed answer are logged.
func TestPodRecordsVerified(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--pods=verified"}, PodAccess: true})
	ns := newNamespace(t, "pods")
	name := func(dashed string) string { return dashed + "." + ns + ".pod." + clusterDomain + "." }
	other := newNamespace(t, "other")

	start := time.Now()
	createPod(t, ns, "p1", "node-1", "", "", "10.244.3.5", "fd00:10:244:3::5")
	d := r.await(t, query{Name: name("10-244-3-5")}, start, hasData(dns.TypeA, "10.244.3.5"))
	t.Logf("pod created with its IP → pod A record: %v", d.Round(time.Millisecond))

	cases := []struct {
		qname, qtype, rcode string
		want                []string
	}{
		{name("10-244-3-5"), "A", "NOERROR", []string{"10.244.3.5"}},
		{name("fd00-10-244-3--5"), "AAAA", "NOERROR", []string{"fd00:10:244:3::5"}},
		{name("10-244-3-6"), "A", "NXDOMAIN", nil},
		{"10-244-3-5." + other + ".pod." + clusterDomain + ".", "A", "NXDOMAIN", nil},
	}
	for _, c := range cases {
		a := r.ask(t, query{Name: c.qname, Type: c.qtype})
		if got := a.Data(dnsType(t, c.qtype)); a.Rcode != c.rcode || !equalSorted(got, c.want) {
			t.Errorf("%s %s: got %v, want %s %v", c.qname, c.qtype, a, c.rcode, c.want)
		}
	}

	start = time.Now()
	zero := int64(0)
	if err := env.api.Admin.CoreV1().Pods(ns).Delete(apiCtx(t), "p1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting pod: %v", err)
	}
	d = r.await(t, query{Name: name("10-244-3-5")}, start, hasRcode("NXDOMAIN"))
	t.Logf("pod deleted → NXDOMAIN: %v", d.Round(time.Millisecond))
}

// TestSmallerGrant runs the agent with the base grant (no pod list or
// watch) and flags asking for what needs pods: it is ready and serves the
// cluster zone, says once that autopath and verified pod records are off,
// and answers a pod name NXDOMAIN even while that pod exists. It would
// not sync at all if it watched pods under this grant.
func TestSmallerGrant(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--pods=verified", "--autopath"}})
	ns := newNamespace(t, "grant")
	start := time.Now()
	createPod(t, ns, "p1", "node-1", "", "", "10.244.4.5")
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, false))
	r.await(t, query{Name: "web." + ns + ".svc." + clusterDomain + "."}, start, hasData(dns.TypeA, svc.Spec.ClusterIP))
	if a := r.ask(t, query{Name: "10-244-4-5." + ns + ".pod." + clusterDomain + "."}); a.Rcode != "NXDOMAIN" {
		t.Errorf("pod name of an existing pod without pod access: got %v, want NXDOMAIN (verified records are off)", a)
	}
	log := r.agent.proc.logTail(1 << 20)
	if n := strings.Count(log, "--watch-pods is false"); n != 1 {
		t.Errorf("the pod-access warning: got %d lines, want 1\n%s", n, log)
	}
	if strings.Contains(log, "pods is forbidden") {
		t.Errorf("the agent asked for pods under a grant without them:\n%s", log)
	}
}

// TestZoneSnapshotRestart restarts the agent with --zone-snapshot while the
// apiserver is unreachable: the new agent serves the cluster zone from the
// snapshot the old one wrote on a clean exit, and moves to the live API once
// it is reachable (objects written meanwhile appear, deleted ones go).
// Readiness while serving from a snapshot is TestCrashRestart's.
func TestZoneSnapshotRestart(t *testing.T) {
	requireSuite(t)
	snap := "--zone-snapshot=" + filepath.Join(t.TempDir(), "zone.snap")
	r := newAgentRig(t, agentOpts{Flags: []string{snap}})
	ns := newNamespace(t, "snap")
	sfx := "." + ns + ".svc." + clusterDomain + "."
	old := createService(t, serviceSpec(ns, "old", corev1.ServiceTypeClusterIP, false))
	r.await(t, query{Name: "old" + sfx}, time.Now(), hasData(dns.TypeA, old.Spec.ClusterIP))
	r.agent.stop(t)

	r.agent = startAgent(t, r.node, r.up, agentOpts{Flags: []string{snap}, APIDown: true})
	for _, tcp := range []bool{false, true} {
		a := r.ask(t, query{Name: "old" + sfx, TCP: tcp})
		if got := a.Data(dns.TypeA); a.Rcode != "NOERROR" || !slices.Equal(got, []string{old.Spec.ClusterIP}) {
			t.Errorf("old%s from the snapshot (tcp=%v): got %v, want NOERROR [%s]", sfx, tcp, a, old.Spec.ClusterIP)
		}
	}
	// Written while the agent could not see it; it appears once the API is
	// back, and the deleted one goes.
	added := createService(t, serviceSpec(ns, "new", corev1.ServiceTypeClusterIP, false))
	deleteService(t, ns, "old")
	start := time.Now()
	r.agent.API.Resume()
	d := r.await(t, query{Name: "new" + sfx}, start, hasData(dns.TypeA, added.Spec.ClusterIP))
	t.Logf("apiserver reachable → snapshot replaced by the live zone: %v", d.Round(time.Millisecond))
	r.await(t, query{Name: "old" + sfx}, start, hasRcode("NXDOMAIN"))
}
