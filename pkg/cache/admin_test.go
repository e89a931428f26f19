package cache

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestFlush(t *testing.T) {
	all := []string{"a.example.", "a.example.", "b.example.", "x.a.example."}
	tests := []struct {
		name    string
		flush   func(c *Cache) int
		removed int
		left    []string
	}{
		{"all", (*Cache).FlushAll, 4, nil},
		{"no name removes nothing", func(c *Cache) int { return c.Flush("") }, 0, all},
		{"a name, every type", func(c *Cache) int { return c.Flush("A.example.") }, 2, []string{"b.example.", "x.a.example."}},
		{"no such name", func(c *Cache) int { return c.Flush("c.example.") }, 0, all},
		{"bad name", func(c *Cache) int { return c.Flush("a..example.") }, 0, all},
		{"a zone: the name and below", func(c *Cache) int { return c.FlushZone("A.example") }, 3, []string{"b.example."}},
		{"a zone on label boundaries", func(c *Cache) int { return c.FlushZone("xample.") }, 0, all},
		{"the root zone", func(c *Cache) int { return c.FlushZone(".") }, 4, nil},
		{"bad zone", func(c *Cache) int { return c.FlushZone("a..example") }, 0, all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestCache(t, Config{}, &fakeUpstream{reply: answerA(300)}, newClock())
			for _, q := range []*question{
				newQuestion(t, "a.example.", dns.TypeA), newQuestion(t, "a.example.", dns.TypeAAAA),
				newQuestion(t, "b.example.", dns.TypeA), newQuestion(t, "x.a.example.", dns.TypeA),
			} {
				resolve(t, c, q)
			}
			if got := tt.flush(c); got != tt.removed {
				t.Errorf("got %d removed, want %d", got, tt.removed)
			}
			var left []string
			c.Dump("", func(e EntryInfo) bool { left = append(left, e.Name); return true })
			slices.Sort(left)
			if !slices.Equal(left, tt.left) {
				t.Errorf("left: got %v, want %v", left, tt.left)
			}
			var bytes int64
			c.Dump("", func(e EntryInfo) bool { bytes += e.Size; return true })
			if got := c.Stats().Bytes; got != bytes {
				t.Errorf("bytes after Flush: got %d, want %d (the entries left)", got, bytes)
			}
		})
	}
}

func TestDump(t *testing.T) {
	clk := newClock()
	up := &fakeUpstream{reply: func(req *dns.Msg) (*dns.Msg, error) {
		if strings.HasPrefix(req.Question[0].Name, "short") {
			return replyA(req, 10), nil
		}
		return replyA(req, 300), nil
	}}
	c := newTestCache(t, Config{}, up, clk)
	for _, name := range []string{"a.example.org.", "short.example.org.", "b.example.com.", "example.org."} {
		resolve(t, c, newQuestion(t, name, dns.TypeA))
	}
	clk.Advance(20 * time.Second)

	tests := []struct {
		suffix string
		want   []string
	}{
		{"", []string{"a.example.org.", "b.example.com.", "example.org.", "short.example.org."}},
		{".", []string{"a.example.org.", "b.example.com.", "example.org.", "short.example.org."}},
		{"Example.ORG", []string{"a.example.org.", "example.org.", "short.example.org."}},
		{"ample.org.", nil},
		{"com.", []string{"b.example.com."}},
	}
	for _, tt := range tests {
		var got []string
		c.Dump(tt.suffix, func(e EntryInfo) bool { got = append(got, e.Name); return true })
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("Dump(%q): got %v, want %v", tt.suffix, got, tt.want)
		}
	}

	var info EntryInfo
	c.Dump("short.example.org.", func(e EntryInfo) bool { info = e; return true })
	want := EntryInfo{Name: "short.example.org.", Type: dns.TypeA, Class: dns.ClassINET, Kind: "positive",
		Rcode: dns.RcodeSuccess, TTL: 10 * time.Second, Left: -10 * time.Second, Stale: true, Size: info.Size}
	if info != want || info.Size <= 0 {
		t.Errorf("stale entry: got %+v, want %+v", info, want)
	}
	calls := 0
	c.Dump("", func(EntryInfo) bool { calls++; return false })
	if calls != 1 {
		t.Errorf("Dump with fn returning false: got %d calls, want 1", calls)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newClock()
	c, err := New(Config{Now: clk.Now}, &fakeUpstream{reply: answerA(300)}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	qs := newQuestion(t, "example.org.", dns.TypeA)
	resolve(t, c, qs)
	c.Lookup(&qs.q, clk.Now())
	resolve(t, c, newQuestion(t, "tc.example.", dns.TypeA)) // cached too: same fake

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+labelsOf(m)] = valueOf(m)
		}
	}
	want := map[string]float64{
		"nodecache_cache_entries":                             2,
		"nodecache_cache_hits_total":                          1,
		"nodecache_cache_misses_total":                        2,
		"nodecache_cache_evictions_total":                     0,
		"nodecache_cache_prefetches_total":                    0,
		"nodecache_cache_stale_answers_total":                 0,
		"nodecache_cache_inserts_total{kind=positive}":        2,
		"nodecache_cache_inserts_total{kind=servfail}":        0,
		"nodecache_cache_uncacheable_total{reason=no_soa}":    0,
		"nodecache_cache_uncacheable_total{reason=too_large}": 0,
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s: got %v (present %v), want %v", name, g, ok, v)
		}
	}
	if b := got["nodecache_cache_bytes"]; b <= 0 || b != float64(c.Stats().Bytes) {
		t.Errorf("nodecache_cache_bytes: got %v, want %d", b, c.Stats().Bytes)
	}
	if _, err := New(Config{}, &fakeUpstream{}, reg, nil); err == nil {
		t.Error("second New on the same registry: got nil, want a registration error")
	}
}

func labelsOf(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func valueOf(m *dto.Metric) float64 {
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}
