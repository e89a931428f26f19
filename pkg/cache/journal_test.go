package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

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

// A journal started on a warm cache holds it (its first compaction) and
// then every insert; a record torn by a kill in mid-write is ignored.
func TestJournalRestoresAfterTornWrite(t *testing.T) {
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
	if st := j.Stats(); st.Records != 31 || st.Compactions != 1 {
		t.Errorf("journal stats: got %+v, want 31 records and the first compaction", st)
	}
	f := jf.last()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	whole := fi.Size()
	if _, err := f.WriteAt([]byte{0, 0, 0, 90, 5, 'h'}, whole); err != nil { // a record cut short
		t.Fatal(err)
	}
	dst, scan, n := restore(t, f, 0, clk)
	if scan.End != whole || scan.Records != 31 || n != 31 {
		t.Fatalf("restore: got end %d, %d records, %d imported; want end %d, 31, 31", scan.End, scan.Records, n, whole)
	}
	for _, name := range []string{"host-0.example.", "host-29.example.", "nx.example."} {
		if !hit(dst, t, name, clk) {
			t.Errorf("%s after restore: got a miss, want a hit", name)
		}
	}
}

// A journal that grows past MaxBytes compacts into a new file holding the
// most recently used entries, and an import bounded in bytes keeps the
// newest records.
func TestJournalCompactsAndImportKeepsNewest(t *testing.T) {
	clk := newClock()
	src := filled(t, 0, clk)
	jf := &journalFiles{tb: t, dir: t.TempDir()}
	j, err := src.newJournal(jf.config(8 << 10)) // no writer goroutine: the test flushes
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i += 10 {
		resolveHosts(t, src, i, i+10)
		if err := j.flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	_ = j.file.Close()
	st := j.Stats()
	if st.Compactions < 2 || st.Bytes > 8<<10 {
		t.Fatalf("journal stats: got %+v, want compactions past the first and at most 8 KiB", st)
	}
	dst, _, n := restore(t, jf.last(), 0, clk)
	if !hit(dst, t, "host-399.example.", clk) {
		t.Error("newest entry after compaction: got a miss, want a hit")
	}
	small, _, m := restore(t, jf.last(), 20*(entryOverhead+60), clk)
	if m == 0 || m >= n || !hit(small, t, "host-399.example.", clk) {
		t.Errorf("bounded import: got %d of %d entries (newest hit %v), want fewer, the newest among them", m, n,
			hit(small, t, "host-399.example.", clk))
	}
}
