package wire

import (
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func aRR(name string, ip string, ttl uint32) dns.RR {
	if p := net.ParseIP(ip); p.To4() == nil {
		return &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: p}
	}
	return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip)}
}

// answerOrders writes p for q n times and returns each answer's records
// in presentation form, in order.
func answerOrders(t *testing.T, p *Packed, q *Query, mode TTLMode, maxSize, n int) [][]string {
	t.Helper()
	var out [][]string
	for range n {
		var m dns.Msg
		if err := m.Unpack(p.AppendReply(nil, q, mode, maxSize)); err != nil {
			t.Fatalf("unpacking a shuffled reply: %v", err)
		}
		var recs []string
		for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
			for _, rr := range sec {
				if rr.Header().Rrtype != dns.TypeOPT {
					recs = append(recs, rr.String())
				}
			}
			recs = append(recs, "|")
		}
		out = append(out, recs)
	}
	return out
}

func parsedQuery(t *testing.T, name string, qtype uint16) *Query {
	t.Helper()
	m := query(name, qtype)
	m.SetEdns0(1232, false)
	var q Query
	if err := Parse(pack(t, m), &q); err != nil {
		t.Fatal(err)
	}
	return &q
}

// TestShuffleAddrs: with Shuffle every answer holds the same records,
// each address RRset in a new order (every address comes first at some
// point), while CNAMEs, other types, RRsets of other owners and the
// sections stay where they were; without it the order never changes.
func TestShuffleAddrs(t *testing.T) {
	const name = "web.example.org."
	req := query(name, dns.TypeA)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: "lb.example.net."}}
	for i := range 6 {
		m.Answer = append(m.Answer, aRR("lb.example.net.", net.IPv4(192, 0, 2, byte(i+1)).String(), 30))
	}
	m.Ns = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: "example.net.", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 60}, Ns: "ns.example.net."}}
	m.Extra = []dns.RR{aRR("ns.example.net.", "198.51.100.1", 60), aRR("ns2.example.net.", "198.51.100.2", 60),
		aRR("ns.example.net.", "2001:db8::1", 60), aRR("ns.example.net.", "2001:db8::2", 60)}
	p, err := Pack(m)
	if err != nil {
		t.Fatal(err)
	}
	q := parsedQuery(t, "WEB.example.org.", dns.TypeA)

	plain := answerOrders(t, p, q, TTLMode{Elapsed: 1}, 1232, 20)
	for _, o := range plain[1:] {
		if !slices.Equal(o, plain[0]) {
			t.Fatalf("without Shuffle the order changed:\n%v\n%v", o, plain[0])
		}
	}
	first := map[string]bool{}
	v6first := map[string]bool{}
	for _, o := range answerOrders(t, p, q, TTLMode{Elapsed: 1, Shuffle: true}, 1232, 300) {
		if o[0] != plain[0][0] {
			t.Fatalf("the CNAME moved: got %q first, want %q", o[0], plain[0][0])
		}
		sorted := slices.Clone(o[1:7])
		slices.Sort(sorted)
		want := slices.Clone(plain[0][1:7])
		slices.Sort(want)
		if !slices.Equal(sorted, want) {
			t.Fatalf("the shuffled RRset holds %v, want %v", sorted, want)
		}
		if !slices.Equal(o[7:12], plain[0][7:12]) {
			t.Fatalf("records outside the RRset moved: got %v, want %v", o[7:12], plain[0][7:12])
		}
		if !slices.Equal(slices.Sorted(slices.Values(o[12:14])), slices.Sorted(slices.Values(plain[0][12:14]))) {
			t.Fatalf("the AAAA RRset holds %v, want %v", o[12:14], plain[0][12:14])
		}
		first[o[1]] = true
		v6first[o[12]] = true
	}
	if len(first) != 6 || len(v6first) != 2 {
		t.Errorf("in 300 answers %d of 6 A records and %d of 2 AAAA came first, want all", len(first), len(v6first))
	}
}

// TestShuffleLeavesNegativeAndTruncates: a reply that is not NOERROR keeps
// its order; a truncated reply keeps a prefix of the shuffled records, so
// that clients that ignore TC still get a spread.
func TestShuffleLeavesNegativeAndTruncates(t *testing.T) {
	const name = "many.example.org."
	m := new(dns.Msg)
	m.SetReply(query(name, dns.TypeA))
	for i := range 40 {
		m.Answer = append(m.Answer, aRR(name, net.IPv4(10, 0, 0, byte(i+1)).String(), 30))
	}
	p, err := Pack(m)
	if err != nil {
		t.Fatal(err)
	}
	q := parsedQuery(t, name, dns.TypeA)
	kept := map[string]bool{}
	for _, o := range answerOrders(t, p, q, TTLMode{Shuffle: true}, 512, 50) {
		for _, r := range o {
			kept[r] = true
		}
	}
	if len(kept) <= 30 { // 512 bytes hold about 29 records; the first answers already differ
		t.Errorf("truncated shuffled answers held %d distinct records over 50 answers, want more than one answer's worth", len(kept))
	}

	m.Rcode = dns.RcodeNameError // nonsense with records, but it must not be touched
	p, err = Pack(m)
	if err != nil {
		t.Fatal(err)
	}
	orders := answerOrders(t, p, q, TTLMode{Shuffle: true}, 65535, 10)
	for _, o := range orders[1:] {
		if !slices.Equal(o, orders[0]) {
			t.Fatal("an NXDOMAIN reply was shuffled")
		}
	}
}

// TestShuffleDistinctOwnerBytes: records whose owner bytes differ (one
// written in full, the next a pointer to it, as some servers write them)
// are not one run; the reply stays well formed and in order.
func TestShuffleDistinctOwnerBytes(t *testing.T) {
	m := new(dns.Msg)
	m.SetReply(query("x.example.org.", dns.TypeA))
	m.Answer = []dns.RR{aRR("y.example.org.", "192.0.2.1", 30), aRR("y.example.org.", "192.0.2.2", 30)}
	m.Compress = true
	raw := pack(t, m)
	p, err := newPacked(raw, 0)
	if err != nil {
		t.Fatal(err)
	}
	q := parsedQuery(t, "x.example.org.", dns.TypeA)
	orders := answerOrders(t, p, q, TTLMode{Shuffle: true}, 65535, 30)
	for _, o := range orders[1:] {
		if !slices.Equal(o, orders[0]) {
			t.Fatalf("records with different owner bytes were swapped: %v vs %v", o, orders[0])
		}
	}
}

// TestShuffleNoAlloc: the hit path stays allocation-free with Shuffle.
func TestShuffleNoAlloc(t *testing.T) {
	p, err := Pack(reply(t, query("www.example.org.", dns.TypeA), 300, 8))
	if err != nil {
		t.Fatal(err)
	}
	q := parsedQuery(t, "www.example.org.", dns.TypeA)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = p.AppendReply(buf[:0], q, TTLMode{Shuffle: true}, 1232) }); n != 0 {
		t.Errorf("AppendReply with Shuffle: %v allocations, want 0", n)
	}
}

// BenchmarkAppendReplyShuffle is BenchmarkAppendReply for 1 and 8 A
// records, with the shuffle off and on.
func BenchmarkAppendReplyShuffle(b *testing.B) {
	for _, n := range []int{1, 8} {
		p, err := Pack(reply(b, query("www.example.org.", dns.TypeA), 300, n))
		if err != nil {
			b.Fatal(err)
		}
		m := query("www.Example.org.", dns.TypeA)
		m.SetEdns0(1232, false)
		var q Query
		if err := Parse(pack(b, m), &q); err != nil {
			b.Fatal(err)
		}
		for _, on := range []bool{false, true} {
			b.Run(benchName(n, on), func(b *testing.B) {
				buf := make([]byte, 0, 4096)
				b.ReportAllocs()
				for b.Loop() {
					buf = p.AppendReply(buf[:0], &q, TTLMode{Elapsed: 3, Shuffle: on}, 1232)
				}
			})
		}
	}
}

func benchName(records int, shuffle bool) string {
	s := "off"
	if shuffle {
		s = "on"
	}
	return "records=" + string(rune('0'+records)) + "/loadbalance=" + s
}
