package server

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// TestSuppressAAAA: AAAA queries under a listed domain get NOERROR, AA and
// no records without the zone or the resolver being asked; A queries and
// AAAA elsewhere are answered as before; "." suppresses every AAAA.
func TestSuppressAAAA(t *testing.T) {
	cases := []struct {
		domains []string
		name    string
		qtype   uint16
		nodata  bool
	}{
		{[]string{"cluster.local", "Example.ORG."}, "web.default.svc.cluster.local.", dns.TypeAAAA, true},
		{[]string{"cluster.local", "Example.ORG."}, "WWW.example.org.", dns.TypeAAAA, true},
		{[]string{"cluster.local"}, "www.example.net.", dns.TypeAAAA, false},
		{[]string{"cluster.local"}, "web.default.svc.cluster.local.", dns.TypeA, false},
		{[]string{"cluster.local"}, "www.xcluster.local.", dns.TypeAAAA, false},
		{[]string{"."}, "www.example.net.", dns.TypeAAAA, true},
		{nil, "www.example.net.", dns.TypeAAAA, false},
	}
	for _, c := range cases {
		z, f := &fakeZone{}, &fakeResolver{}
		_, addr := startServer(t, Config{SuppressAAAA: c.domains}, z, f)
		r := exchange(t, addr.String(), c.name, c.qtype)
		asked := z.lookups.Load() + f.calls.Load()
		got := r.Rcode == dns.RcodeSuccess && len(r.Answer) == 0 && len(r.Ns) == 0 && r.Authoritative && asked == 0
		if got != c.nodata {
			t.Errorf("%v %s %s: got rcode %s, %d answers, AA %v, %d lookups; want suppressed %v",
				c.domains, c.name, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], len(r.Answer), r.Authoritative, asked, c.nodata)
		}
		if c.nodata && (r.Question[0].Name != c.name || !r.RecursionAvailable) {
			t.Errorf("%s: got question %v, RA %v; want the question echoed and RA", c.name, r.Question, r.RecursionAvailable)
		}
	}
}

func TestSuppressAAAAValidate(t *testing.T) {
	for _, bad := range []string{"", "a..b", "bad name", "a,b"} {
		c := Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}, SuppressAAAA: []string{bad}}
		if err := c.Validate(); err == nil {
			t.Errorf("SuppressAAAA %q: got no error", bad)
		}
	}
}
