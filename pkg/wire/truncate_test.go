package wire

import (
	"fmt"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// headlessReply is the answer for a headless Service with n endpoints: n A
// records for one name, as the cluster zone builds it.
func headlessReply(t testing.TB, name string, n int) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetReply(query(name, dns.TypeA))
	r.Authoritative = true
	for i := range n {
		r.Answer = append(r.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
			A:   net.IPv4(10, 244, byte(i/250), byte(i%250+1)),
		})
	}
	return r
}

// srvReply is a SRV answer with its targets' A records in the additional
// section and an NS in the authority section: records of all three
// sections, so that a cut in each is seen.
func srvReply(t testing.TB, n int) *dns.Msg {
	t.Helper()
	name := "_http._tcp.web.demo.svc.cluster.local."
	r := new(dns.Msg)
	r.SetReply(query(name, dns.TypeSRV))
	r.Ns = append(r.Ns, &dns.NS{Hdr: dns.RR_Header{Name: "cluster.local.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 5}, Ns: "ns.dns.cluster.local."})
	for i := range n {
		target := fmt.Sprintf("web-%d.web.demo.svc.cluster.local.", i)
		r.Answer = append(r.Answer, &dns.SRV{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 5},
			Priority: 0, Weight: 10, Port: 80, Target: target})
		r.Extra = append(r.Extra, &dns.A{Hdr: dns.RR_Header{Name: target, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5},
			A: net.IPv4(10, 244, 1, byte(i+1))})
	}
	return r
}

// TestTruncationKeepsWholeRecords: a UDP reply too large keeps as many whole
// records as fit, in order, with TC set: the records dns.Msg.Truncate (and so
// CoreDNS) keeps. 29 A records of a 300-endpoint headless Service fit 512
// bytes, 73 fit 1232.
func TestTruncationKeepsWholeRecords(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reply    *dns.Msg
		edns     bool
		max      int
		wantAns  int // -1: whatever dns.Msg.Truncate keeps
		wantTC   bool
		wantSent int // records of all sections, -1: not checked
	}{
		{name: "headless 300 no edns 512", reply: headlessReply(t, "db.e2e.svc.cluster.local.", 300), max: 512, wantAns: 29, wantTC: true},
		{name: "headless 300 edns 1232", reply: headlessReply(t, "db.e2e.svc.cluster.local.", 300), edns: true, max: 1232, wantAns: 73, wantTC: true},
		{name: "headless 300 edns 512", reply: headlessReply(t, "db.e2e.svc.cluster.local.", 300), edns: true, max: 512, wantAns: -1, wantTC: true},
		{name: "headless 300 edns 65535 fits", reply: headlessReply(t, "db.e2e.svc.cluster.local.", 300), edns: true, max: 65535, wantAns: 300},
		{name: "srv cut in the answer", reply: srvReply(t, 40), max: 512, wantAns: -1, wantTC: true},
		{name: "srv cut in the additional", reply: srvReply(t, 8), max: 512, wantAns: 8, wantTC: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Pack(tc.reply)
			if err != nil {
				t.Fatal(err)
			}
			req := query(tc.reply.Question[0].Name, tc.reply.Question[0].Qtype)
			req.Id = 7
			if tc.edns {
				req.SetEdns0(uint16(tc.max), false)
			}
			var q Query
			if err := Parse(pack(t, req), &q); err != nil {
				t.Fatal(err)
			}
			out := p.AppendReply(nil, &q, TTLMode{}, tc.max)
			if len(out) > tc.max {
				t.Errorf("got %d bytes, want at most %d", len(out), tc.max)
			}
			var got dns.Msg
			if err := got.Unpack(out); err != nil {
				t.Fatalf("unpacking: %v", err)
			}

			// What dns.Msg.Truncate keeps of the same reply.
			want := tc.reply.Copy()
			want.Id = 7
			if tc.edns {
				want.SetEdns0(DefaultUDPSize, false)
			}
			want.Truncate(tc.max)
			if tc.wantAns >= 0 && len(want.Answer) != tc.wantAns {
				t.Fatalf("dns.Msg.Truncate kept %d answers, the test wants %d: the case is wrong", len(want.Answer), tc.wantAns)
			}
			if got.Truncated != tc.wantTC || want.Truncated != tc.wantTC {
				t.Errorf("TC: got %v, dns.Msg.Truncate %v, want %v", got.Truncated, want.Truncated, tc.wantTC)
			}
			for _, sec := range []struct {
				name      string
				got, want []dns.RR
			}{{"answer", got.Answer, want.Answer}, {"authority", got.Ns, want.Ns}, {"additional", got.Extra, want.Extra}} {
				if len(sec.got) != len(sec.want) {
					t.Errorf("%s: got %d records, want %d (as dns.Msg.Truncate)", sec.name, len(sec.got), len(sec.want))
					continue
				}
				for i := range sec.got {
					if sec.got[i].String() != sec.want[i].String() {
						t.Errorf("%s %d: got %s, want %s", sec.name, i, sec.got[i], sec.want[i])
					}
				}
			}
			if (got.IsEdns0() != nil) != tc.edns {
				t.Errorf("OPT present: got %v, want %v", got.IsEdns0() != nil, tc.edns)
			}
		})
	}
}
