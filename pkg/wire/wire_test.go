package wire

import (
	"bytes"
	"errors"
	"hash/maphash"
	"net"
	"reflect"
	"testing"
	"unsafe"

	"github.com/miekg/dns"
)

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("packing: %v", err)
	}
	return b
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func TestParse(t *testing.T) {
	withEDNS := func(v uint8, do bool, size uint16) []byte {
		m := query("Example.ORG.", dns.TypeA)
		m.SetEdns0(size, do)
		m.IsEdns0().SetVersion(v)
		return pack(t, m)
	}
	twoQ := query("a.example.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, twoQ.Question[0])
	noQ := query("a.example.", dns.TypeA)
	noQ.Question = nil
	notify := query("a.example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	resp := query("a.example.", dns.TypeA)
	resp.Response = true
	twoOPT := query("a.example.", dns.TypeA)
	twoOPT.SetEdns0(1232, false)
	twoOPT.Extra = append(twoOPT.Extra, twoOPT.Extra[0])
	good := pack(t, query("Example.ORG.", dns.TypeAAAA))
	// withOPT appends to good an OPT record with the given RDATA, counted
	// in the section at header offset sec (6 answer, 8 authority, 10
	// additional).
	withOPT := func(sec int, rdata ...byte) []byte {
		b := append([]byte{}, good...)
		b[sec+1]++
		b = append(b, 0, 0, typeOPT, 0x04, 0xD0, 0, 0, 0, 0, 0, byte(len(rdata)))
		return append(b, rdata...)
	}
	cookie := []byte{0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8} // a client cookie (RFC 7873)

	tests := []struct {
		name    string
		pkt     []byte
		wantErr error
		check   func(t *testing.T, q *Query)
	}{
		{name: "plain", pkt: good, check: func(t *testing.T, q *Query) {
			if got, want := string(q.LowerName()), "\x07example\x03org\x00"; got != want {
				t.Errorf("lower name: got %q, want %q", got, want)
			}
			if got, want := string(q.Name), "\x07Example\x03ORG\x00"; got != want {
				t.Errorf("name: got %q, want %q", got, want)
			}
			if q.Type != dns.TypeAAAA || q.Class != dns.ClassINET || q.EDNS || !q.RD() {
				t.Errorf("got type %d class %d edns %v rd %v", q.Type, q.Class, q.EDNS, q.RD())
			}
		}},
		{name: "edns do", pkt: withEDNS(0, true, 4096), check: func(t *testing.T, q *Query) {
			if !q.EDNS || !q.DO || q.UDPSize != 4096 {
				t.Errorf("got edns %v do %v size %d, want true true 4096", q.EDNS, q.DO, q.UDPSize)
			}
		}},
		{name: "edns small size raised to 512", pkt: withEDNS(0, false, 100), check: func(t *testing.T, q *Query) {
			if q.UDPSize != 512 {
				t.Errorf("got size %d, want 512", q.UDPSize)
			}
		}},
		{name: "badvers", pkt: withEDNS(1, false, 1232), wantErr: ErrBadVers},
		{name: "empty", pkt: nil, wantErr: ErrNoReply},
		{name: "short header", pkt: good[:11], wantErr: ErrNoReply},
		{name: "response", pkt: pack(t, resp), wantErr: ErrNoReply},
		{name: "two questions", pkt: pack(t, twoQ), wantErr: ErrFormat},
		{name: "no question", pkt: pack(t, noQ), wantErr: ErrFormat},
		{name: "notify", pkt: pack(t, notify), wantErr: ErrNotImp},
		{name: "truncated question", pkt: good[:len(good)-2], wantErr: ErrFormat},
		{name: "truncated name", pkt: good[:15], wantErr: ErrFormat},
		{name: "two OPT", pkt: pack(t, twoOPT), wantErr: ErrFormat},
		{name: "opt with a whole option", pkt: withOPT(10, cookie...), check: func(t *testing.T, q *Query) {
			if !q.EDNS || q.UDPSize != 1232 {
				t.Errorf("got edns %v size %d, want true 1232", q.EDNS, q.UDPSize)
			}
		}},
		{name: "opt option longer than rdlength", pkt: withOPT(10, 0, 10, 0, 8, 1, 2), wantErr: ErrFormat},
		{name: "opt rdlength cuts an option header", pkt: withOPT(10, append(cookie, 0, 10)...), wantErr: ErrFormat},
		{name: "opt option shorter than rdlength", pkt: withOPT(10, append(cookie, 0)...), wantErr: ErrFormat},
		{name: "opt in answer section", pkt: withOPT(6), wantErr: ErrFormat},
		{name: "opt in authority section", pkt: withOPT(8), wantErr: ErrFormat},
		{name: "compressed question", pkt: append(append([]byte{}, good[:12]...), 0xC0, 12, 0, 1, 0, 1), wantErr: ErrFormat},
		{name: "arcount beyond packet", pkt: func() []byte { b := append([]byte{}, good...); b[11] = 1; return b }(), wantErr: ErrFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Query
			err := Parse(tc.pkt, &q)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("got error %v, want %v", err, tc.wantErr)
			}
			if tc.check != nil {
				tc.check(t, &q)
			}
		})
	}
}

func reply(t testing.TB, req *dns.Msg, ttl uint32, n int) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetReply(req)
	for i := 0; i < n; i++ {
		r.Answer = append(r.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl + uint32(i)},
			A:   net.IPv4(192, 0, 2, byte(i+1)),
		})
	}
	return r
}

func TestAppendReply(t *testing.T) {
	stored := reply(t, query("www.example.org.", dns.TypeA), 300, 3)
	stored.SetEdns0(4096, true)     // OPT must be stripped
	stored.AuthenticatedData = true // an upstream's AD is not passed on
	p, err := Pack(stored)
	if err != nil {
		t.Fatal(err)
	}
	if p.MinTTL() != 300 || p.Records() != 3 {
		t.Fatalf("got min TTL %d, records %d; want 300, 3", p.MinTTL(), p.Records())
	}
	mixed, err := Pack(reply(t, query("WWW.Example.ORG.", dns.TypeA), 300, 1))
	if err != nil {
		t.Fatal(err)
	}
	if name, typ, class := mixed.Question(); string(name) != "\x03www\x07example\x03org\x00" || typ != dns.TypeA || class != dns.ClassINET {
		t.Errorf("question: got %q %d %d, want www.example.org. A IN, lowercased, in wire form", name, typ, class)
	}
	if p.BufSize() < p.Len()+2*p.Records() {
		t.Errorf("buffer size: got %d, want at least the %d-byte reply and 2 bytes per record", p.BufSize(), p.Len())
	}

	req := query("WWW.Example.ORG.", dns.TypeA)
	req.Id = 4242
	req.CheckingDisabled = true
	req.AuthenticatedData = true
	req.SetEdns0(1232, true)
	var q Query
	if err := Parse(pack(t, req), &q); err != nil {
		t.Fatal(err)
	}
	out := p.AppendReply(nil, &q, TTLMode{Elapsed: 100}, 1232)
	var got dns.Msg
	if err := got.Unpack(out); err != nil {
		t.Fatalf("unpacking reply: %v", err)
	}
	if got.Id != 4242 || !got.Response || !got.RecursionAvailable || !got.CheckingDisabled || !got.RecursionDesired || got.AuthenticatedData {
		t.Errorf("header: got %+v", got.MsgHdr)
	}
	if got.Question[0].Name != "WWW.Example.ORG." {
		t.Errorf("question: got %q, want the client's case", got.Question[0].Name)
	}
	for i, rr := range got.Answer {
		if rr.Header().Name != "WWW.Example.ORG." {
			t.Errorf("answer %d owner: got %q, want the client's case", i, rr.Header().Name)
		}
		if want := uint32(200 + i); rr.Header().Ttl != want {
			t.Errorf("answer %d TTL: got %d, want %d", i, rr.Header().Ttl, want)
		}
	}
	opt := got.IsEdns0()
	if opt == nil || !opt.Do() || opt.UDPSize() != DefaultUDPSize {
		t.Errorf("OPT: got %v, want DO and size %d", opt, DefaultUDPSize)
	}
	if len(got.Extra) != 1 {
		t.Errorf("extra: got %d records, want only the OPT", len(got.Extra))
	}

	// TTLs floor at zero; a fixed TTL overrides.
	out = p.AppendReply(out[:0], &q, TTLMode{Elapsed: 1000}, 1232)
	_ = got.Unpack(out)
	for i, rr := range got.Answer {
		if rr.Header().Ttl != 0 {
			t.Errorf("answer %d TTL after expiry: got %d, want 0", i, rr.Header().Ttl)
		}
	}
	out = p.AppendReply(out[:0], &q, TTLMode{Fixed: 30}, 1232)
	_ = got.Unpack(out)
	for i, rr := range got.Answer {
		if rr.Header().Ttl != 30 {
			t.Errorf("answer %d stale TTL: got %d, want 30", i, rr.Header().Ttl)
		}
	}
}

func TestAppendReplyTruncates(t *testing.T) {
	p, err := Pack(reply(t, query("big.example.", dns.TypeA), 60, 40)) // 40 A records > 512 bytes
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edns    bool
		max     int
		wantTC  bool
		wantOPT bool
	}{
		{name: "no edns 512", max: 512, wantTC: true},
		{name: "edns 512", edns: true, max: 512, wantTC: true, wantOPT: true},
		{name: "edns 1232 fits", edns: true, max: 1232, wantOPT: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := query("big.example.", dns.TypeA)
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
			if got.Truncated != tc.wantTC {
				t.Errorf("TC: got %v, want %v", got.Truncated, tc.wantTC)
			}
			if tc.wantTC && (len(got.Answer) == 0 || len(got.Answer) >= 40) {
				t.Errorf("truncated reply: got %d answers, want the whole ones that fit (TestTruncationKeepsWholeRecords)", len(got.Answer))
			}
			if (got.IsEdns0() != nil) != tc.wantOPT {
				t.Errorf("OPT present: got %v, want %v", got.IsEdns0() != nil, tc.wantOPT)
			}
		})
	}
}

func TestAppendError(t *testing.T) {
	req := query("x.example.", dns.TypeA)
	req.SetEdns0(1232, false)
	req.IsEdns0().SetVersion(1)
	pkt := pack(t, req)
	var q Query
	if err := Parse(pkt, &q); !errors.Is(err, ErrBadVers) {
		t.Fatalf("got %v, want ErrBadVers", err)
	}
	var got dns.Msg
	if err := got.Unpack(AppendError(nil, pkt, &q, dns.RcodeBadVers)); err != nil {
		t.Fatal(err)
	}
	if got.Rcode != dns.RcodeBadVers || got.Id != req.Id || len(got.Question) != 1 {
		t.Errorf("got rcode %d id %d questions %d; want BADVERS, %d, 1", got.Rcode, got.Id, len(got.Question), req.Id)
	}

	twoQ := query("a.example.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, twoQ.Question[0])
	pkt = pack(t, twoQ)
	if err := Parse(pkt, &q); !errors.Is(err, ErrFormat) {
		t.Fatalf("got %v, want ErrFormat", err)
	}
	if err := got.Unpack(AppendError(nil, pkt, &q, dns.RcodeFormatError)); err != nil {
		t.Fatal(err)
	}
	if got.Rcode != dns.RcodeFormatError || len(got.Question) != 0 {
		t.Errorf("got rcode %d with %d questions, want FORMERR with none", got.Rcode, len(got.Question))
	}
}

func TestKeyHashMatches(t *testing.T) {
	seed := maphash.MakeSeed()
	req := query("MiXed.Example.", dns.TypeMX)
	req.SetEdns0(1232, true)
	var q Query
	if err := Parse(pack(t, req), &q); err != nil {
		t.Fatal(err)
	}
	k, err := KeyOf(req)
	if err != nil {
		t.Fatal(err)
	}
	if !q.Matches(&k) || q.Hash(seed) != k.Hash(seed) {
		t.Errorf("query and KeyOf disagree: key %+v", k)
	}
	if k.PresentationName() != "mixed.example." {
		t.Errorf("presentation: got %q", k.PresentationName())
	}
	other := k
	other.DO = false
	if q.Matches(&other) || q.Hash(seed) == other.Hash(seed) {
		t.Errorf("DO bit ignored by key")
	}
}

// checkCopyTo checks that a query parsed from pkt and copied for a copy of
// pkt is the query parsing that copy gives, and holds nothing of pkt.
func checkCopyTo(t *testing.T, pkt []byte) {
	t.Helper()
	orig, cp := bytes.Clone(pkt), bytes.Clone(pkt)
	var q, got, want Query
	if err := Parse(orig, &q); err != nil {
		t.Fatalf("parsing: %v", err)
	}
	q.CopyTo(&got, cp)
	clear(orig) // got must not see the original go
	if err := Parse(cp, &want); err != nil {
		t.Fatalf("parsing the copy: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CopyTo: got %+v, want %+v (parsing the copy)", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(pack(f, query("example.org.", dns.TypeA)))
	m := query("example.org.", dns.TypeA)
	m.SetEdns0(1232, true)
	f.Add(pack(f, m))
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	f.Add(pack(f, m))
	p, _ := Pack(reply(f, query("example.org.", dns.TypeA), 60, 2))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		var q Query
		err := Parse(pkt, &q)
		switch {
		case err == nil:
			checkCopyTo(t, pkt)
			key := q.Key()
			checkAppendRequest(t, &key)
			out := p.AppendReply(nil, &q, TTLMode{Elapsed: 1}, 512)
			if len(out) > 512 && !q.EDNS {
				t.Fatalf("reply of %d bytes exceeds 512", len(out))
			}
			var r dns.Msg
			if err := r.Unpack(out); err != nil {
				t.Fatalf("reply does not unpack: %v", err)
			}
		case errors.Is(err, ErrNoReply):
		default:
			var r dns.Msg
			if err := r.Unpack(AppendError(nil, pkt, &q, dns.RcodeFormatError)); err != nil {
				t.Fatalf("error reply does not unpack: %v", err)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	m := query("www.Example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	pkt := pack(b, m)
	var q Query
	b.ReportAllocs()
	for b.Loop() {
		if err := Parse(pkt, &q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendReply(b *testing.B) {
	p, err := Pack(reply(b, query("www.example.org.", dns.TypeA), 300, 2))
	if err != nil {
		b.Fatal(err)
	}
	m := query("www.Example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	var q Query
	if err := Parse(pack(b, m), &q); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = p.AppendReply(buf[:0], &q, TTLMode{Elapsed: 3}, 1232)
	}
}

// TestPackRoom checks the room a holder asks for in front of a Packed: it
// is in the Packed's allocation (counted by BufSize), left to the holder
// (writing all of it changes no byte of the reply), and must be a multiple
// of 8, so that a holder's fields in it are aligned.
func TestPackRoom(t *testing.T) {
	const room = 24
	want, err := Pack(reply(t, query("www.example.org.", dns.TypeA), 300, 2))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PackOwned(reply(t, query("www.example.org.", dns.TypeA), 300, 2), room)
	if err != nil {
		t.Fatal(err)
	}
	if p.Room() != room || want.Room() != 0 {
		t.Errorf("room: got %d and %d, want %d and 0", p.Room(), want.Room(), room)
	}
	if least := room + packedLen + p.Len() + 2*p.Records(); p.BufSize() < least {
		t.Errorf("BufSize: got %d, want at least %d (room, Packed, reply, TTL offsets)", p.BufSize(), least)
	}
	head := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), -room)), room)
	for i := range head {
		if head[i] != 0 {
			t.Fatalf("room byte %d: got %#x, want it left zero", i, head[i])
		}
		head[i] = 0xff
	}
	if string(p.Wire()) != string(want.Wire()) || p.MinTTL() != 300 || p.Records() != 2 {
		t.Errorf("reply after the room was written:\n%x\nwant\n%x", p.Wire(), want.Wire())
	}
	for _, bad := range []int{-8, 4, 12} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("room %d: packed, want a panic", bad)
				}
			}()
			_, _ = PackOwned(reply(t, query("www.example.org.", dns.TypeA), 300, 1), bad)
		}()
	}
}
