package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// filled returns a cache holding n positive entries host-i.example A (TTL
// 300) and one negative entry nx.example A (30s), stored at t0.
func filled(tb testing.TB, n int, clk *clock) *Cache {
	tb.Helper()
	up := &fakeUpstream{reply: func(req *dns.Msg) (*dns.Msg, error) {
		if req.Question[0].Name == "nx.example." {
			return replyNeg(req, dns.RcodeNameError, 30, 30), nil
		}
		return replyA(req, 300), nil
	}}
	c := newTestCache(tb, Config{}, up, clk)
	for i := range n {
		resolve(tb, c, newQuestion(tb, fmt.Sprintf("host-%d.example.", i), dns.TypeA))
	}
	resolve(tb, c, newQuestion(tb, "nx.example.", dns.TypeA))
	return c
}

func TestExportImportRoundTrip(t *testing.T) {
	clk := newClock()
	src := filled(t, 20, clk)
	clk.Advance(10 * time.Second)
	var buf bytes.Buffer
	n, err := src.Export(&buf, 0, time.Time{})
	if err != nil || n != 21 {
		t.Fatalf("Export: got %d, %v; want 21 entries", n, err)
	}
	clk.Advance(25 * time.Second) // the negative entry expires during the handover
	dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
	n, err = dst.Import(bytes.NewReader(buf.Bytes()), time.Time{})
	if err != nil || n != 20 {
		t.Fatalf("Import: got %d, %v; want 20 entries", n, err)
	}
	qs := newQuestion(t, "HOST-7.example.", dns.TypeA)
	p, mode, ok := dst.Lookup(&qs.q, clk.Now())
	if !ok || mode.Elapsed != 35 || p.Rcode() != dns.RcodeSuccess {
		t.Fatalf("Lookup after Import: got hit %v elapsed %d, want a hit 35s old", ok, mode.Elapsed)
	}
	if got := ttls(served(t, p, qs, mode)); len(got) != 1 || got[0] != 265 {
		t.Errorf("served TTLs: got %v, want [265]", got)
	}
	nx := newQuestion(t, "nx.example.", dns.TypeA)
	if _, _, ok := dst.Lookup(&nx.q, clk.Now()); ok {
		t.Error("entry expired before Import: got a hit, want a miss")
	}
}

func TestExportBounds(t *testing.T) {
	clk := newClock()
	src := filled(t, 50, clk)
	tests := []struct {
		name     string
		maxBytes int64
		deadline time.Time
		max      int
		err      error
	}{
		{"no bound", 0, time.Time{}, 51, nil},
		{"byte bound", 1024, time.Time{}, 50, nil},
		{"deadline passed", 0, t0, 0, os.ErrDeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := src.Export(&buf, tt.maxBytes, tt.deadline)
			if !errors.Is(err, tt.err) || n > tt.max || (tt.max > 0 && n == 0) {
				t.Fatalf("Export: got %d, %v; want at most %d, %v", n, err, tt.max, tt.err)
			}
			if tt.maxBytes > 0 && int64(buf.Len()) > tt.maxBytes {
				t.Errorf("dump size: got %d, want at most %d", buf.Len(), tt.maxBytes)
			}
			dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
			if got, err := dst.Import(&buf, time.Time{}); err != nil || got != n {
				t.Errorf("Import of a bounded dump: got %d, %v; want %d, nil", got, err, n)
			}
		})
	}
}

func TestImportRefusesGarbage(t *testing.T) {
	clk := newClock()
	var good bytes.Buffer
	if _, err := filled(t, 2, clk).Export(&good, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	g := good.Bytes()
	firstLen := int(binary.BigEndian.Uint32(g[8:]))
	withRecord := func(rec []byte) []byte {
		b := append([]byte(nil), g[:8]...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(rec)))
		return append(b, rec...)
	}
	firstRec := g[12 : 12+firstLen]
	mutated := func(i int, v byte) []byte {
		rec := append([]byte(nil), firstRec...)
		rec[i] = v
		return withRecord(rec)
	}
	nameLen := int(firstRec[0])
	tests := []struct {
		name string
		in   []byte
		n    int
	}{
		{"empty", nil, 0},
		{"bad magic", append([]byte("XXCACHE\x01"), g[8:]...), 0},
		{"future version", append([]byte("NCCACHE\x02"), g[8:]...), 0},
		{"no end marker", g[:len(g)-4], 3},
		{"cut in a record", g[:12+firstLen-5], 0},
		{"huge length", binary.BigEndian.AppendUint32(append([]byte(nil), g[:8]...), 1<<31), 0},
		{"tiny length", withRecord([]byte{0, 1, 2}), 0},
		{"name length overrun", mutated(0, 255), 0},
		{"bad kind", mutated(1+nameLen+5, 9), 0},
		{"bad flags", mutated(1+nameLen+4, 0x80), 0},
		{"uppercase name", mutated(2, 'H'), 0},
		{"garbage reply", append(withRecord(append(append([]byte(nil), firstRec[:1+nameLen+22]...), 1, 2, 3)), 0, 0, 0, 0), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := newTestCache(t, Config{}, &fakeUpstream{reply: failing}, clk)
			n, err := dst.Import(bytes.NewReader(tt.in), time.Time{})
			if !errors.Is(err, ErrBadDump) || n != tt.n {
				t.Errorf("Import: got %d, %v; want %d, ErrBadDump", n, err, tt.n)
			}
			if got := dst.Stats().Entries; got != tt.n {
				t.Errorf("entries after refused Import: got %d, want %d", got, tt.n)
			}
		})
	}
}

func TestImportCapsTTL(t *testing.T) {
	clk := newClock()
	var buf bytes.Buffer
	if _, err := filled(t, 1, clk).Export(&buf, 0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	dst := newTestCache(t, Config{MaxTTL: time.Minute}, &fakeUpstream{reply: failing}, clk)
	if _, err := dst.Import(&buf, time.Time{}); err != nil {
		t.Fatal(err)
	}
	qs := newQuestion(t, "host-0.example.", dns.TypeA)
	clk.Advance(time.Minute)
	if _, _, ok := dst.Lookup(&qs.q, clk.Now()); ok {
		t.Error("imported 300s entry past the importer's 1m MaxTTL: got a hit, want a miss")
	}
}

func FuzzImport(f *testing.F) {
	clk := newClock()
	var good bytes.Buffer
	if _, err := filled(f, 3, clk).Export(&good, 0, time.Time{}); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add([]byte("NCCACHE\x01\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := newTestCache(t, Config{MaxBytes: 64 << 10, Shards: 1}, &fakeUpstream{reply: failing}, clk)
		n, err := c.Import(bytes.NewReader(in), time.Time{})
		if err != nil && !errors.Is(err, ErrBadDump) {
			t.Errorf("Import: got %v, want nil or ErrBadDump", err)
		}
		if st := c.Stats(); st.Entries > n || st.Bytes > 64<<10 {
			t.Errorf("after Import of %d: got %d entries, %d bytes", n, st.Entries, st.Bytes)
		}
	})
}

// BenchmarkExportImport hands over 10,000 entries per iteration.
func BenchmarkExportImport(b *testing.B) {
	clk := newClock()
	src := filled(b, 10000, clk)
	dst := newTestCache(b, Config{}, &fakeUpstream{reply: failing}, clk)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if _, err := src.Export(&buf, 0, time.Time{}); err != nil {
			b.Fatal(err)
		}
		if _, err := dst.Import(&buf, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10001, "ns/entry")
}
