package server

import (
	"fmt"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// headlessZone answers db.default.svc.cluster.local. with n A records in
// a fixed (sorted) order, as the zone answers a headless Service.
type headlessZone struct{ n int }

func (z headlessZone) InZone(qname string) bool { return dns.IsSubDomain("cluster.local.", qname) }
func (z headlessZone) Generation() uint64       { return 1 }
func (z headlessZone) Version(_ []byte) uint64  { return 1 }
func (z headlessZone) Lookup(qname string, _ uint16) ZoneAnswer {
	if qname != "db.default.svc.cluster.local." {
		return ZoneAnswer{Rcode: dns.RcodeNameError}
	}
	var ans []dns.RR
	for i := range z.n {
		ans = append(ans, &dns.A{Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(10, 1, 0, byte(i+1))})
	}
	return ZoneAnswer{Answer: ans}
}

// firstAddrs asks name n times and counts which address came first.
func firstAddrs(t *testing.T, addr, name string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		r := exchange(t, addr, name, dns.TypeA)
		if len(r.Answer) == 0 {
			t.Fatalf("%s: no answer: %v", name, r)
		}
		seen[r.Answer[0].(*dns.A).A.String()]++
	}
	return seen
}

// TestLoadBalance: with LoadBalance the zone's memoized headless answer
// and a cached upstream answer both come out in changing orders (every
// address first at some point); without it each keeps one order.
func TestLoadBalance(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("loadbalance=%v", on), func(t *testing.T) {
			f := &fakeResolver{records: 4}
			_, addr := startServer(t, Config{LoadBalance: on}, headlessZone{n: 5}, f)
			a := addr.String()
			zone := firstAddrs(t, a, "db.default.svc.cluster.local.", 200)
			cached := firstAddrs(t, a, "www.example.org.", 200)
			if f.calls.Load() != 1 {
				t.Fatalf("upstream asked %d times, want 1 (then cache hits)", f.calls.Load())
			}
			wantZone, wantCached := 5, 4
			if !on {
				wantZone, wantCached = 1, 1
			}
			if len(zone) != wantZone || len(cached) != wantCached {
				t.Errorf("distinct first addresses: zone %d (%v), cache %d (%v); want %d and %d", len(zone), zone, len(cached), cached, wantZone, wantCached)
			}
		})
	}
}

// BenchmarkHitPathLoadBalance is BenchmarkHitPath (a cache hit) and
// BenchmarkZonePath (a memoized headless answer) with the address shuffle
// off and on, for one and four address records: the cost of loadbalance
// on the hit path.
func BenchmarkHitPathLoadBalance(b *testing.B) {
	for _, n := range []int{1, 4} {
		for _, on := range []bool{false, true} {
			cfg := Config{LoadBalance: on}
			b.Run(fmt.Sprintf("cache/records=%d/loadbalance=%v", n, on), func(b *testing.B) {
				benchFastCfg(b, cfg, &fakeResolver{records: n}, nil, "www.example.org.")
			})
			b.Run(fmt.Sprintf("zone/records=%d/loadbalance=%v", n, on), func(b *testing.B) {
				benchFastCfg(b, cfg, &fakeResolver{}, headlessZone{n: n}, "db.default.svc.cluster.local.")
			})
		}
	}
}
