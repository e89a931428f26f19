//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// ndotsCost is what one `getent ahosts NAME` from a pod cost: queries the
// agent received and sent upstream, and the addresses glibc returned.
type ndotsCost struct {
	Agent, Upstream int
	Saved           float64 // nodecache_autopath_saved_queries_total delta
	Addrs           []string
}

// ndotsNames are resolved by glibc from a ClusterFirst pod (ndots:5): an
// external name walks the whole search path, a service of the pod's
// namespace resolves at the first try.
var ndotsNames = []string{"www.example.com", "web"}

// TestAutopathNdotsStorm resolves an external name and a service with
// glibc from a pod with the kubelet's resolv.conf, against an agent without
// and with --autopath. The addresses must be the same; with autopath the
// agent must receive fewer queries, and its saved-queries metric must count
// exactly the difference.
func TestAutopathNdotsStorm(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t, "autopath")
	createService(t, serviceSpec(ns, "web", "ClusterIP", true))
	costs := map[bool]map[string]ndotsCost{}
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopath=%v", on), func(t *testing.T) { costs[on] = ndotsWalk(t, ns, on) })
	}
	if len(costs) != 2 {
		t.FailNow()
	}
	for _, name := range ndotsNames {
		off, on := costs[false][name], costs[true][name]
		t.Logf("getent ahosts %s: without autopath agent %d queries, upstream %d; with autopath agent %d, upstream %d, saved metric %+v",
			name, off.Agent, off.Upstream, on.Agent, on.Upstream, on.Saved)
		if !slices.Equal(off.Addrs, on.Addrs) || len(on.Addrs) == 0 {
			t.Errorf("getent ahosts %s: got %v with autopath, %v without; want the same, non-empty", name, on.Addrs, off.Addrs)
		}
		if on.Saved != float64(off.Agent-on.Agent) || off.Saved != 0 {
			t.Errorf("%s: saved-queries metric got %v (and %v without autopath), want %d (the queries autopath saved) and 0",
				name, on.Saved, off.Saved, off.Agent-on.Agent)
		}
	}
	if off, on := costs[false]["www.example.com"], costs[true]["www.example.com"]; on.Agent >= off.Agent {
		t.Errorf("www.example.com: got %d queries to the agent with autopath, %d without; want fewer with it", on.Agent, off.Agent)
	}
}

// ndotsWalk runs ndotsNames through glibc in a pod of ns against an agent
// with or without --autopath, whose pod object is in the API.
func ndotsWalk(t *testing.T, ns string, autopath bool) map[string]ndotsCost {
	var flags []string
	if autopath {
		flags = []string{"--autopath"}
	}
	r := newAgentRig(t, agentOpts{Flags: flags, PodAccess: true}) // autopath needs the client's pod
	r.pod.NS.writeResolvConf(t, linkLocalIP, ns, clusterDomain)
	createPod(t, ns, fmt.Sprintf("client-%v", autopath), "node-1", "", "", r.pod.IP)
	r.await(t, query{Name: "web." + ns + ".svc." + clusterDomain + "."}, time.Now(), hasRcode("NOERROR"))
	if autopath {
		awaitAutopath(t, r, r.pod, ns)
	}
	out := map[string]ndotsCost{}
	for _, name := range ndotsNames {
		m := r.agent.metrics(t)
		agent0, saved0, up0 := metricSum(t, m, "nodecache_server_requests_total"), metricSum(t, m, "nodecache_autopath_saved_queries_total"), r.up.Queries.Load()
		addrs, err := getentAhosts(t.Context(), r.pod.NS, name)
		if err != nil {
			t.Fatal(err)
		}
		m = r.agent.metrics(t)
		out[name] = ndotsCost{
			Agent:    int(metricSum(t, m, "nodecache_server_requests_total") - agent0),
			Upstream: int(r.up.Queries.Load() - up0),
			Saved:    metricSum(t, m, "nodecache_autopath_saved_queries_total") - saved0,
			Addrs:    addrs,
		}
	}
	return out
}

// awaitAutopath waits until the agent answers p's first search expansion
// of ns.example.com (a name no other check asks for) with a CNAME: the
// agent knows p's pod.
func awaitAutopath(t testing.TB, _ *agentRig, p *pod, ns string) {
	t.Helper()
	q := query{Server: linkLocalIP, Name: "ns.example.com." + ns + ".svc." + clusterDomain + "."}
	eventually(t, "autopath for the pod "+p.IP, func() error {
		a, err := runQuery(t.Context(), p.NS, q)
		if err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
		if a.Rcode != "NOERROR" || !slices.Equal(a.Data(dns.TypeCNAME), []string{"ns.example.com."}) {
			return fmt.Errorf("%s: got %v, want NOERROR with CNAME %s", q.Name, a, "ns.example.com.")
		}
		return nil
	})
}

// TestAutopathOtherPods checks that autopath answers only for a running
// pod of this node: a pod the API places on another node and an IP no pod
// has get the plain NXDOMAIN for the first expansion, while this node's pod
// gets the CNAME.
func TestAutopathOtherPods(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--autopath"}, PodAccess: true})
	ns := newNamespace(t, "autopath")
	elsewhere, unknown := addPod(t, r.node, linkLocalIP), addPod(t, r.node, linkLocalIP)
	// Created first: once the local pod is known, so is this one.
	createPod(t, ns, "elsewhere", "node-2", "", "", elsewhere.IP)
	createPod(t, ns, "local", "node-1", "", "", r.pod.IP)
	awaitAutopath(t, r, r.pod, ns)
	first := "www.example.com." + ns + ".svc." + clusterDomain + "."
	for _, c := range []struct {
		name string
		p    *pod
		want string
		data []string
	}{
		{"pod of this node", r.pod, "NOERROR", []string{"www.example.com."}},
		{"pod of node-2", elsewhere, "NXDOMAIN", nil},
		{"IP of no pod", unknown, "NXDOMAIN", nil},
	} {
		a := mustQuery(t, c.p.NS, query{Server: linkLocalIP, Name: first})
		if a.Rcode != c.want || !slices.Equal(a.Data(dns.TypeCNAME), c.data) {
			t.Errorf("%s (%s) asks %s: got %v, want %s with CNAME %v", c.name, c.p.IP, first, a, c.want, c.data)
		}
	}
}

var dnsperfCountRe = regexp.MustCompile(`([A-Z]+) (\d+) \(`)

// dnsperfRcodes parses dnsperf's "Response codes:" line into counts.
func dnsperfRcodes(t testing.TB, out string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, m := range dnsperfCountRe.FindAllStringSubmatch(firstMatch(dnsperfRcodesRe, out), -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatalf("dnsperf count %q: %v", m[0], err)
		}
		counts[m[1]] = n
	}
	return counts
}

// TestAutopathClientQPSLimit (beside autopath: both key on the client IP)
// sends a dnsperf burst from one pod to an agent with --client-qps-limit:
// that pod gets REFUSED beyond the limit while another pod, querying at the
// same time, gets every answer.
func TestAutopathClientQPSLimit(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--client-qps-limit=50"}})
	other := addPod(t, r.node, linkLocalIP)
	data := writeFile(t, "queries", "www.example.com. A\n")
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := exec.Command("ip", "netns", "exec", r.pod.NS.Name, "dnsperf", "-s", linkLocalIP,
			"-d", data, "-l", "3", "-Q", "2000", "-c", "2", "-t", "2").CombinedOutput()
		done <- result{string(out), err}
	}()
	// The other pod queries while the burst is being limited.
	eventually(t, "the burst to reach the limit", func() error {
		limited := `nodecache_server_dropped_total{reason="client_qps_limit"}`
		if metricSum(t, r.agent.metrics(t), limited) == 0 {
			return fmt.Errorf("%s is 0", limited)
		}
		return nil
	})
	var otherRcodes []string
	for range 20 {
		a, err := runQuery(t.Context(), other.NS, query{Server: linkLocalIP, Name: "www.example.com."})
		if err != nil {
			t.Errorf("other pod during the burst: %v", err)
			continue
		}
		otherRcodes = append(otherRcodes, a.Rcode)
		time.Sleep(50 * time.Millisecond)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("dnsperf: %v\n%s", res.err, res.out)
	}
	counts := dnsperfRcodes(t, res.out)
	t.Logf("dnsperf -Q 2000 -l 3 from one pod, --client-qps-limit 50: %v, %s qps answered; other pod: %v",
		counts, firstMatch(dnsperfQPSRe, res.out), otherRcodes)
	if counts["REFUSED"] == 0 || counts["NOERROR"] == 0 {
		t.Errorf("bursting pod: got rcodes %v, want NOERROR up to the limit and REFUSED beyond\n%s", counts, res.out)
	}
	for i, rc := range otherRcodes {
		if rc != "NOERROR" {
			t.Errorf("other pod, query %d during the burst: got %s, want NOERROR", i+1, rc)
		}
	}
	if len(otherRcodes) != 20 {
		t.Errorf("other pod: got %d answers, want 20", len(otherRcodes))
	}
}
