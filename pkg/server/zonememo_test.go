package server

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// scopedZone is a stateful zone whose names each have their own Version,
// as kubezone's do: a.default.svc and b.default.svc are services with one A
// record each, c.default.svc an ExternalName service pointing at b.
type scopedZone struct {
	mu      sync.Mutex        // guards following
	gen     uint64            // bumped by every change
	vers    map[string]uint64 // name (wire form) → its version
	addrs   map[string]net.IP // service name → its address
	lookups map[string]int    // name → lookups
}

func newScopedZone() *scopedZone {
	return &scopedZone{vers: map[string]uint64{}, lookups: map[string]int{}, addrs: map[string]net.IP{
		"a.default.svc.cluster.local.": net.IPv4(10, 96, 0, 1),
		"b.default.svc.cluster.local.": net.IPv4(10, 96, 0, 2),
	}}
}

func (z *scopedZone) InZone(qname string) bool { return dns.IsSubDomain("cluster.local.", qname) }

func (z *scopedZone) Generation() uint64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.gen
}

func (z *scopedZone) Version(name []byte) uint64 {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.vers[string(name)]
}

func (z *scopedZone) Lookup(qname string, _ uint16) ZoneAnswer {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.lookups[qname]++
	a := func(name string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: z.addrs[name]}
	}
	switch qname {
	case "a.default.svc.cluster.local.", "b.default.svc.cluster.local.":
		return ZoneAnswer{Answer: []dns.RR{a(qname)}}
	case "c.default.svc.cluster.local.":
		const target = "b.default.svc.cluster.local."
		return ZoneAnswer{Answer: []dns.RR{
			&dns.CNAME{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 5}, Target: target},
			a(target)}}
	}
	return ZoneAnswer{Rcode: dns.RcodeNameError}
}

// set gives service name a new address: a change of name alone.
func (z *scopedZone) set(tb testing.TB, name string, ip net.IP) {
	tb.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.gen++
	z.addrs[name] = ip
	z.vers[string(buf[:n])] = z.gen
}

func (z *scopedZone) lookupsOf(name string) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.lookups[name]
}

// TestZoneMemoKeepsOtherNames: a change to service a leaves b's memoized
// answer in place (the memo used to start over on any change of the zone),
// and a's new answer is served at once, never the memoized one. An answer
// that follows a CNAME to another name of the zone is rebuilt on any change.
func TestZoneMemoKeepsOtherNames(t *testing.T) {
	z := newScopedZone()
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Zone: z, Resolver: &fakeResolver{}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	query := func(name string) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		pkt, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := s.Query(context.Background(), pkt, netip.MustParseAddr("10.0.0.1"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatalf("%s: unpacking the reply: %v", name, err)
		}
		return r
	}
	addrOf := func(r *dns.Msg) string {
		if len(r.Answer) == 0 {
			return "none"
		}
		return r.Answer[len(r.Answer)-1].(*dns.A).A.String()
	}
	const a, b, c = "a.default.svc.cluster.local.", "b.default.svc.cluster.local.", "c.default.svc.cluster.local."
	for range 2 {
		query(a)
		query(b)
		query(c)
	}
	for _, name := range []string{a, b, c} {
		if got := z.lookupsOf(name); got != 1 {
			t.Fatalf("%s: %d lookups for two queries, want 1 (memoized)", name, got)
		}
	}

	z.set(t, a, net.IPv4(10, 96, 1, 1))
	if got := addrOf(query(a)); got != "10.96.1.1" {
		t.Errorf("a after its change: got %s, want 10.96.1.1 at once", got)
	}
	if got := addrOf(query(b)); got != "10.96.0.2" {
		t.Errorf("b: got %s, want 10.96.0.2", got)
	}
	if got := z.lookupsOf(b); got != 1 {
		t.Errorf("b after a change of a: %d lookups, want 1 (still memoized)", got)
	}
	if got := z.lookupsOf(a); got != 2 {
		t.Errorf("a after its change: %d lookups, want 2", got)
	}

	z.set(t, b, net.IPv4(10, 96, 1, 2))
	if got := addrOf(query(c)); got != "10.96.1.2" {
		t.Errorf("c (CNAME to b) after a change of b: got %s, want 10.96.1.2 at once", got)
	}
	if got := addrOf(query(a)); got != "10.96.1.1" || z.lookupsOf(a) != 2 {
		t.Errorf("a after a change of b: got %s after %d lookups, want 10.96.1.1 still memoized (2)", got, z.lookupsOf(a))
	}
}
