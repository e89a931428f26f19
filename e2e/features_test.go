//go:build e2e

package e2e

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// startOtherCluster serves, on UDP inside ns, another cluster's DNS for
// other.svc.<clusterDomain>: A 192.0.2.99 for every name under it. It
// returns its address and the count of queries it answered.
func startOtherCluster(t testing.TB, ns *netNS) (string, *atomic.Int64) {
	t.Helper()
	pc, err := ns.listenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		if q := r.Question[0]; q.Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.IPv4(192, 0, 2, 99)}}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), &n
}

// firstAddresses asks q n times with dig and returns how often each
// address came first, and the sorted set of each answer's addresses.
func firstAddresses(t *testing.T, r *agentRig, q query, n int) (map[string]int, [][]string) {
	t.Helper()
	first := map[string]int{}
	var sets [][]string
	for range n {
		a := r.ask(t, q)
		if a.Rcode != "NOERROR" || len(a.Answer) == 0 {
			t.Fatalf("%s: got %v, want addresses", q.Name, a)
		}
		first[a.Answer[0].(*dns.A).A.String()]++
		sets = append(sets, a.Data(dns.TypeA))
	}
	return first, sets
}

// TestAgentFeatures runs one agent with the settings migrate writes for
// the stock Corefiles and checks each on the wire with dig: --loadbalance
// (a headless Service's and a cached upstream answer's addresses come out
// in changing orders, the set unchanged), --suppress-aaaa (NODATA, aa,
// the upstream never asked), --upstream-force-tcp (the upstream sees TCP
// only) and a stub domain under the cluster domain (its server answers,
// not the zone).
func TestAgentFeatures(t *testing.T) {
	requireSuite(t)
	node := newNetNS(t, "node")
	pod := addPod(t, node, linkLocalIP)
	up := startUpstream(t, node, "127.0.0.1")
	stubAddr, stubQueries := startOtherCluster(t, node)
	agent := startAgent(t, node, up, agentOpts{Flags: []string{
		"--loadbalance", "--suppress-aaaa=example.com", "--upstream-force-tcp",
		"--stub-domain=other.svc." + clusterDomain + "=" + stubAddr,
	}})
	r := &agentRig{node: node, pod: pod, up: up, agent: agent}

	ns := newNamespace(t, "features")
	httpPort := svcPort("http", corev1.ProtocolTCP, 80)
	createService(t, headlessSpec(ns, "hl", httpPort))
	var eps []endpoint
	var want []string
	for i := range 6 {
		ip := net.IPv4(10, 244, 3, byte(10+i)).String()
		eps = append(eps, endpoint{IP: ip, NodeName: "node-1"})
		want = append(want, ip)
	}
	slices.Sort(want)
	createEndpointSlice(t, ns, "hl", discoveryv1.AddressTypeIPv4, eps, httpPort)
	hl := query{Name: "hl." + ns + ".svc." + clusterDomain + "."}
	r.await(t, hl, time.Now(), hasData(dns.TypeA, want...))

	t.Run("loadbalance", func(t *testing.T) {
		for _, c := range []struct {
			q    query
			want []string
		}{
			{hl, want},
			{query{Name: "lb.example.com."}, []string{"192.0.2.21", "192.0.2.22", "192.0.2.23", "192.0.2.24"}},
		} {
			before := up.Queries.Load()
			first, sets := firstAddresses(t, r, c.q, 40)
			for _, s := range sets {
				if !slices.Equal(s, c.want) {
					t.Fatalf("%s: an answer held %v, want %v", c.q.Name, s, c.want)
				}
			}
			// 40 answers: the chance that a fair shuffle of 4 leaves one
			// address first every time is 4^-39.
			if len(first) < 2 {
				t.Errorf("%s: the first address was always %v, want it to change (loadbalance)", c.q.Name, first)
			}
			if c.q.Name == "lb.example.com." && up.Queries.Load()-before > 1 {
				t.Errorf("lb.example.com.: the upstream was asked %d times, want at most once (then cache hits, shuffled)", up.Queries.Load()-before)
			}
			t.Logf("%s: first addresses over 40 answers: %v", c.q.Name, first)
		}
	})

	t.Run("suppress-aaaa", func(t *testing.T) {
		before := up.Queries.Load()
		a := r.ask(t, query{Name: "www.example.com.", Type: "AAAA"})
		if a.Rcode != "NOERROR" || len(a.Answer) != 0 || !slices.Contains(a.Flags, "aa") {
			t.Errorf("AAAA www.example.com.: got %v flags %v, want NOERROR, aa, no records\n%s", a, a.Flags, a.Raw)
		}
		if up.Queries.Load() != before {
			t.Errorf("the upstream was asked %d times for a suppressed AAAA, want 0", up.Queries.Load()-before)
		}
		if a := r.ask(t, query{Name: "www.example.com.", Type: "A"}); !slices.Equal(a.Data(dns.TypeA), []string{"192.0.2.10"}) {
			t.Errorf("A www.example.com.: got %v, want 192.0.2.10 (only AAAA is suppressed)", a)
		}
	})

	t.Run("upstream-force-tcp", func(t *testing.T) {
		if a := r.ask(t, query{Name: "txt.example.com.", Type: "TXT"}); a.Rcode != "NOERROR" || len(a.Answer) != 1 {
			t.Fatalf("TXT txt.example.com.: got %v", a)
		}
		if q, tcp := up.Queries.Load(), up.TCPQueries.Load(); q == 0 || tcp != q {
			t.Errorf("the upstream got %d queries, %d of them over TCP; want all over TCP", q, tcp)
		}
	})

	t.Run("stub-under-cluster-domain", func(t *testing.T) {
		before := stubQueries.Load()
		a := r.ask(t, query{Name: "db.other.svc." + clusterDomain + "."})
		if !slices.Equal(a.Data(dns.TypeA), []string{"192.0.2.99"}) || stubQueries.Load() != before+1 {
			t.Errorf("db.other.svc.%s.: got %v (stub asked %d times), want the other cluster's 192.0.2.99\n%s", clusterDomain, a, stubQueries.Load()-before, a.Raw)
		}
		if a := r.ask(t, query{Name: "nope." + ns + ".svc." + clusterDomain + "."}); a.Rcode != "NXDOMAIN" || !slices.Contains(a.Flags, "aa") {
			t.Errorf("beside the stub: got %v flags %v, want the zone's NXDOMAIN", a, a.Flags)
		}
	})
}
