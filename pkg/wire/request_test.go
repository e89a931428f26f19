package wire

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"
)

// checkAppendRequest checks that AppendRequest writes what miekg/dns packs
// for the query the key promises: its name, type and class, RD, the key's
// CD, and an OPT record of DefaultUDPSize with the key's DO.
func checkAppendRequest(t *testing.T, k *Key) {
	t.Helper()
	m := new(dns.Msg)
	m.RecursionDesired = true
	m.CheckingDisabled = k.CD
	m.Question = []dns.Question{{Name: k.PresentationName(), Qtype: k.Type, Qclass: k.Class}}
	m.SetEdns0(DefaultUDPSize, k.DO)
	want, err := m.Pack()
	if err != nil {
		t.Fatalf("packing %v: %v", m, err)
	}
	if got := k.AppendRequest(nil); !bytes.Equal(got, want) {
		t.Errorf("AppendRequest(%+v):\ngot  %x\nwant %x", *k, got, want)
	}
}

func TestAppendRequest(t *testing.T) {
	for _, name := range []string{".", "example.org.", "WWW.Example.ORG.", `a\.b.example.`, `x\000y.example.`, "_dns._udp.example."} {
		for _, typ := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeHTTPS, 65280} {
			for _, bits := range []struct{ do, cd bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				k, err := NewKey(name, typ, dns.ClassINET, bits.do, bits.cd)
				if err != nil {
					t.Fatal(err)
				}
				checkAppendRequest(t, &k)
			}
		}
	}
	k, _ := NewKey("example.org.", dns.TypeA, dns.ClassINET, false, false)
	buf := make([]byte, 0, len(k.Name)+27)
	if allocs := testing.AllocsPerRun(100, func() { buf = k.AppendRequest(buf[:0]) }); allocs != 0 {
		t.Errorf("AppendRequest into a buffer with room: got %v allocations, want 0", allocs)
	}
}

func TestReadUpstream(t *testing.T) {
	for name, msg := range upstreamReplies(t) {
		t.Run(name, func(t *testing.T) {
			r, err := ReadUpstream(msg)
			if err != nil || !r.Scanned || r.Msg != nil {
				t.Fatalf("got scanned %t, unpacked %t, %v; want scanned alone", r.Scanned, r.Msg != nil, err)
			}
			want := new(dns.Msg)
			if err := want.Unpack(msg); err != nil {
				t.Fatal(err)
			}
			if r.Rcode() != want.Rcode {
				t.Errorf("rcode: got %d, want %d", r.Rcode(), want.Rcode)
			}
			// The clone holds nothing of msg: spoiling msg changes nothing.
			c := r.Clone()
			before := PackUpstream(msg, &r.Scan, 0, 0)
			orig := bytes.Clone(msg)
			clear(msg)
			after := PackUpstream(c.Raw, &c.Scan, 0, 0)
			copy(msg, orig)
			if !bytes.Equal(before.buf(), after.buf()) {
				t.Errorf("clone packs\n%x\nwant\n%x", after.buf(), before.buf())
			}
		})
	}

	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.Response, m.Rcode = true, dns.RcodeNameError
	m.Answer = []dns.RR{&dns.RRSIG{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 60},
		TypeCovered: dns.TypeA, SignerName: "example.org.", Signature: "AAAA"}}
	r, err := ReadUpstream(pack(t, m))
	if err != nil || r.Scanned || r.Msg == nil || r.Rcode() != dns.RcodeNameError || len(r.Msg.Answer) != 1 {
		t.Errorf("a reply ScanUpstream does not take: got scanned %t, msg %v, %v; want it unpacked, NXDOMAIN", r.Scanned, r.Msg, err)
	}
	if _, err := ReadUpstream([]byte{0, 1, 0x81}); err == nil {
		t.Error("a reply cut inside its header: got no error")
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	k, err := NewKey("www.example.org.", dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = k.AppendRequest(buf[:0])
	}
}
