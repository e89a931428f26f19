//go:build linux

package server

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// TestBatchedBurst sends bursts from several clients, v4 and v6, so that
// recvmmsg returns many datagrams at once and sendmmsg sends many replies,
// and checks that every query gets its own answer back at its own address.
func TestBatchedBurst(t *testing.T) {
	addrs := []string{"127.0.0.1"}
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err == nil {
		c.Close()
		addrs = append(addrs, "::1")
	} else {
		t.Logf("no IPv6 loopback here (%v): testing IPv4 only", err)
	}
	for _, ip := range addrs {
		t.Run(ip, func(t *testing.T) {
			f := &fakeResolver{}
			_, addr := startServerOn(t, netip.MustParseAddr(ip), 1, Config{}, Deps{Resolver: f})
			// Warm the cache so the burst is served inline by the batch loop.
			for i := 0; i < 4; i++ {
				exchange(t, addr.String(), name(i), dns.TypeA)
			}
			const clients, perClient = 4, 100
			conns := dialClients(t, addr, clients)
			want := map[*net.UDPConn]map[uint16]string{}
			for _, c := range conns {
				want[c] = map[uint16]string{}
				for j := 0; j < perClient; j++ {
					m := new(dns.Msg)
					m.SetQuestion(name(j%4), dns.TypeA)
					m.Id = uint16(j + 1)
					want[c][m.Id] = name(j % 4)
					if _, err := c.Write(mustPack(t, m)); err != nil {
						t.Fatal(err)
					}
				}
			}
			buf := make([]byte, 2048)
			for _, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				for len(want[c]) > 0 {
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("%d replies missing: %v", len(want[c]), err)
					}
					var r dns.Msg
					if err := r.Unpack(buf[:n]); err != nil {
						t.Fatal(err)
					}
					wantName, ok := want[c][r.Id]
					if !ok || r.Question[0].Name != wantName || len(r.Answer) != 1 {
						t.Fatalf("reply id %d for %s: not a query of this client, or wrong answer %v", r.Id, r.Question[0].Name, r.Answer)
					}
					delete(want[c], r.Id)
				}
			}
			if got := f.calls.Load(); got != 4 {
				t.Errorf("resolver calls: got %d, want 4 (the burst is all cache hits)", got)
			}
		})
	}
}

// dialClients returns n UDP sockets connected to addr, closed when the test ends.
func dialClients(t *testing.T, addr netip.AddrPort, n int) []*net.UDPConn {
	t.Helper()
	conns := make([]*net.UDPConn, n)
	for i := range conns {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_ = c.SetReadBuffer(1 << 20)
		conns[i] = c
	}
	return conns
}

func name(i int) string { return string(rune('a'+i)) + ".burst.example." }

// lockedCounts is a Counter safe for the loop and the slow path's workers
// at once: answers counted, by client.
type lockedCounts struct {
	mu sync.Mutex
	n  map[netip.Addr]uint64
}

func (c *lockedCounts) Count(client netip.Addr, _ Result, n uint64, _ time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[client] += n
}

// TestBatchedCountsEachAnswerOnce: bursts through the batched loop, whose
// accounting is tallied per batch and added once, count every answer
// exactly once in every series and in the per-client Counter: a batch's
// counts lost or added twice reads as a total off by the batch.
func TestBatchedCountsEachAnswerOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	counts := &lockedCounts{n: map[netip.Addr]uint64{}}
	_, addr := startServerReg(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}, Counter: counts}, reg, nil)
	const warm = 4
	for i := 0; i < warm; i++ {
		exchange(t, addr.String(), name(i), dns.TypeA)
	}
	const clients, perClient = 4, 150
	conns := dialClients(t, addr, clients)
	reqBytes := 0
	for j := 0; j < perClient; j++ {
		for _, c := range conns {
			m := new(dns.Msg)
			m.SetQuestion(name(j%warm), dns.TypeA)
			pkt := mustPack(t, m)
			reqBytes += len(pkt)
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
	}
	buf := make([]byte, 2048)
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for j := 0; j < perClient; j++ {
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("%d of %d replies: %v", j, perClient, err)
			}
		}
	}
	// Every reply is accounted before it is sent: the totals are final.
	const hits, all = clients * perClient, clients*perClient + warm
	for _, w := range []struct {
		name, label, value string
		want               float64
	}{
		{"nodecache_server_requests_total", "qtype", "A", all},
		{"nodecache_server_responses_total", "source", "cache", hits},
		{"nodecache_server_request_duration_seconds", "source", "cache", hits},
		{"coredns_dns_requests_total", "type", "A", all},
		{"coredns_dns_responses_total", "plugin", "cache", hits},
		{"coredns_dns_request_duration_seconds", "", "", all},
		{"coredns_dns_response_size_bytes", "", "", all},
		{"coredns_cache_requests_total", "", "", all},
		{"coredns_cache_hits_total", "type", "success", hits},
		{"coredns_cache_misses_total", "", "", warm},
	} {
		if got := gatheredSum(t, reg, w.name, w.label, w.value, false); got != w.want {
			t.Errorf("%s{%s=%q}: %v, want %v", w.name, w.label, w.value, got, w.want)
		}
	}
	// The request size histogram's sum is the bytes of the queries, each once.
	if got := gatheredSum(t, reg, "coredns_dns_request_size_bytes", "", "", true); int(got) < reqBytes || int(got) >= reqBytes+warm*100 {
		t.Errorf("coredns_dns_request_size_bytes sum %v: want the burst's %d bytes plus the %d warming queries'", got, reqBytes, warm)
	}
	counts.mu.Lock()
	defer counts.mu.Unlock()
	if got := counts.n[netip.MustParseAddr("127.0.0.1")]; got != all {
		t.Errorf("Counter: %d answers from 127.0.0.1, want %d", got, all)
	}
}

// gatheredSum adds up the series of the metric family name whose label is
// value (every series for label ""): counters' values, histograms' counts,
// or with sum their sums.
func gatheredSum(t *testing.T, g prometheus.Gatherer, name, label, value string, sum bool) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if label != "" {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == label && lp.GetValue() != value {
						continue series
					}
				}
			}
			switch {
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
			case sum:
				total += m.GetHistogram().GetSampleSum()
			default:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}
