package kubezone

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

const (
	nx   = dns.RcodeNameError
	ok   = dns.RcodeSuccess
	fail = dns.RcodeServerFailure
)

// lookupCase is one question and the answer docs/dns-behaviour.md requires.
type lookupCase struct {
	row    string // the row of docs/dns-behaviour.md
	qname  string
	qtype  uint16
	rcode  int
	answer []string
	soa    bool // SOA in the authority section
	chase  string
	extra  []string // nil: not checked
}

func fixtureConfig() Config {
	return Config{NodeName: "node-a", LocalIPs: []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("fd00::a")}}
}

// TestLookupRecords covers every row of the Records table.
func TestLookupRecords(t *testing.T) {
	const web = "web.demo.svc.cluster.local."
	cases := []lookupCase{
		{row: "dns-version TXT", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT, rcode: ok,
			answer: []string{`dns-version.cluster.local. TXT "1.1.0"`}},
		{row: "ClusterIP A", qname: web, qtype: dns.TypeA, rcode: ok, answer: []string{web + " A 10.96.0.10"}},
		{row: "dual-stack A", qname: "dual.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"dual.demo.svc.cluster.local. A 10.96.0.20"}},
		{row: "dual-stack AAAA", qname: "dual.demo.svc.cluster.local.", qtype: dns.TypeAAAA, rcode: ok,
			answer: []string{"dual.demo.svc.cluster.local. AAAA fd00:10:96::20"}},
		{row: "NodePort A", qname: "shop.default.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"shop.default.svc.cluster.local. A 10.96.0.60"}},
		{row: "ClusterIP without endpoints A", qname: "idle.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"idle.demo.svc.cluster.local. A 10.96.0.50"}},
		{row: "headless A: ready endpoints only", qname: "db.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"db.demo.svc.cluster.local. A 10.244.1.30", "db.demo.svc.cluster.local. A 10.244.2.31"}},
		{row: "headless AAAA", qname: "db.demo.svc.cluster.local.", qtype: dns.TypeAAAA, rcode: ok,
			answer: []string{"db.demo.svc.cluster.local. AAAA fd00:10:244:1::30"}},
		{row: "ExternalName CNAME", qname: "search.demo.svc.cluster.local.", qtype: dns.TypeCNAME, rcode: ok,
			answer: []string{"search.demo.svc.cluster.local. CNAME www.example.com."}},
		{row: "ExternalName A out of zone: chase", qname: "search.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"search.demo.svc.cluster.local. CNAME www.example.com."}, chase: "www.example.com."},
		{row: "ExternalName A in zone: resolved locally", qname: "web-alias.demo.svc.cluster.local.", qtype: dns.TypeA,
			rcode: ok, answer: []string{"web-alias.demo.svc.cluster.local. CNAME " + web, web + " A 10.96.0.10"}},
		{row: "endpoint hostname A", qname: "db-0.db.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"db-0.db.demo.svc.cluster.local. A 10.244.1.30"}},
		{row: "endpoint hostname AAAA", qname: "db-0.db.demo.svc.cluster.local.", qtype: dns.TypeAAAA, rcode: ok,
			answer: []string{"db-0.db.demo.svc.cluster.local. AAAA fd00:10:244:1::30"}},
		{row: "endpoint dashed IPv4", qname: "10-244-1-40.workers.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"10-244-1-40.workers.demo.svc.cluster.local. A 10.244.1.40"}},
		{row: "endpoint of a ClusterIP service", qname: "10-244-1-5." + web, qtype: dns.TypeA, rcode: ok,
			answer: []string{"10-244-1-5." + web + " A 10.244.1.5"}},
		{row: "endpoint dashed IPv6", qname: "fd00-10-244-1--20.dual.demo.svc.cluster.local.", qtype: dns.TypeAAAA,
			rcode: ok, answer: []string{"fd00-10-244-1--20.dual.demo.svc.cluster.local. AAAA fd00:10:244:1::20"}},
		{row: "not-ready endpoint has no name", qname: "db-2.db.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "named port SRV, ClusterIP", qname: "_http._tcp." + web, qtype: dns.TypeSRV, rcode: ok,
			answer: []string{"_http._tcp." + web + " SRV 0 100 80 " + web}, extra: []string{web + " A 10.96.0.10"}},
		{row: "named port SRV, headless", qname: "_pg._tcp.db.demo.svc.cluster.local.", qtype: dns.TypeSRV, rcode: ok,
			answer: []string{
				"_pg._tcp.db.demo.svc.cluster.local. SRV 0 50 5432 db-0.db.demo.svc.cluster.local.",
				"_pg._tcp.db.demo.svc.cluster.local. SRV 0 50 5432 db-1.db.demo.svc.cluster.local.",
			}, extra: []string{
				"db-0.db.demo.svc.cluster.local. A 10.244.1.30", "db-0.db.demo.svc.cluster.local. AAAA fd00:10:244:1::30",
				"db-1.db.demo.svc.cluster.local. A 10.244.2.31",
			}},
		{row: "service SRV, all ports (CoreDNS extension)", qname: web, qtype: dns.TypeSRV, rcode: ok,
			answer: []string{web + " SRV 0 50 80 " + web, web + " SRV 0 50 9999 " + web},
			extra:  []string{web + " A 10.96.0.10"}},
		{row: "unnamed port has no _port._proto name", qname: "_._udp." + web, qtype: dns.TypeSRV, rcode: nx, soa: true},
		{row: "PTR of a ClusterIP", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok,
			answer: []string{"10.0.96.10.in-addr.arpa. PTR " + web}},
		{row: "PTR of a v6 ClusterIP", qname: "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.",
			qtype: dns.TypePTR, rcode: ok, answer: []string{
				"0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. PTR dual.demo.svc.cluster.local."}},
		{row: "PTR of an endpoint", qname: "30.1.244.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: ok,
			answer: []string{"30.1.244.10.in-addr.arpa. PTR db-0.db.demo.svc.cluster.local."}},
		{row: "PTR of a v6 endpoint", qname: "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa.",
			qtype: dns.TypePTR, rcode: ok, answer: []string{
				"0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.4.4.2.0.0.1.0.0.0.0.d.f.ip6.arpa. PTR db-0.db.demo.svc.cluster.local."}},
		{row: "pod A (insecure)", qname: "10-244-9-9.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"10-244-9-9.demo.pod.cluster.local. A 10.244.9.9"}},
		{row: "pod AAAA, dashed v6", qname: "fd00--1.demo.pod.cluster.local.", qtype: dns.TypeAAAA, rcode: ok,
			answer: []string{"fd00--1.demo.pod.cluster.local. AAAA fd00::1"}},
		{row: "pod AAAA on a v4 pod name", qname: "10-244-9-9.demo.pod.cluster.local.", qtype: dns.TypeAAAA, rcode: ok, soa: true},
		{row: "pod in an unknown namespace", qname: "10-244-9-9.nope.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "pod label not an IP", qname: "web.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "pod: exactly one label before ns", qname: "x.10-244-9-9.demo.pod.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
	}
	fixtureZone(t, fixtureConfig(), func(t *testing.T, z *Zone) { runCases(t, z, cases) })
}

func runCases(t testing.TB, z *Zone, cases []lookupCase) {
	t.Helper()
	for _, c := range cases {
		label := c.row + " (" + c.qname + " " + dns.TypeToString[c.qtype] + ")"
		got := z.Lookup(c.qname, c.qtype)
		checkAnswer(t, label, got, c.rcode, c.answer, c.soa, c.chase)
		if c.extra != nil {
			if g, w := rrText(got.Extra), sorted(c.extra); !equalStrings(g, w) {
				t.Errorf("%s: extra: got %q, want %q", label, g, w)
			}
		}
		if !z.InZone(c.qname) && got.Rcode == ok {
			t.Errorf("%s: InZone false for a name the zone answers", label)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
