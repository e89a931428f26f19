package server

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/internal/testnet"
	"github.com/nodecache/nodecache/pkg/wire"
)

// TestCorednsLabelsAreHonest serves on two loopback addresses with a stub
// domain and checks that each query is counted under the address it came
// in on, the zone that serves it and the plugin that answered.
func TestCorednsLabelsAreHonest(t *testing.T) {
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	a1 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
	a2 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port)
	l, err := Listen(context.Background(), []netip.AddrPort{a1, a2}, 1)
	if err != nil {
		t.Skipf("127.0.0.2 is not usable here (%v): the test needs two loopback addresses", err)
	}
	reg := prometheus.NewRegistry()
	serveOn(t, l, Config{Addrs: []netip.AddrPort{a1, a2}, StubDomains: []string{"corp.example."}},
		Deps{Zone: &fakeZone{}, Resolver: &fakeResolver{}}, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	exchange(t, a1.String(), "web.default.svc.cluster.local.", dns.TypeA)
	exchange(t, a2.String(), "www.example.org.", dns.TypeA)
	exchange(t, a2.String(), "www.example.org.", dns.TypeA)
	exchange(t, a2.String(), "host.corp.example.", dns.TypeMX)

	gather := func() map[string]float64 {
		got := map[string]float64{}
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, lp := range m.GetLabel() {
					key += " " + lp.GetName() + "=" + lp.GetValue()
				}
				got[key] += m.GetCounter().GetValue()
			}
		}
		return got
	}
	s1, s2 := "server=dns://"+a1.String(), "server=dns://"+a2.String()
	want := map[string]float64{
		"coredns_dns_requests_total family=1 proto=udp " + s1 + " type=A view= zone=cluster.local.":        1,
		"coredns_dns_requests_total family=1 proto=udp " + s2 + " type=A view= zone=.":                     2,
		"coredns_dns_requests_total family=1 proto=udp " + s2 + " type=MX view= zone=corp.example.":        1,
		"coredns_dns_responses_total plugin=kubernetes rcode=NOERROR " + s1 + " view= zone=cluster.local.": 1,
		"coredns_dns_responses_total plugin=forward rcode=NOERROR " + s2 + " view= zone=.":                 1,
		"coredns_dns_responses_total plugin=cache rcode=NOERROR " + s2 + " view= zone=.":                   1,
		"coredns_cache_requests_total " + s2 + " view= zones=.":                                            2,
		"coredns_cache_hits_total " + s2 + " type=success view= zones=.":                                   1,
		"coredns_cache_misses_total " + s2 + " view= zones=.":                                              1,
	}
	// The server counts a query after it has sent the reply, so the last
	// one may land a moment after exchange returned: wait for the counts,
	// then judge them.
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got = gather()
		settled := true
		for key, n := range want {
			settled = settled && got[key] >= n
		}
		if settled || time.Now().After(deadline) {
			break
		}
	}
	for key, n := range want {
		if got[key] != n {
			t.Errorf("%s: got %v, want %v", key, got[key], n)
		}
	}
	for key := range got {
		if key == "coredns_cache_requests_total "+s1+" view= zones=cluster.local." {
			t.Errorf("a zone answer was counted as a cache request: %s", key)
		}
	}
}

// BenchmarkCorednsObserve measures what the CoreDNS-compatible series add
// to each answered query, apart from the rest of the hit path.
func BenchmarkCorednsObserve(b *testing.B) {
	m, err := newCorednsMetrics(prometheus.NewRegistry(), []netip.AddrPort{netip.MustParseAddrPort("169.254.20.10:53")},
		"cluster.local.", []string{"corp.example."})
	if err != nil {
		b.Fatal(err)
	}
	q := parseName(b, "www.example.org.")
	client := netip.MustParseAddr("10.0.0.1")
	res := Result{Source: wire.SourceCache}
	reply := make([]byte, 60)
	reply[7] = 1 // one answer record
	b.ReportAllocs()
	for b.Loop() {
		m.observe(edge{proto: protoUDP}, client, q, res, 0.0001, 40, reply)
	}
}

func parseName(tb testing.TB, name string) *wire.Query {
	tb.Helper()
	pkt, err := new(dns.Msg).SetQuestion(name, dns.TypeA).Pack()
	q := new(wire.Query)
	if err == nil {
		err = wire.Parse(pkt, q)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// BenchmarkNodecacheObserve is the same for nodecache's own series, for
// scale.
func BenchmarkNodecacheObserve(b *testing.B) {
	cfg := Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("169.254.20.10:53")}, Domain: "cluster.local."}
	m, err := newMetrics(prometheus.NewRegistry(), &cfg)
	if err != nil {
		b.Fatal(err)
	}
	res := Result{Source: wire.SourceCache}
	reply := make([]byte, 60)
	reply[7] = 1 // one answer record
	b.ReportAllocs()
	for b.Loop() {
		m.observe(protoUDP, dns.TypeA, res, (100 * time.Microsecond).Seconds())
	}
}

func TestCacheHitType(t *testing.T) {
	answer := mustPack(t, new(dns.Msg).SetQuestion("a.example.", dns.TypeA))
	for _, tt := range []struct {
		name  string
		rcode int
		an    byte
		want  int
	}{
		{"positive", dns.RcodeSuccess, 1, 0},
		{"NODATA", dns.RcodeSuccess, 0, 1},
		{"NXDOMAIN", dns.RcodeNameError, 0, 1},
		{"SERVFAIL", dns.RcodeServerFailure, 0, 1},
	} {
		reply := append([]byte(nil), answer...)
		reply[7] = tt.an
		if got := denial(tt.rcode, reply); got != tt.want {
			t.Errorf("%s: got %d, want %d (0 success, 1 denial)", tt.name, got, tt.want)
		}
	}
}

func TestMetricQtypeIndex(t *testing.T) {
	for i, typ := range metricQtypes {
		if got := metricQtypeIndex(typ); got != i {
			t.Errorf("%s: got index %d, want %d", dns.TypeToString[typ], got, i)
		}
	}
	for _, typ := range []uint16{0, dns.TypeNULL, dns.TypeDNSKEY, 256, dns.TypeCAA, 65535} {
		if got := metricQtypeIndex(typ); got != len(metricQtypes) {
			t.Errorf("type %d: got index %d, want %d (other)", typ, got, len(metricQtypes))
		}
	}
}
