package kubezone

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// everyType is the set of qtypes asked of names that exist without data.
var everyType = []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeMX, dns.TypePTR, dns.TypeCNAME,
	dns.TypeNS, dns.TypeSOA, dns.TypeCAA, dns.TypeHTTPS}

// TestLookupResponseCodes covers every row of the Response codes table.
func TestLookupResponseCodes(t *testing.T) {
	const web = "web.demo.svc.cluster.local."
	soa := "cluster.local. SOA ns.dns.cluster.local. hostmaster.cluster.local. %d 7200 1800 86400 5"
	cases := []lookupCase{
		{row: "exists with type", qname: web, qtype: dns.TypeA, rcode: ok, answer: []string{web + " A 10.96.0.10"}},
		{row: "NODATA: AAAA on v4-only service", qname: web, qtype: dns.TypeAAAA, rcode: ok, soa: true},
		{row: "NODATA: TXT on a service", qname: web, qtype: dns.TypeTXT, rcode: ok, soa: true},
		{row: "NODATA: MX on a service", qname: web, qtype: dns.TypeMX, rcode: ok, soa: true},
		{row: "NODATA: SRV on ExternalName", qname: "search.demo.svc.cluster.local.", qtype: dns.TypeSRV, rcode: ok, soa: true},
		{row: "NODATA: A on dns-version", qname: "dns-version.cluster.local.", qtype: dns.TypeA, rcode: ok, soa: true},
		{row: "NODATA: A on SRV owner", qname: "_http._tcp." + web, qtype: dns.TypeA, rcode: ok, soa: true},
		{row: "ExternalName, in-zone target lacks type: CNAME + target's NODATA", qname: "web-alias.demo.svc.cluster.local.",
			qtype: dns.TypeAAAA, rcode: ok, soa: true, answer: []string{"web-alias.demo.svc.cluster.local. CNAME " + web}},
		{row: "ExternalName, out-of-zone target: CNAME + chase", qname: "search.demo.svc.cluster.local.", qtype: dns.TypeAAAA,
			rcode: ok, answer: []string{"search.demo.svc.cluster.local. CNAME www.example.com."}, chase: "www.example.com."},
		{row: "NXDOMAIN: unknown service", qname: "nope.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: unknown endpoint", qname: "db-9.db.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: unknown namespace", qname: "nope.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: service in unknown namespace", qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: unknown port", qname: "_nope._tcp." + web, qtype: dns.TypeSRV, rcode: nx, soa: true},
		{row: "NXDOMAIN: unknown protocol", qname: "_http._udp." + web, qtype: dns.TypeSRV, rcode: nx, soa: true},
		{row: "NXDOMAIN: unknown protocol ENT", qname: "_sctp." + web, qtype: dns.TypeSRV, rcode: nx, soa: true},
		{row: "NXDOMAIN: too many labels", qname: "a.b._http._tcp." + web, qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: label other than svc/pod", qname: "web.demo.foo.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: other name under the zone", qname: "foo.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: headless without ready endpoints", qname: "empty-headless.demo.svc.cluster.local.", qtype: dns.TypeA,
			rcode: nx, soa: true},
		{row: "NXDOMAIN: SRV of headless without endpoints", qname: "_http._tcp.empty-headless.demo.svc.cluster.local.",
			qtype: dns.TypeSRV, rcode: nx, soa: true},
		{row: "NOERROR: ClusterIP without endpoints", qname: "idle.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"idle.demo.svc.cluster.local. A 10.96.0.50"}},
		{row: "NXDOMAIN: sub-name of ExternalName", qname: "x.search.demo.svc.cluster.local.", qtype: dns.TypeA, rcode: nx, soa: true},
		{row: "NXDOMAIN: SRV under ExternalName", qname: "_http._tcp.search.demo.svc.cluster.local.", qtype: dns.TypeSRV,
			rcode: nx, soa: true},
		{row: "SOA below apex, existing name: NODATA", qname: web, qtype: dns.TypeSOA, rcode: ok, soa: true},
		{row: "SOA below apex, absent name: NXDOMAIN", qname: "nope.demo.svc.cluster.local.", qtype: dns.TypeSOA, rcode: nx, soa: true},
		{row: "NS at apex", qname: "cluster.local.", qtype: dns.TypeNS, rcode: ok,
			answer: []string{"cluster.local. NS ns.dns.cluster.local."},
			extra:  []string{"ns.dns.cluster.local. A 169.254.20.10", "ns.dns.cluster.local. AAAA fd00::a"}},
		{row: "NODATA at a reverse name we own", qname: "10.0.96.10.in-addr.arpa.", qtype: dns.TypeA, rcode: ok, soa: true},
		{row: "reverse name we do not own", qname: "99.0.96.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: dns.RcodeRefused},
		{row: "NS target resolves", qname: "ns.dns.cluster.local.", qtype: dns.TypeA, rcode: ok,
			answer: []string{"ns.dns.cluster.local. A 169.254.20.10"}},
	}
	// Empty non-terminals: NODATA for every type.
	for _, ent := range []string{"cluster.local.", "svc.cluster.local.", "pod.cluster.local.", "demo.svc.cluster.local.",
		"default.svc.cluster.local.", "_tcp." + web, "_udp.dual.demo.svc.cluster.local.", "demo.pod.cluster.local."} {
		for _, qt := range everyType {
			if ent == "cluster.local." && (qt == dns.TypeNS || qt == dns.TypeSOA) {
				continue
			}
			cases = append(cases, lookupCase{row: "empty non-terminal NODATA", qname: ent, qtype: qt, rcode: ok, soa: true})
		}
	}
	fixtureZone(t, fixtureConfig(), func(t *testing.T, z *Zone) {
		runCases(t, z, cases)
		apex := z.Lookup("cluster.local.", dns.TypeSOA)
		serial := z.meta.Load().soaRR[0].(*dns.SOA).Serial
		checkAnswer(t, "SOA at apex", apex, ok, []string{fmt.Sprintf(soa, serial)}, false, "")
		if ttl := apex.Answer[0].Header().Ttl; ttl != 5 {
			t.Errorf("SOA TTL: got %d, want 5 (negative TTL)", ttl)
		}
		if ns := z.Lookup("10.0.96.10.in-addr.arpa.", dns.TypeA).Ns; len(ns) != 1 || ns[0].Header().Name != "in-addr.arpa." {
			t.Errorf("NODATA at a reverse name: authority got %v, want the in-addr.arpa. SOA", rrText(ns))
		}
		if ttl := z.Lookup("dns-version.cluster.local.", dns.TypeTXT).Answer[0].Header().Ttl; ttl != 28800 {
			t.Errorf("dns-version TTL: got %d, want 28800", ttl)
		}
		if ttl := z.Lookup(web, dns.TypeA).Answer[0].Header().Ttl; ttl != 5 {
			t.Errorf("service TTL: got %d, want 5", ttl)
		}
	})
}

// TestInZone: the domain and every name below it; reverse names only for
// IPs the zone knows.
func TestInZone(t *testing.T) {
	cases := []struct {
		qname string
		want  bool
	}{
		{"cluster.local.", true},
		{"nope.nope.svc.cluster.local.", true},
		{"WEB.demo.svc.Cluster.Local.", true},
		{"xcluster.local.", false},
		{"example.com.", false},
		{"10.0.96.10.in-addr.arpa.", true},   // ClusterIP
		{"5.1.244.10.in-addr.arpa.", true},   // ready endpoint
		{"9.3.244.10.in-addr.arpa.", false},  // not-ready endpoint
		{"1.1.168.192.in-addr.arpa.", false}, // unknown
		{"96.10.in-addr.arpa.", false},       // parent of known names
		{"0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", true},
	}
	fixtureZone(t, fixtureConfig(), func(t *testing.T, z *Zone) {
		for _, c := range cases {
			if got := z.InZone(c.qname); got != c.want {
				t.Errorf("InZone(%q): got %v, want %v", c.qname, got, c.want)
			}
		}
	})
}

// TestCaseHandling: mixed-case questions get lowercased owner names equal
// to the lowercased qname; mixed-case ExternalName targets are lowercased.
func TestCaseHandling(t *testing.T) {
	fixtureZone(t, fixtureConfig(), func(t *testing.T, z *Zone) {
		for _, q := range []string{"WEB.DEMO.SVC.CLUSTER.LOCAL.", "Web.Demo.Svc.Cluster.Local."} {
			got := z.Lookup(q, dns.TypeA)
			checkAnswer(t, q, got, ok, []string{"web.demo.svc.cluster.local. A 10.96.0.10"}, false, "")
			if owner := got.Answer[0].Header().Name; owner != strings.ToLower(q) {
				t.Errorf("%s: owner: got %q, want %q", q, owner, strings.ToLower(q))
			}
		}
		got := z.Lookup("_HTTP._TCP.web.demo.svc.cluster.local.", dns.TypeSRV)
		if len(got.Answer) != 1 {
			t.Errorf("upper-case SRV: got %d records, want 1", len(got.Answer))
		}
	})
}
