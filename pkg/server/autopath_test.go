package server

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

type fakePods map[netip.Addr]string

func (p fakePods) SearchNamespace(ip netip.Addr) (string, bool) {
	ns, ok := p[ip]
	return ns, ok
}

func TestAutopath(t *testing.T) {
	loop := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name       string
		pods       fakePods
		autopath   bool
		search     []string // the node's search list
		qname      string
		wantTarget string // "" means no autopath: the plain zone answer
		wantRcode  int
	}{
		{name: "external name through the whole path", pods: fakePods{loop: "default"}, autopath: true,
			qname: "api.example.com.default.svc.cluster.local.", wantTarget: "api.example.com.", wantRcode: dns.RcodeSuccess},
		{name: "service of another namespace", pods: fakePods{loop: "other"}, autopath: true,
			qname: "web.default.other.svc.cluster.local.", wantTarget: "web.default.svc.cluster.local.", wantRcode: dns.RcodeSuccess},
		{name: "first expansion exists: normal answer", pods: fakePods{loop: "default"}, autopath: true,
			qname: "web.default.svc.cluster.local.", wantRcode: dns.RcodeSuccess},
		{name: "unknown client: normal answer", pods: fakePods{}, autopath: true,
			qname: "api.example.com.default.svc.cluster.local.", wantRcode: dns.RcodeNameError},
		{name: "another namespace's first expansion: normal answer", pods: fakePods{loop: "kube-system"}, autopath: true,
			qname: "api.example.com.default.svc.cluster.local.", wantRcode: dns.RcodeNameError},
		// kubelet drops a search domain over 253 characters from the pod's
		// list, so the pod's next name after the cluster's is under corp.example.
		{name: "node search list cut as kubelet cuts it", pods: fakePods{loop: "default"}, autopath: true,
			search: []string{strings.Repeat("a", 250) + ".example", "corp.example"},
			qname:  "api.default.svc.cluster.local.", wantTarget: "api.corp.example.", wantRcode: dns.RcodeSuccess},
		{name: "autopath off", pods: fakePods{loop: "default"}, autopath: false,
			qname: "api.example.com.default.svc.cluster.local.", wantRcode: dns.RcodeNameError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, addr := startServerDeps(t, Config{Autopath: tc.autopath, AutopathSearch: tc.search}, Deps{Zone: &fakeZone{}, Resolver: &fakeResolver{}, Pods: tc.pods})
			for i := 0; i < 2; i++ { // the second time from the zone memo
				r := exchange(t, addr.String(), tc.qname, dns.TypeA)
				if r.Rcode != tc.wantRcode {
					t.Fatalf("rcode: got %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.wantRcode])
				}
				if tc.wantTarget == "" {
					if len(r.Answer) > 0 && r.Answer[0].Header().Rrtype == dns.TypeCNAME {
						t.Errorf("got an autopath CNAME %v, want the plain answer", r.Answer[0])
					}
					continue
				}
				if len(r.Answer) < 2 {
					t.Fatalf("got %v, want CNAME then records", r.Answer)
				}
				c, ok := r.Answer[0].(*dns.CNAME)
				if !ok || c.Hdr.Name != tc.qname || c.Target != tc.wantTarget {
					t.Errorf("got %v, want %s CNAME %s", r.Answer[0], tc.qname, tc.wantTarget)
				}
				if r.Answer[1].Header().Name != tc.wantTarget || r.Answer[1].Header().Rrtype != dns.TypeA {
					t.Errorf("got %v after the CNAME, want %s's A", r.Answer[1], tc.wantTarget)
				}
			}
			_ = s
		})
	}
}

func TestClientQPSLimit(t *testing.T) {
	_, addr := startServerDeps(t, Config{ClientQPS: 1, ClientBurst: 3}, Deps{Resolver: &fakeResolver{}})
	var refused int
	for i := 0; i < 6; i++ {
		if r := exchange(t, addr.String(), "x.example.", dns.TypeA); r.Rcode == dns.RcodeRefused {
			refused++
		}
	}
	// Burst 3 at 1/s: six queries within well under a second leave at least two refused.
	if refused < 2 || refused > 3 {
		t.Errorf("refused %d of 6 queries with burst 3, want 2 or 3", refused)
	}
}

func TestClientLimiterRefillsAndStaysBounded(t *testing.T) {
	l := newClientLimiter(10, 2, 4)
	now := time.Unix(1000, 0)
	a := netip.MustParseAddr("10.0.0.1")
	for i, want := range []bool{true, true, false} {
		if got := l.allow(a, now); got != want {
			t.Fatalf("burst of 2, query %d: got allowed %v, want %v", i+1, got, want)
		}
	}
	if !l.allow(a, now.Add(100*time.Millisecond)) {
		t.Error("after 100ms at 10/s: want a token back")
	}
	for i := 0; i < 100; i++ {
		l.allow(netip.AddrFrom4([4]byte{10, 1, byte(i), 1}), now)
	}
	if n := len(l.buckets); n > 4 {
		t.Errorf("buckets: got %d, want at most 4", n)
	}
}
