package wire

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// upstreamReplies are replies in the shapes upstreams send, packed by
// miekg/dns with compression as a resolver would.
func upstreamReplies(t testing.TB) map[string][]byte {
	t.Helper()
	soa := func(ttl, minimum uint32) dns.RR {
		return &dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
			Ns: "ns1.example.org.", Mbox: "hostmaster.example.org.", Serial: 7, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minimum}
	}
	a := func(name string, ttl uint32, ip string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip)}
	}
	mk := func(name string, qtype uint16, rcode int, edns bool, ans, ns, extra []dns.RR) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = 0x4242
		m.Response, m.RecursionAvailable, m.Rcode = true, true, rcode
		m.Answer, m.Ns, m.Extra = ans, ns, extra
		if edns {
			m.SetEdns0(1232, false)
		}
		m.Compress = true
		return pack(t, m)
	}
	return map[string][]byte{
		"A": mk("www.Example.org.", dns.TypeA, dns.RcodeSuccess, true,
			[]dns.RR{a("www.Example.org.", 300, "192.0.2.1"), a("www.Example.org.", 60, "192.0.2.2")}, nil, nil),
		"AAAA": mk("v6.example.org.", dns.TypeAAAA, dns.RcodeSuccess, false,
			[]dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: "v6.example.org.", Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: 90}, AAAA: net.ParseIP("2001:db8::1")}}, nil, nil),
		"CNAME chain": mk("alias.example.org.", dns.TypeA, dns.RcodeSuccess, true, []dns.RR{
			&dns.CNAME{Hdr: dns.RR_Header{Name: "alias.example.org.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 120}, Target: "real.example.org."},
			a("real.example.org.", 30, "192.0.2.9"),
		}, nil, nil),
		"NODATA":   mk("www.example.org.", dns.TypeAAAA, dns.RcodeSuccess, true, nil, []dns.RR{soa(3600, 300)}, nil),
		"NXDOMAIN": mk("nope.example.org.", dns.TypeA, dns.RcodeNameError, true, nil, []dns.RR{soa(900, 1800)}, nil),
		"SERVFAIL": mk("broken.example.org.", dns.TypeA, dns.RcodeServerFailure, false, nil, nil, nil),
		"MX SRV TXT PTR NS": mk("mix.example.org.", dns.TypeANY, dns.RcodeSuccess, true, []dns.RR{
			&dns.MX{Hdr: dns.RR_Header{Name: "mix.example.org.", Rrtype: dns.TypeMX, Class: dns.ClassINET, Ttl: 100}, Preference: 10, Mx: "mail.example.org."},
			&dns.SRV{Hdr: dns.RR_Header{Name: "mix.example.org.", Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 100}, Priority: 1, Weight: 2, Port: 53, Target: "srv.example.org."},
			&dns.TXT{Hdr: dns.RR_Header{Name: "mix.example.org.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 100}, Txt: []string{"v=spf1 -all", ""}},
			&dns.PTR{Hdr: dns.RR_Header{Name: "mix.example.org.", Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 100}, Ptr: "host.example.org."},
		}, []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 200}, Ns: "ns1.example.org."}},
			[]dns.RR{a("ns1.example.org.", 200, "192.0.2.53")}),
	}
}

func TestScanUpstreamMatchesUnpack(t *testing.T) {
	for name, msg := range upstreamReplies(t) {
		t.Run(name, func(t *testing.T) {
			u, ok := ScanUpstream(msg)
			if !ok {
				t.Fatal("ScanUpstream refused a plain reply")
			}
			m := new(dns.Msg)
			if err := m.Unpack(msg); err != nil {
				t.Fatal(err)
			}
			if u.Rcode != m.Rcode || u.Answers != len(m.Answer) || u.Type != m.Question[0].Qtype {
				t.Errorf("scanned rcode %d answers %d type %d, unpacked %d %d %d", u.Rcode, u.Answers, u.Type, m.Rcode, len(m.Answer), m.Question[0].Qtype)
			}
			key, err := NewKey(m.Question[0].Name, m.Question[0].Qtype, m.Question[0].Qclass, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if !u.QuestionIs(key.Name, key.Type, key.Class) {
				t.Errorf("QuestionIs(%q) = false", key.PresentationName())
			}
			if u.QuestionIs(key.Name, key.Type+1, key.Class) {
				t.Error("QuestionIs ignores the type")
			}
			for _, clamp := range []uint32{0, 45} {
				assertSamePacked(t, msg, &u, clamp)
			}
		})
	}
}

// assertSamePacked checks that PackUpstream stores msg as PackOwned stores
// the unpacked msg: same records, TTLs, rcode and flags, and the same
// reply for a query in another case.
func assertSamePacked(t testing.TB, msg []byte, u *Upstream, clamp uint32) {
	t.Helper()
	got := PackUpstream(msg, u, clamp, 0)
	m := new(dns.Msg)
	if err := m.Unpack(msg); err != nil {
		t.Fatalf("ScanUpstream took a reply miekg/dns refuses: %v", err)
	}
	if clamp > 0 {
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if h := rr.Header(); h.Rrtype != dns.TypeOPT {
					h.Ttl = min(h.Ttl, clamp)
				}
			}
		}
	}
	want, err := PackOwned(m, 0)
	if err != nil {
		t.Fatalf("PackOwned: %v", err)
	}
	if got.MinTTL() != want.MinTTL() || got.Records() != want.Records() || got.Rcode() != want.Rcode() {
		t.Errorf("clamp %d: minTTL/records/rcode %d/%d/%d, PackOwned %d/%d/%d", clamp,
			got.MinTTL(), got.Records(), got.Rcode(), want.MinTTL(), want.Records(), want.Rcode())
	}
	gn, gt, gc := got.Question()
	wn, wt, wc := want.Question()
	if string(gn) != string(wn) || gt != wt || gc != wc {
		t.Errorf("question %q/%d/%d, PackOwned %q/%d/%d", gn, gt, gc, wn, wt, wc)
	}
	// A query in upper case, with EDNS, and TTLs aged by 7 s.
	name := strings.ToUpper(m.Question[0].Name)
	qm := new(dns.Msg)
	qm.SetQuestion(name, m.Question[0].Qtype)
	qm.Question[0].Qclass = m.Question[0].Qclass
	qm.SetEdns0(1232, true)
	qm.Id = 0x1234
	var q Query
	if err := Parse(pack(t, qm), &q); err != nil {
		t.Fatal(err)
	}
	mode := TTLMode{Elapsed: 7}
	g, w := new(dns.Msg), new(dns.Msg)
	if err := g.Unpack(got.AppendReply(nil, &q, mode, dns.MaxMsgSize)); err != nil {
		t.Fatalf("PackUpstream's reply does not unpack: %v", err)
	}
	if err := w.Unpack(want.AppendReply(nil, &q, mode, dns.MaxMsgSize)); err != nil {
		t.Fatal(err)
	}
	// Names in rdata may differ in case: the upstream's compression can
	// point them into the question, which takes the client's case. Owner
	// names equal to the question must take the client's case in both.
	if !strings.EqualFold(g.String(), w.String()) {
		t.Errorf("clamp %d: reply differs\nPackUpstream:\n%s\nPackOwned:\n%s", clamp, g, w)
	}
	for i, sec := range [][]dns.RR{g.Answer, g.Ns, g.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); strings.EqualFold(h.Name, name) && h.Name != name {
				t.Errorf("section %d: owner %q, want the query's %q", i, h.Name, name)
			}
		}
	}
}

func TestScanUpstreamRefuses(t *testing.T) {
	base := upstreamReplies(t)["A"]
	edit := func(f func(m *dns.Msg)) []byte {
		m := new(dns.Msg)
		if err := m.Unpack(base); err != nil {
			t.Fatal(err)
		}
		f(m)
		m.Compress = true
		return pack(t, m)
	}
	cases := map[string][]byte{
		"empty":         nil,
		"short":         base[:HeaderLen-1],
		"query":         func() []byte { b := append([]byte(nil), base...); b[2] &^= 0x80; return b }(),
		"truncated":     edit(func(m *dns.Msg) { m.Truncated = true }),
		"cut":           base[:len(base)-3],
		"trailing byte": append(append([]byte(nil), base...), 0),
		"two questions": edit(func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }),
		"extended rcode": edit(func(m *dns.Msg) {
			m.Rcode = dns.RcodeBadVers
		}),
		"RRSIG": edit(func(m *dns.Msg) {
			m.Answer = append(m.Answer, &dns.RRSIG{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 5},
				TypeCovered: dns.TypeA, Algorithm: 13, SignerName: "example.org.", Signature: "AAAA"})
		}),
		"OPT not last": edit(func(m *dns.Msg) {
			m.Extra = append(m.Extra, &dns.A{Hdr: dns.RR_Header{Name: "x.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.IPv4(192, 0, 2, 3)})
		}),
		"owner spelled out": edit(func(m *dns.Msg) { m.Compress = false }),
	}
	// edit packs with compression; "owner spelled out" needs it off.
	m := new(dns.Msg)
	if err := m.Unpack(base); err != nil {
		t.Fatal(err)
	}
	cases["owner spelled out"] = pack(t, m)
	// An A record with 5 bytes of rdata.
	bad := append([]byte(nil), base...)
	u, ok := ScanUpstream(bad)
	if !ok {
		t.Fatal("base reply refused")
	}
	rdlen := u.qEnd + 2 + 8 // first answer: pointer, type, class, ttl, then rdlength
	binary.BigEndian.PutUint16(bad[rdlen:], 5)
	cases["A rdlength 5"] = bad
	// A forward compression pointer in the first answer's owner.
	fwd := append([]byte(nil), base...)
	binary.BigEndian.PutUint16(fwd[u.qEnd:], 0xC000|uint16(u.qEnd+4))
	cases["forward pointer"] = fwd

	for name, msg := range cases {
		if _, ok := ScanUpstream(msg); ok {
			t.Errorf("%s: ScanUpstream took it", name)
		}
	}
}

// FuzzScanUpstream checks that what ScanUpstream takes, miekg/dns unpacks,
// and that PackUpstream stores it as PackOwned stores the unpacked reply.
func FuzzScanUpstream(f *testing.F) {
	for _, msg := range upstreamReplies(f) {
		f.Add(msg)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		u, ok := ScanUpstream(msg)
		if !ok {
			return
		}
		if len(u.Name) > MaxNameLen {
			t.Fatalf("question name of %d bytes", len(u.Name))
		}
		assertSamePacked(t, msg, &u, 0)
		assertSamePacked(t, msg, &u, 1)
	})
}

func BenchmarkPackUpstream(b *testing.B) {
	msg := upstreamReplies(b)["NODATA"]
	b.ReportAllocs()
	for b.Loop() {
		u, ok := ScanUpstream(msg)
		if !ok {
			b.Fatal("refused")
		}
		_ = PackUpstream(msg, &u, 300, 0)
	}
}

func BenchmarkPackOwnedFromWire(b *testing.B) {
	msg := upstreamReplies(b)["NODATA"]
	b.ReportAllocs()
	for b.Loop() {
		m := new(dns.Msg)
		if err := m.Unpack(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := PackOwned(m, 0); err != nil {
			b.Fatal(err)
		}
	}
}

type recycler struct{ got []*[]byte }

func (r *recycler) Recycle(buf *[]byte) { r.got = append(r.got, buf) }

// TestUpstreamReplyRelease checks that Release gives a lent buffer back to
// its pool once, keeps Msg, and does nothing for a reply not lent one (or
// one Clone copied off its buffer).
func TestUpstreamReplyRelease(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.", dns.TypeA)
	m.Response = true
	raw, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n := copy(buf, raw)
	r, err := ReadUpstream(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	var pool recycler
	lent := r.Lend(&buf, &pool)
	clone := lent.Clone()
	clone.Release()
	r.Release()
	if len(pool.got) != 0 {
		t.Fatalf("Release of a clone and of a reply not lent: got %d buffers recycled, want 0", len(pool.got))
	}
	lent.Release()
	if len(pool.got) != 1 || pool.got[0] != &buf {
		t.Fatalf("Release of a lent reply: got %v recycled, want its buffer once", pool.got)
	}
	lent.Release()
	if len(pool.got) != 1 {
		t.Errorf("second Release: got %d buffers recycled in all, want 1", len(pool.got))
	}
	unpacked := UpstreamReply{Raw: raw, Msg: m}.Lend(&buf, &pool)
	unpacked.Release()
	if unpacked.Msg != m || unpacked.Raw != nil {
		t.Errorf("Release of an unpacked reply: got Msg %p Raw %d bytes, want Msg %p kept and Raw nil", unpacked.Msg, len(unpacked.Raw), m)
	}
}
