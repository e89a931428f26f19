package server

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// fakeZone serves one service name and an ExternalName pointing out of zone.
type fakeZone struct {
	gen     atomic.Uint64
	lookups atomic.Int64
}

func (z *fakeZone) InZone(qname string) bool {
	return dns.IsSubDomain("cluster.local.", qname) || qname == "1.0.96.10.in-addr.arpa."
}

func (z *fakeZone) Generation() uint64      { return z.gen.Load() }
func (z *fakeZone) Version(_ []byte) uint64 { return z.gen.Load() }

func (z *fakeZone) Lookup(qname string, _ uint16) ZoneAnswer {
	z.lookups.Add(1)
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "cluster.local.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 5},
		Ns: "ns.dns.cluster.local.", Mbox: "hostmaster.cluster.local.", Serial: 1, Minttl: 5}
	switch qname {
	case "web.default.svc.cluster.local.":
		return ZoneAnswer{Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 96, 0, 1)}}}
	case "ext.default.svc.cluster.local.":
		return ZoneAnswer{Answer: []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: "db.example."}},
			Chase: "db.example."}
	case "1.0.96.10.in-addr.arpa.":
		return ZoneAnswer{Answer: []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 5}, Ptr: "web.default.svc.cluster.local."}}}
	}
	return ZoneAnswer{Rcode: dns.RcodeNameError, Ns: []dns.RR{soa}}
}

func exchange(t *testing.T, addr string, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := new(dns.Client).Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func TestZoneAnswersMemoizedAndCasePreserved(t *testing.T) {
	z := &fakeZone{}
	f := &fakeResolver{}
	_, addr := startServer(t, Config{}, z, f)

	for i := 0; i < 3; i++ {
		r := exchange(t, addr.String(), "WEB.default.SVC.cluster.local.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 {
			t.Fatalf("got %v", r)
		}
		if got := r.Answer[0].Header().Name; got != "WEB.default.SVC.cluster.local." {
			t.Errorf("owner: got %q, want the question's case", got)
		}
	}
	if got := z.lookups.Load(); got != 1 {
		t.Errorf("zone lookups for three identical queries: got %d, want 1 (memoized)", got)
	}
	z.gen.Add(1)
	exchange(t, addr.String(), "web.default.svc.cluster.local.", dns.TypeA)
	if got := z.lookups.Load(); got != 2 {
		t.Errorf("zone lookups after a generation change: got %d, want 2", got)
	}
	if f.calls.Load() != 0 {
		t.Errorf("resolver called %d times for in-zone names, want 0", f.calls.Load())
	}

	r := exchange(t, addr.String(), "nope.default.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Errorf("unknown service: got rcode %s, %d authority records; want NXDOMAIN with SOA", dns.RcodeToString[r.Rcode], len(r.Ns))
	}
}

func TestZoneChaseAndReverse(t *testing.T) {
	z := &fakeZone{}
	f := &fakeResolver{}
	_, addr := startServer(t, Config{}, z, f)
	r := exchange(t, addr.String(), "ext.default.svc.cluster.local.", dns.TypeA)
	if len(r.Answer) != 2 || r.Answer[0].Header().Rrtype != dns.TypeCNAME || r.Answer[1].Header().Name != "db.example." {
		t.Fatalf("ExternalName: got %v, want the CNAME then db.example.'s A", r.Answer)
	}
	r = exchange(t, addr.String(), "1.0.96.10.in-addr.arpa.", dns.TypePTR)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != "web.default.svc.cluster.local." {
		t.Errorf("owned reverse name: got %v", r.Answer)
	}
	calls := f.calls.Load()
	exchange(t, addr.String(), "9.9.9.9.in-addr.arpa.", dns.TypePTR)
	if f.calls.Load() != calls+1 {
		t.Errorf("a reverse name the zone does not own must go upstream")
	}
	exchange(t, addr.String(), "9.9.9.9.in-addr.arpa.", dns.TypePTR)
	if f.calls.Load() != calls+1 {
		t.Errorf("a cached reverse name the zone does not own must be a cache hit, got another resolve")
	}
}

// BenchmarkHitPath measures the inline path of the UDP loop for a cache hit:
// parse, lookup, and write the reply into the loop's buffer.
func BenchmarkHitPath(b *testing.B) {
	benchFast(b, &fakeResolver{}, nil, "www.example.org.")
}

// BenchmarkZonePath measures the same for a memoized cluster-zone answer.
func BenchmarkZonePath(b *testing.B) {
	benchFast(b, &fakeResolver{}, &fakeZone{}, "web.default.svc.cluster.local.")
}
