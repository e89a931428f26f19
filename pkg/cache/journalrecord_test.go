package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// A name asked in mixed case is restored under its key: the journal
// record's name is the reply's question's, lowercased.
func TestJournalRecordMixedCase(t *testing.T) {
	clk, src, jf, j := smallRing(t)
	resolve(t, src, newQuestion(t, "MiXeD-Case.Example.", dns.TypeA))
	if err := j.flush(); err != nil {
		t.Fatal(err)
	}
	dst, scan, n := restore(t, jf.last(), 0, clk)
	if scan.Records == 0 || n != scan.Records {
		t.Fatalf("restore: %d records, %d imported; want all", scan.Records, n)
	}
	for _, name := range []string{"mixed-case.example.", "MIXED-CASE.EXAMPLE."} {
		if !hit(dst, t, name, clk) {
			t.Errorf("%s after restore: a miss", name)
		}
	}
}

// sourceEntries resolves one name of each shape a journal record must
// carry and returns their entries: positive (stored from the upstream's
// bytes), negative with an SOA, SERVFAIL, DO and CD, one unpacked (names
// spelled out) and one of a type wire.ScanUpstream does not take (HINFO),
// which the import unpacks with miekg/dns.
func sourceEntries(t testing.TB) (*clock, []*entry) {
	t.Helper()
	clk := newClock()
	var out []*entry
	add := func(c *Cache, name string, typ uint16, do, cd bool) {
		t.Helper()
		qs := newQuestion(t, name, typ)
		qs.key.DO, qs.key.CD = do, cd
		resolve(t, c, qs)
		h := qs.key.Hash(c.seed)
		e, _ := c.shardOf(h).lru.Peek(h)
		if e == nil {
			t.Fatalf("%s: not cached", name)
		}
		out = append(out, e)
	}
	up := &fakeUpstream{reply: answerA(300)}
	c := newTestCache(t, Config{}, up, clk)
	add(c, "Host-1.Example.", dns.TypeA, false, false)
	add(c, "signed.example.", dns.TypeA, true, true)
	up.set(func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeNameError, 60, 30), nil })
	add(c, "nx.example.", dns.TypeA, false, false)
	up.set(func(req *dns.Msg) (*dns.Msg, error) { return replyNeg(req, dns.RcodeServerFailure, 0, 0), nil })
	add(c, "fail.example.", dns.TypeA, false, false)
	up.set(func(req *dns.Msg) (*dns.Msg, error) {
		m := replyA(req)
		m.Answer = []dns.RR{&dns.HINFO{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeHINFO,
			Class: dns.ClassINET, Ttl: 120}, Cpu: "cpu", Os: "os"}}
		return m, nil
	})
	add(c, "hinfo.example.", dns.TypeHINFO, false, false)
	spelled := newTestCache(t, Config{}, &fakeUpstream{reply: answerA(300), spelled: true}, clk)
	add(spelled, "spelled.example.", dns.TypeA, false, false)
	return clk, out
}

// A journal record decodes to the entry it was written from: the same
// reply, key, kind and lifetime, stored less than a millisecond earlier
// (never later), whichever way the import checks its reply.
func TestJournalRecordRoundTrip(t *testing.T) {
	clk, entries := sourceEntries(t)
	dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	var d journalDecoder
	for _, e := range entries {
		want := e.key()
		rec := appendJournalRecord([]byte("prefix"), e)[len("prefix"):]
		if len(rec) != journalRecordLen(e) || int(binary.BigEndian.Uint16(rec)) != len(rec)-journalHeadLen {
			t.Fatalf("%s: record of %d bytes, length field %d; journalRecordLen %d", want.PresentationName(),
				len(rec), binary.BigEndian.Uint16(rec), journalRecordLen(e))
		}
		if e.packed.Len()-len(rec) != journalCutLen-journalHeadLen {
			t.Errorf("%s: record of %d bytes for a reply of %d", want.PresentationName(), len(rec), e.packed.Len())
		}
		got, key, err := d.decode(dst, rec[journalLenLen:], clk.Now())
		if err != nil || got == nil {
			t.Fatalf("%s: decode: %v, %v", want.PresentationName(), got, err)
		}
		if key != want || got.key() != want {
			t.Errorf("decode: key %+v, entry's %+v; want %+v", key, got.key(), want)
		}
		if string(got.packed.Wire()) != string(e.packed.Wire()) {
			t.Errorf("%s: reply\n%x\nwant\n%x", want.PresentationName(), got.packed.Wire(), e.packed.Wire())
		}
		if got.kind != e.kind || got.ttl != e.ttl || got.stored > e.stored || e.stored-got.stored >= int64(time.Millisecond) {
			t.Errorf("%s: kind %v ttl %d stored %d; want %v %d %d", want.PresentationName(), got.kind, got.ttl, got.stored,
				e.kind, e.ttl, e.stored)
		}
	}
}

// A malformed journal record is refused, and one whose reply a fetch would
// not have stored as it claims is not imported (and counted); neither
// panics, and a record with AD set is imported without it.
func TestJournalRecordRefused(t *testing.T) {
	clk, entries := sourceEntries(t)
	good := appendJournalRecord(nil, entries[0])[journalLenLen:] // Host-1.Example. A
	neg := appendJournalRecord(nil, entries[2])[journalLenLen:]  // nx.example. NXDOMAIN
	body := func(r []byte) []byte { return r[journalFixedLen:] }
	tests := []struct {
		name    string
		rec     []byte
		mutate  func(r []byte) []byte
		err     bool // refused as malformed; else skipped
		counted bool // skipped and counted in import_rejected
	}{
		{"high flag bits", good, func(r []byte) []byte { r[0] |= 0x10; return r }, true, false},
		{"kind 3", good, func(r []byte) []byte { r[0] = 3 << 2; return r }, true, false},
		{"zero TTL", good, func(r []byte) []byte { copy(r[1:5], []byte{0, 0, 0, 0}); return r }, true, false},
		{"too short", good, func(r []byte) []byte { return r[:journalFixedLen+minJournalBody-1] }, true, false},
		{"garbage reply", good, func(r []byte) []byte { return append(r[:journalFixedLen], bytes.Repeat([]byte{0xff}, 20)...) }, true, false},
		{"reply cut short", good, func(r []byte) []byte { return r[:len(r)-3] }, true, false},
		{"NXDOMAIN claimed positive", neg, func(r []byte) []byte { r[0] = byte(kindPositive) << 2; return r }, false, true},
		{"answer claimed negative", good, func(r []byte) []byte { r[0] = byte(kindNegative) << 2; return r }, false, true},
		{"asked without RD", good, func(r []byte) []byte { body(r)[0] &^= hdrRD; return r }, false, true},
		{"not a query", good, func(r []byte) []byte { body(r)[0] |= 2 << 3; return r }, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
			var d journalDecoder
			e, _, err := d.decode(dst, tt.mutate(append([]byte(nil), tt.rec...)), clk.Now())
			if e != nil || (err != nil) != tt.err {
				t.Errorf("decode: entry %v, error %v; want no entry and an error: %v", e != nil, err, tt.err)
			}
			if got := dst.met.uncacheable[reasonImport].Load(); (got == 1) != tt.counted {
				t.Errorf("import_rejected: got %d, want counted: %v", got, tt.counted)
			}
		})
	}
	ad := append([]byte(nil), good...)
	body(ad)[1] |= hdrAD
	dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	var d journalDecoder
	e, _, err := d.decode(dst, ad, clk.Now())
	if err != nil || e == nil {
		t.Fatalf("decode of a record with AD: %v, %v; want an entry", e, err)
	}
	if m, err := e.packed.Msg(); err != nil || m.AuthenticatedData {
		t.Errorf("stored reply: AD set or unreadable (%v); want AD cleared", err)
	}
}

// FuzzJournalRecord fuzzes a journal record's fields and body: decoding
// never panics, and what it keeps is what a fetch of the reply (rebuilt
// with its ID and question count) would have stored as the record claims,
// under the reply's question, without AD.
func FuzzJournalRecord(f *testing.F) {
	_, entries := sourceEntries(f)
	for _, e := range entries {
		rec := appendJournalRecord(nil, e)[journalLenLen:]
		f.Add(rec[0], binary.BigEndian.Uint32(rec[1:]), rec[journalFixedLen:])
	}
	f.Fuzz(func(t *testing.T, bits byte, ttl uint32, body []byte) {
		clk := newClock()
		rec := append([]byte{bits}, binary.BigEndian.AppendUint32(nil, ttl)...)
		ms := uint64(t0.UnixMilli())
		rec = append(rec, byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms))
		rec = append(rec, body...)
		c := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
		var d journalDecoder
		e, key, err := d.decode(c, rec, clk.Now())
		if err != nil || e == nil {
			return
		}
		msg := append(append([]byte{0, 0}, body[:2]...), append([]byte{0, 1}, body[2:]...)...)
		var r dns.Msg
		if r.Unpack(msg) != nil {
			t.Fatalf("kept a record whose reply does not unpack")
		}
		q := r.Question[0]
		want, err := wire.NewKey(q.Name, q.Qtype, q.Qclass, bits&1 != 0, bits&2 != 0)
		if err != nil || key != want || e.key() != want {
			t.Errorf("kept under %+v (entry %+v), want the reply's question's %+v", key, e.key(), want)
		}
		if _, fk, why := judgeImported(c.lim, &want, &r); why != reasonNone || fk != kind(bits>>2) {
			t.Errorf("kept a reply a fetch would not store as %v: verdict %v, %v", kind(bits>>2), fk, why)
		}
		got, err := e.packed.Msg()
		if err != nil {
			t.Fatalf("stored reply does not unpack: %v", err)
		}
		if got.AuthenticatedData {
			t.Error("stored reply: AD set, want it cleared")
		}
	})
}

// Once the ring has wrapped, writing a batch allocates nothing: the
// writer's arrays and the ring's items are used again, and a batch larger
// than one write goes in several through the same buffer.
func TestJournalWritesWithoutGarbage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted without -race: built with it, the program allocates what it does not (its sync.Pool drops at random, its instrumentation)")
	}
	_, src, _, j := smallRing(t)
	fillRing(t, src, j, 0, 6000)
	if j.Stats().Overwritten == 0 {
		t.Fatal("the ring has not wrapped")
	}
	for _, size := range []int{20, 1000} {
		var batch []pendingEntry
		src.eachRecent(func(e *entry) bool {
			k := e.key()
			batch = append(batch, pendingEntry{e: e, h: k.Hash(src.seed)})
			return len(batch) < size
		})
		before := j.Stats().Records
		allocs := testing.AllocsPerRun(50, func() {
			for _, p := range batch {
				j.add(p.h, p.e)
			}
			if err := j.flush(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("a batch of %d records in a wrapped ring: %v allocations, want none", len(batch), allocs)
		}
		if per := (j.Stats().Records - before) / 51; size > 20 && per*80 <= journalWriteBytes {
			t.Errorf("a batch of %d: %d records written a batch, want more than one write's", size, per)
		}
	}
	if l, c := len(j.ring.live()), cap(j.ring.items); c > 2*l {
		t.Errorf("the ring's items: %d in an array of %d, want at most twice as many", l, c)
	}
}

// A journal of another version is refused, not misread.
func TestJournalOtherVersion(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "v2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := append([]byte(journalMagic), journalVersion-1)
	hdr = binary.BigEndian.AppendUint64(hdr, MinJournalBytes)
	hdr = binary.BigEndian.AppendUint64(hdr, 0)
	hdr = binary.BigEndian.AppendUint64(hdr, 0)
	if _, err := f.Write(hdr); err != nil {
		t.Fatal(err)
	}
	_, err = ScanJournal(f)
	if !errors.Is(err, ErrBadDump) {
		t.Errorf("ScanJournal of a version %d journal: %v, want ErrBadDump", journalVersion-1, err)
	}
}

// BenchmarkImportJournal imports a journal of 10,000 entries into an
// empty cache: what a restart after a crash waits for.
func BenchmarkImportJournal(b *testing.B) {
	clk := newClock()
	src := filled(b, 10000, clk)
	jf := &journalFiles{tb: b, dir: b.TempDir()}
	j, err := src.newJournal(jf.config(4 << 20))
	if err != nil {
		b.Fatal(err)
	}
	if err := j.flush(); err != nil {
		b.Fatal(err)
	}
	f := jf.last()
	scan, err := ScanJournal(f)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		dst := newTestCache(b, Config{}, &fakeUpstream{reply: failing}, clk)
		if n, err := dst.ImportJournal(b.Context(), f, scan, 0); err != nil || n != scan.Records {
			b.Fatalf("imported %d of %d: %v", n, scan.Records, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(scan.Records), "ns/entry")
}
