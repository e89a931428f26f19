package static

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/pkg/wire"
)

func newRecords(tb testing.TB, cfg Config) (*Records, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r, reg
}

// ask returns what r answers for name/qtype: nil when it falls through.
func ask(tb testing.TB, r *Records, name string, qtype uint16) *dns.Msg {
	tb.Helper()
	req := new(dns.Msg)
	req.SetQuestion(name, qtype)
	req.Id = 4242
	pkt, err := req.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	var q wire.Query
	if err := wire.Parse(pkt, &q); err != nil {
		tb.Fatal(err)
	}
	p, ok := r.Lookup(&q)
	if !ok {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(p.AppendReply(nil, &q, wire.TTLMode{}, 65535)); err != nil {
		tb.Fatal(err)
	}
	return m
}

func rrStrings(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		out = append(out, rr.String())
	}
	return out
}

func TestLookup(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hosts")
	if err := os.WriteFile(file, []byte("# file\n10.0.0.7 files.example.internal\n2001:db8::7 files.example.internal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, reg := newRecords(t, Config{Entries: []string{"10.0.0.5 db.example.internal", "10.0.0.6 Cache.example.internal alias.example.internal # two names"},
		Files: []string{file}, TTL: time.Minute})
	tests := []struct {
		name  string
		qtype uint16
		want  []string // nil: falls through; empty: NODATA
	}{
		{"db.example.internal.", dns.TypeA, []string{"db.example.internal.\t60\tIN\tA\t10.0.0.5"}},
		{"DB.Example.Internal.", dns.TypeA, []string{"DB.Example.Internal.\t60\tIN\tA\t10.0.0.5"}},
		{"alias.example.internal.", dns.TypeA, []string{"alias.example.internal.\t60\tIN\tA\t10.0.0.6"}},
		{"files.example.internal.", dns.TypeAAAA, []string{"files.example.internal.\t60\tIN\tAAAA\t2001:db8::7"}},
		{"db.example.internal.", dns.TypeAAAA, []string{}},
		{"db.example.internal.", dns.TypeMX, []string{}},
		{"6.0.0.10.in-addr.arpa.", dns.TypePTR, []string{"6.0.0.10.in-addr.arpa.\t60\tIN\tPTR\tcache.example.internal.", "6.0.0.10.in-addr.arpa.\t60\tIN\tPTR\talias.example.internal."}},
		{"other.example.internal.", dns.TypeA, nil},
		{"example.internal.", dns.TypeA, nil},
	}
	for _, tt := range tests {
		m := ask(t, r, tt.name, tt.qtype)
		switch {
		case tt.want == nil && m != nil:
			t.Errorf("%s %d: got %v, want no answer (fall through)", tt.name, tt.qtype, m)
		case tt.want == nil:
		case m == nil:
			t.Errorf("%s %d: fell through, want %v", tt.name, tt.qtype, tt.want)
		case m.Rcode != dns.RcodeSuccess || m.Id != 4242 || !m.Authoritative || len(m.Answer) != len(tt.want):
			t.Errorf("%s %d: got %v, want NOERROR id 4242 with %v", tt.name, tt.qtype, m, tt.want)
		default:
			for i, rr := range rrStrings(m) {
				if rr != tt.want[i] {
					t.Errorf("%s %d: record %d: got %q, want %q", tt.name, tt.qtype, i, rr, tt.want[i])
				}
			}
		}
	}
	if got := testutil.ToFloat64(r.m.names); got != 8 {
		t.Errorf("got %v names, want 8 (4 names and the reverse names of 4 IPs)", got)
	}
	_ = reg
}

func TestNoReverseAndBadConfig(t *testing.T) {
	r, _ := newRecords(t, Config{Entries: []string{"10.0.0.5 db.example"}, NoReverse: true})
	if m := ask(t, r, "5.0.0.10.in-addr.arpa.", dns.TypePTR); m != nil {
		t.Errorf("got %v, want no PTR with NoReverse", m)
	}
	for name, cfg := range map[string]Config{
		"bad IP":       {Entries: []string{"10.0.0 db.example"}},
		"no name":      {Entries: []string{"10.0.0.5"}},
		"bad name":     {Entries: []string{"10.0.0.5 a..b"}},
		"missing file": {Files: []string{filepath.Join(t.TempDir(), "nope")}},
		"short TTL":    {TTL: time.Millisecond},
	} {
		if _, err := New(cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
}

// TestWatch changes the file under a running Run: a good file is picked
// up, a broken one keeps the table and counts an error.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "hosts")
		write := func(s string) {
			if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("10.0.0.1 a.example\n")
		r, _ := newRecords(t, Config{Files: []string{file}, Reload: 5 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()

		write("10.0.0.2 b.example\n")
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if ask(t, r, "b.example.", dns.TypeA) == nil || ask(t, r, "a.example.", dns.TypeA) != nil {
			t.Error("after the file changed: got the old table, want b.example only")
		}
		write("not an ip b.example c.example\n")
		time.Sleep(6 * time.Second)
		synctest.Wait()
		if ask(t, r, "b.example.", dns.TypeA) == nil {
			t.Error("after a broken file: got b.example gone, want the previous table kept")
		}
		if got := testutil.ToFloat64(r.m.reloads.WithLabelValues("error")); got != 1 {
			t.Errorf("got %v failed reloads, want 1", got)
		}
		cancel()
		<-done
	})
}

// TestPrepare checks that a prepared config is invisible until commit,
// and that a bad one is refused with the table left alone.
func TestPrepare(t *testing.T) {
	r, _ := newRecords(t, Config{Entries: []string{"10.0.0.1 a.example"}})
	commit, err := r.Prepare(Config{Entries: []string{"10.0.0.2 b.example"}, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if ask(t, r, "a.example.", dns.TypeA) == nil || ask(t, r, "b.example.", dns.TypeA) != nil {
		t.Fatal("before commit: got the new table, want the old one")
	}
	commit()
	m := ask(t, r, "b.example.", dns.TypeA)
	if m == nil || m.Answer[0].Header().Ttl != 30 || ask(t, r, "a.example.", dns.TypeA) != nil {
		t.Errorf("after commit: got %v, want b.example with TTL 30 only", m)
	}
	for _, bad := range []Config{{Entries: []string{"nonsense"}}, {TTL: time.Millisecond}, {Files: []string{"/nonexistent/hosts"}}} {
		if _, err := r.Prepare(bad); err == nil {
			t.Errorf("%+v: got no error", bad)
		}
	}
	if ask(t, r, "b.example.", dns.TypeA) == nil {
		t.Error("after refused configs: got the table changed")
	}
}

// BenchmarkLookup is the cost static records add to a query: a hit, and
// a miss (a name not in the table, as every query pays when records are
// configured or the table is empty).
func BenchmarkLookup(b *testing.B) {
	r, _ := newRecords(b, Config{Entries: []string{"10.0.0.5 db.example.internal", "10.0.0.6 cache.example.internal"}})
	for _, bc := range []struct{ name, qname string }{{"hit", "db.example.internal."}, {"miss", "www.example.org."}} {
		req := new(dns.Msg)
		req.SetQuestion(bc.qname, dns.TypeA)
		pkt, _ := req.Pack()
		var q wire.Query
		if err := wire.Parse(pkt, &q); err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Lookup(&q)
			}
		})
	}
}
