package cache

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
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

// A journal record is its handover record without the name; a record
// whose reply has no well-formed question name is refused.
func TestHandoverRecord(t *testing.T) {
	clk, src, _, _ := smallRing(t)
	resolve(t, src, newQuestion(t, "host-1.example.", dns.TypeA))
	var e *entry
	src.eachRecent(func(x *entry) bool { e = x; return false })
	want := encodeRecord(nil, e)
	rec := appendJournalRecord([]byte("prefix"), e)[len("prefix"):]
	if len(rec) != journalRecordLen(e) || len(rec) != len(want)-1-int(want[0]) {
		t.Fatalf("journal record of %d bytes, journalRecordLen %d; the handover record has %d with a name of %d",
			len(rec), journalRecordLen(e), len(want), want[0])
	}
	got, err := handoverRecord(nil, rec)
	if err != nil || string(got) != string(want) {
		t.Fatalf("handoverRecord: %q, %v; want %q", got, err, want)
	}
	if _, err := src.decodeRecord(got, clk.Now()); err != nil {
		t.Errorf("decodeRecord of the rebuilt record: %v", err)
	}
	bad := func(what string, mutate func(msg []byte) []byte) {
		t.Helper()
		r := append([]byte(nil), rec...)
		msg := mutate(r[journalRecordFixedLen:])
		r = append(r[:journalRecordFixedLen], msg...)
		if _, err := handoverRecord(nil, r); err == nil {
			t.Errorf("%s: got no error", what)
		}
	}
	bad("a pointer for the question name", func(m []byte) []byte { m[12] = 0xc0; return m })
	bad("a label past the reply's end", func(m []byte) []byte { m[12] = 63; return m[:40] })
	bad("no reply", func(m []byte) []byte { return m[:5] })
}

// Once the ring has wrapped, writing a batch allocates nothing: the
// writer's arrays and the ring's items are used again, and a batch larger
// than one write goes in several through the same buffer.
func TestJournalWritesWithoutGarbage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are counted without -race: built with it, the program allocates what it does not (its sync.Pool drops at random, its instrumentation)")
	}
	_, src, _, j := smallRing(t)
	fillRing(t, src, j, 0, 4000)
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
