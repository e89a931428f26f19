package cache

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// journalFiles is a JournalConfig whose files are in dir and whose
// published files are kept, as a supervisor keeps them: a descriptor of
// its own for each.
type journalFiles struct {
	tb        testing.TB
	dir       string
	n         int
	published []*os.File
}

func (jf *journalFiles) config(maxBytes int64) JournalConfig {
	return JournalConfig{MaxBytes: maxBytes,
		NewFile: func() (*os.File, error) {
			jf.n++
			return os.Create(filepath.Join(jf.dir, fmt.Sprintf("journal-%d", jf.n)))
		},
		Publish: func(f *os.File) error {
			fd, err := syscall.Dup(int(f.Fd()))
			if err != nil {
				return err
			}
			jf.published = append(jf.published, os.NewFile(uintptr(fd), f.Name()))
			return nil
		}}
}

func (jf *journalFiles) last() *os.File {
	jf.tb.Helper()
	if len(jf.published) == 0 {
		jf.tb.Fatal("no journal file published")
	}
	return jf.published[len(jf.published)-1]
}

func resolveHosts(tb testing.TB, c *Cache, from, to int) {
	tb.Helper()
	for i := from; i < to; i++ {
		resolve(tb, c, newQuestion(tb, fmt.Sprintf("host-%d.example.", i), dns.TypeA))
	}
}

// restore imports the journal in f into a new cache and returns it.
func restore(t testing.TB, f *os.File, maxBytes int64, clk *clock) (*Cache, JournalScan, int) {
	t.Helper()
	scan, err := ScanJournal(f)
	if err != nil {
		t.Fatalf("ScanJournal: %v", err)
	}
	dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	n, err := dst.ImportJournal(t.Context(), f, scan, maxBytes)
	if err != nil {
		t.Fatalf("ImportJournal: %v", err)
	}
	return dst, scan, n
}

func hit(c *Cache, tb testing.TB, name string, clk *clock) bool {
	qs := newQuestion(tb, name, dns.TypeA)
	_, _, ok := c.Lookup(&qs.q, clk.Now())
	return ok
}

// A journal started on a warm cache holds it (the seed) and then every
// insert; bytes written past its records by a kill are ignored.
func TestJournalRestoresAfterKill(t *testing.T) {
	clk := newClock()
	src := filled(t, 20, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	j, err := src.StartJournal(jf.config(0))
	if err != nil {
		t.Fatal(err)
	}
	resolveHosts(t, src, 20, 30)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if st := j.Stats(); st.Records != 31 || st.Overwritten != 0 {
		t.Errorf("journal stats: got %+v, want 31 records, none overwritten", st)
	}
	f := jf.last()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0, 0, 0, 90, 5, 'h'}, fi.Size()); err != nil { // a record cut short
		t.Fatal(err)
	}
	dst, scan, n := restore(t, f, 0, clk)
	if scan.Records != 31 || n != 31 || scan.Bytes != fi.Size()-journalHdrLen {
		t.Fatalf("restore: got %d records in %d bytes, %d imported; want 31 in %d, 31", scan.Records, scan.Bytes, n, fi.Size()-journalHdrLen)
	}
	for _, name := range []string{"host-0.example.", "host-29.example.", "nx.example."} {
		if !hit(dst, t, name, clk) {
			t.Errorf("%s after restore: got a miss, want a hit", name)
		}
	}
}

// smallRing is a cache and a journal of the smallest ring on it, with no
// writer goroutine: the test flushes.
func smallRing(t *testing.T) (*clock, *Cache, *journalFiles, *Journal) {
	t.Helper()
	clk := newClock()
	src := filled(t, 0, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	j, err := src.newJournal(jf.config(MinJournalBytes))
	if err != nil {
		t.Fatal(err)
	}
	return clk, src, jf, j
}

// fillRing journals hosts from..to into j in batches of ten.
func fillRing(t *testing.T, c *Cache, j *Journal, from, to int) {
	t.Helper()
	for i := from; i < to; i += 10 {
		resolveHosts(t, c, i, min(i+10, to))
		if err := j.flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
}

// A full ring overwrites its oldest records and never grows past its
// size; what it holds is the newest inserts, and a process that continues
// it (a restart) writes on after them.
func TestJournalRingKeepsNewest(t *testing.T) {
	clk := newClock()
	src := filled(t, 0, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	j, err := src.newJournal(jf.config(MinJournalBytes)) // no writer goroutine: the test flushes
	if err != nil {
		t.Fatal(err)
	}
	fillRing(t, src, j, 0, 6000)
	st := j.Stats()
	// The file's memory is whole pages (Stats' Bytes counts its blocks).
	pg := int64(os.Getpagesize())
	if ringMax := (journalHdrLen + MinJournalBytes + pg - 1) / pg * pg; st.Overwritten == 0 || st.Bytes > ringMax {
		t.Fatalf("journal stats: got %+v, want records overwritten and at most the ring's %d bytes in whole pages, %d", st, journalHdrLen+MinJournalBytes, ringMax)
	}
	dst, scan, n := restore(t, jf.last(), 0, clk)
	if !hit(dst, t, "host-5999.example.", clk) || hit(dst, t, "host-0.example.", clk) {
		t.Errorf("after restore: newest hit %v, oldest hit %v; want the newest only", hit(dst, t, "host-5999.example.", clk), hit(dst, t, "host-0.example.", clk))
	}
	for i := 6000 - n; i < 6000; i++ {
		if name := fmt.Sprintf("host-%d.example.", i); !hit(dst, t, name, clk) {
			t.Fatalf("%s, among the newest %d: got a miss after restore", name, n)
		}
	}
	t.Logf("a %d KiB ring holds %d records (%d bytes of them)", MinJournalBytes>>10, scan.Records, scan.Bytes)

	// A restart continues the ring.
	_ = j.file.Close()
	cont := filled(t, 0, clk)
	if _, err := cont.ImportJournal(t.Context(), jf.last(), scan, 0); err != nil {
		t.Fatal(err)
	}
	j2, err := cont.newJournal(JournalConfig{File: jf.last(), Scan: scan, NewFile: jf.config(0).NewFile, Publish: jf.config(0).Publish})
	if err != nil {
		t.Fatal(err)
	}
	fillRing(t, cont, j2, 6000, 7000)
	again, scan2, _ := restore(t, jf.last(), 0, clk)
	if !hit(again, t, "host-6999.example.", clk) || !hit(again, t, "host-5990.example.", clk) || scan2.Records < n-1000 {
		t.Errorf("after a second restore: %d records; host-6999 hit %v, host-5990 hit %v; want both", scan2.Records,
			hit(again, t, "host-6999.example.", clk), hit(again, t, "host-5990.example.", clk))
	}

	small, _, m := restore(t, jf.last(), 20*(entryOverhead+60), clk)
	if m == 0 || m >= scan2.Records || !hit(small, t, "host-6999.example.", clk) {
		t.Errorf("bounded import: got %d of %d entries (newest hit %v), want fewer, the newest among them", m, scan2.Records,
			hit(small, t, "host-6999.example.", clk))
	}
}

// A process killed between any two writes of a batch, or in the middle of
// one (half its bytes written), the ring full and wrapping, leaves a
// journal whose every record imports: none torn, none half overwritten.
func TestJournalKilledMidBatch(t *testing.T) {
	clk, src, _, j := smallRing(t)
	fillRing(t, src, j, 0, 6000)
	points, torn := 0, 0
	check := func(what string, off int64, part []byte) {
		cp, err := os.Create(filepath.Join(t.TempDir(), "copy"))
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Close()
		if _, err := io.Copy(cp, io.NewSectionReader(j.file, 0, 1<<30)); err != nil {
			t.Fatal(err)
		}
		if _, err := cp.WriteAt(part, off); err != nil {
			t.Fatal(err)
		}
		_, scan, n := restore(t, cp, 0, clk)
		if n != scan.Records || n == 0 {
			t.Fatalf("killed %s write %d: %d of %d records imported", what, points, n, scan.Records)
		}
	}
	writes, most := 0, 0 // record writes in this batch, and the most in one
	journalWriteHook = func(off int64, b []byte) {
		points++
		check("before", 0, nil)
		if len(b) > 1 {
			torn++
			check("in the middle of", off, b[:len(b)/2])
		}
		if b == nil { // the header that ends a batch
			most, writes = max(most, writes), 0
		} else {
			writes++
		}
	}
	t.Cleanup(func() { journalWriteHook = func(int64, []byte) {} })
	fillRing(t, src, j, 6000, 6150)
	// 15 batches: at least their records' write and the header's each.
	if points < 30 || torn < 15 || j.Stats().Overwritten == 0 {
		t.Fatalf("%d kill points (%d in a write), %+v: want the ring wrapping under them", points, torn, j.Stats())
	}
	// The records of a batch go out in one write, or three where the ring
	// wraps (the zero length that marks the skip, then the records before
	// and after): not one write each.
	if most > 3 {
		t.Errorf("record writes in one batch of 10: got %d, want at most 3", most)
	}
}

// A journal's size is checked.
func TestJournalSize(t *testing.T) {
	c := filled(t, 0, newClock())
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	if _, err := c.newJournal(jf.config(MinJournalBytes - 1)); err == nil {
		t.Error("a ring below MinJournalBytes: got no error")
	}
}

// Names in use survive a flood of new names that overwrites the ring
// several times: a record hit since it was written is written again before
// it is overwritten. Names not in use go.
func TestJournalKeepsNamesInUse(t *testing.T) {
	clk, src, jf, j := smallRing(t)
	fillRing(t, src, j, 0, 20) // host-0..9 in use, host-10..19 not
	for i := 20; i < 10000; i += 10 {
		for k := range 10 {
			if !hit(src, t, fmt.Sprintf("host-%d.example.", k), clk) {
				t.Fatalf("host-%d in the source cache: a miss", k)
			}
		}
		fillRing(t, src, j, i, i+10)
	}
	if err := j.flush(); err != nil { // the last second chances
		t.Fatal(err)
	}
	st := j.Stats()
	dst, scan, _ := restore(t, jf.last(), 0, clk)
	for k := range 20 {
		name := fmt.Sprintf("host-%d.example.", k)
		if got, want := hit(dst, t, name, clk), k < 10; got != want {
			t.Errorf("%s after a flood of %d records in a ring of %d: hit %v, want %v", name, st.Records, scan.Records, got, want)
		}
	}
	if st.Rewritten == 0 || st.Rewritten > st.Records-st.Rewritten {
		t.Errorf("journal stats %+v: want records written again, no more than the inserts", st)
	}
}

// What ScanJournal finds is what the writer wrote, after every batch of a
// ring wrapping over records whose lengths make the last one before the
// ring's end end exactly there, or leave 1 byte (no room for a length),
// or leave room for the zero length that says skip.
func TestJournalScanMatchesWriter(t *testing.T) {
	_, _, _, j := smallRing(t)
	for _, rest := range []int64{0, 1, 2, 3, 50} {
		n := int64(200)
		for MinJournalBytes%n != rest {
			n++
		}
		for range 3 * MinJournalBytes / n / 16 { // three times round, 16 records a batch
			var b []byte
			var items []ringItem
			for range 16 {
				b = binary.BigEndian.AppendUint16(b, uint16(n-journalHeadLen))
				b = append(b, make([]byte, n-journalLenLen)...)
				items = append(items, ringItem{n: int32(n)})
			}
			if _, err := j.write(b, items); err != nil {
				t.Fatal(err)
			}
			checkScan(t, j, fmt.Sprintf("records of %d bytes", n))
		}
	}
}

// checkScan wants ScanJournal to find in j's file what j wrote.
func checkScan(t *testing.T, j *Journal, what string) {
	t.Helper()
	scan, err := ScanJournal(j.file)
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, it := range j.ring.live() {
		if it.n > 0 {
			records++
		}
	}
	if scan.Records != records || scan.Bytes != j.ring.used || scan.ring.tail != j.ring.tail {
		t.Fatalf("%s: scan found %d records in %d bytes from %d, the writer has %d in %d from %d",
			what, scan.Records, scan.Bytes, scan.ring.tail, records, j.ring.used, j.ring.tail)
	}
}

// A new journal on a warm cache is seeded with up to half its ring, in as
// many batches as that takes.
func TestJournalSeedsInBatches(t *testing.T) {
	clk := newClock()
	src := filled(t, 2000, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	j, err := src.newJournal(jf.config(MinJournalBytes))
	if err != nil {
		t.Fatal(err)
	}
	if err := j.flush(); err != nil {
		t.Fatal(err)
	}
	limit := int64(max(MinJournalBytes/8, maxJournalRecordLen))
	if st := j.Stats(); st.Records != 2001 || st.Bytes <= limit {
		t.Fatalf("journal stats after the seed: %+v, want all 2001 entries, more than one batch's %d bytes", st, limit)
	}
	dst, _, n := restore(t, jf.last(), 0, clk)
	if n != 2001 || !hit(dst, t, "host-0.example.", clk) || !hit(dst, t, "host-1999.example.", clk) {
		t.Errorf("restore of the seed: %d entries, want 2001 with the first and last hosts", n)
	}
}

// A name in use whose record was overwritten (a flood of new names while
// it was not asked) is written again when it is refreshed: a prefetch
// stores it as any insert does.
func TestJournalPrefetchWritesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk, src, jf, j := smallRing(t)
		fillRing(t, src, j, 0, 6000)
		if j.Stats().Overwritten == 0 {
			t.Fatal("the ring has not wrapped")
		}
		clk.Advance(271 * time.Second) // of the entries' 300: under 10 % left
		dst, _, _ := restore(t, jf.last(), 0, clk)
		if hit(dst, t, "host-0.example.", clk) {
			t.Fatal("host-0 restored before its prefetch: want its record overwritten")
		}
		for range 3 {
			if !hit(src, t, "host-0.example.", clk) {
				t.Fatal("host-0 in the source cache: a miss")
			}
			synctest.Wait()
		}
		if got := src.Stats().Prefetches; got != 1 {
			t.Fatalf("prefetches: got %d, want 1", got)
		}
		if err := j.flush(); err != nil {
			t.Fatal(err)
		}
		dst, _, _ = restore(t, jf.last(), 0, clk)
		if !hit(dst, t, "host-0.example.", clk) {
			t.Error("host-0 after its prefetch: not restored, want its record written again")
		}
	})
}

// Stats' Bytes is the memory the journal's file holds: all of the ring once
// it is allocated whole at start (the agent's fallocate), not just the
// records written so far, which is what the file's size says.
func TestJournalBytesCountsAllocatedRing(t *testing.T) {
	clk := newClock()
	src := filled(t, 0, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	cfg := jf.config(MinJournalBytes)
	newFile := cfg.NewFile
	cfg.NewFile = func() (*os.File, error) {
		f, err := newFile()
		if err != nil {
			return nil, err
		}
		if err := syscall.Fallocate(int(f.Fd()), 1 /* FALLOC_FL_KEEP_SIZE */, 0, MinJournalBytes); err != nil {
			_ = f.Close()
			t.Skipf("the test directory's file system does not allocate ahead (fallocate: %v); the agent's memfd does", err)
		}
		return f, nil
	}
	j, err := src.newJournal(cfg) // no writer goroutine: nothing written beyond the header
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.file.Close() }()
	fi, err := j.file.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Stats().Bytes; got < MinJournalBytes {
		t.Errorf("Stats().Bytes = %d with the file %d bytes long and %d allocated; want at least the %d-byte ring", got, fi.Size(), MinJournalBytes, MinJournalBytes)
	}
}
