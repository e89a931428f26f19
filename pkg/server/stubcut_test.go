package server

import (
	"testing"

	"github.com/miekg/dns"
)

// TestMostSpecificZoneWins: a stub domain below the cluster domain or a
// reverse tree takes its names from the zone (forwarded, then cached); one
// equal to the cluster domain, or a name beside the stub, stays the zone's;
// SetStubDomains changes it live.
func TestMostSpecificZoneWins(t *testing.T) {
	z := &fakeZone{}
	f := &fakeResolver{}
	cfg := Config{StubDomains: []string{"other.svc.cluster.local.", "cluster.local.", "96.10.in-addr.arpa."}}
	s, addr := startServer(t, cfg, z, f)
	a := addr.String()

	cases := []struct {
		name      string
		qtype     uint16
		forwarded bool
	}{
		{"web.other.svc.cluster.local.", dns.TypeA, true},
		{"WEB.Other.svc.cluster.local.", dns.TypeA, true}, // case does not matter
		{"other.svc.cluster.local.", dns.TypeA, true},     // the stub's apex
		{"1.0.96.10.in-addr.arpa.", dns.TypePTR, true},
		{"web.default.svc.cluster.local.", dns.TypeA, false},
		{"web.xother.svc.cluster.local.", dns.TypeA, false}, // label boundary
	}
	for _, c := range cases {
		before, lookups := f.calls.Load(), z.lookups.Load()
		r := exchange(t, a, c.name, c.qtype)
		gotFwd := f.calls.Load() > before || (z.lookups.Load() == lookups && !r.Authoritative)
		if gotFwd != c.forwarded {
			t.Errorf("%s: forwarded %v (authoritative %v, rcode %s), want %v", c.name, gotFwd, r.Authoritative, dns.RcodeToString[r.Rcode], c.forwarded)
		}
		if c.forwarded && (r.Authoritative || len(r.Answer) != 1) {
			t.Errorf("%s: got %v, want the stub's one-record answer", c.name, r)
		}
	}
	// The second ask of a forwarded name is a cache hit on the fast path.
	calls := f.calls.Load()
	if r := exchange(t, a, "web.other.svc.cluster.local.", dns.TypeA); len(r.Answer) != 1 || f.calls.Load() != calls {
		t.Errorf("cached stub answer: got %d records, %d more resolves; want 1 record from the cache", len(r.Answer), f.calls.Load()-calls)
	}

	if err := s.SetStubDomains([]string{"cluster.local.", "corp.example."}); err != nil {
		t.Fatal(err)
	}
	lookups := z.lookups.Load()
	r := exchange(t, a, "web.other.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || !r.Authoritative || z.lookups.Load() == lookups {
		t.Errorf("after the stub domain was removed: got rcode %s, authoritative %v; want the zone's NXDOMAIN", dns.RcodeToString[r.Rcode], r.Authoritative)
	}
	if err := s.SetStubDomains([]string{"Other.svc.cluster.local"}); err != nil {
		t.Fatal(err)
	}
	calls = f.calls.Load()
	if r := exchange(t, a, "db.other.svc.cluster.local.", dns.TypeA); r.Authoritative || f.calls.Load() != calls+1 {
		t.Errorf("after the stub domain was added back: authoritative %v, %d resolves; want forwarded once", r.Authoritative, f.calls.Load()-calls)
	}
}

func TestCutsZone(t *testing.T) {
	cases := []struct {
		stub string
		want bool
	}{
		{"other.svc.cluster.local.", true},
		{"my.cluster.local.", true},
		{"cluster.local.", false},
		{"local.", false},
		{"xcluster.local.", false},
		{"10.in-addr.arpa.", true},
		{"in-addr.arpa.", false},
		{"8.b.d.0.1.0.0.2.ip6.arpa.", true},
		{"corp.example.", false},
	}
	for _, c := range cases {
		if got := cutsZone("cluster.local.", c.stub); got != c.want {
			t.Errorf("cutsZone(cluster.local., %s): got %v, want %v", c.stub, got, c.want)
		}
	}
}
