package cache

import (
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/wire"
)

// EntryInfo describes one cached entry, for `nodecache cache dump`.
type EntryInfo struct {
	Name   string        // presentation form, lowercased ("example.org.")
	Type   uint16        // dns.TypeA, ...
	Class  uint16        // dns.ClassINET, ...
	DO, CD bool          // the key's DNSSEC bits
	Kind   string        // "positive", "negative" or "servfail"
	Rcode  int           // the reply's rcode
	TTL    time.Duration // original lifetime of the entry
	Left   time.Duration // time until expiry; negative once expired
	Stale  bool          // expired, kept for serve-stale
	Size   int64         // bytes charged against the budget
}

// Dump calls fn for every entry whose name is suffix or below it (on label
// boundaries, case-insensitively; "" or "." for all), most recently used
// first within each shard, until fn returns false. fn runs without any lock
// held.
func (c *Cache) Dump(suffix string, fn func(EntryInfo) bool) {
	if suffix != "" {
		suffix = dns.Fqdn(suffix)
	}
	now := c.cfg.Now()
	for _, s := range c.shards {
		for _, e := range s.snapshot() {
			key := e.key()
			name := key.PresentationName()
			if suffix != "" && !dns.IsSubDomain(suffix, name) {
				continue
			}
			if !fn(infoOf(e, &key, name, now)) {
				return
			}
		}
	}
}

func infoOf(e *entry, key *wire.Key, name string, now time.Time) EntryInfo {
	return EntryInfo{
		Name: name, Type: key.Type, Class: key.Class, DO: key.DO, CD: key.CD,
		Kind: e.kind.String(), Rcode: e.packed.Rcode(), TTL: e.lifetime(), Left: e.expire().Sub(now),
		Stale: !e.fresh(now), Size: e.size(),
	}
}

// Flush removes every entry for name, of any type, class and DNSSEC bits
// (not names below it), and returns how many it removed. A name that is
// empty or not a domain name removes nothing.
func (c *Cache) Flush(name string) int {
	if name == "" {
		return 0
	}
	k, err := wire.NewKey(name, 0, 0, false, false)
	if err != nil {
		return 0
	}
	return c.removeIf(func(e *entry) bool { return e.hasName(k.Name) })
}

// FlushZone removes the entries for zone and every name below it
// (case-insensitively, on label boundaries) and returns how many it
// removed; "." removes all. A zone that is not a domain name removes
// nothing.
func (c *Cache) FlushZone(zone string) int {
	zone = dns.Fqdn(zone)
	if _, ok := dns.IsDomainName(zone); !ok || zone == "" {
		return 0
	}
	return c.removeIf(func(e *entry) bool {
		k := e.key()
		return dns.IsSubDomain(zone, k.PresentationName())
	})
}

// FlushAll empties the cache and returns how many entries it removed.
func (c *Cache) FlushAll() int {
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		n += s.lru.Len()
		s.lru.Purge()
		s.bytes = 0
		s.kinds = [numKinds]int{}
		s.failed = nil
		s.mu.Unlock()
	}
	return n
}

// removeIf removes the entries drop selects and returns how many.
func (c *Cache) removeIf(drop func(*entry) bool) int {
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		for _, h := range s.lru.Keys() {
			if e, ok := s.lru.Peek(h); ok && drop(e) {
				s.removeLocked(h)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// metrics counts what the cache does with plain atomics (hits are counted
// per shard under its lock, which the hit path holds anyway) and exposes
// them as a prometheus.Collector, so the hit path does no metric lookups.
type metrics struct {
	c *Cache // for the per-shard figures

	misses      atomic.Uint64
	evictions   atomic.Uint64
	prefetches  atomic.Uint64
	stale       atomic.Uint64
	inserts     [numKinds]atomic.Uint64
	uncacheable [numReasons]atomic.Uint64

	entriesDesc, bytesDesc, hitsDesc, missesDesc, evictionsDesc *prometheus.Desc
	prefetchesDesc, staleDesc, insertsDesc, uncacheableDesc     *prometheus.Desc
}

func newMetrics(c *Cache) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("nodecache_cache_"+name, help, labels, nil)
	}
	return &metrics{
		c:               c,
		entriesDesc:     d("entries", "Replies held in the cache, fresh or stale."),
		bytesDesc:       d("bytes", "Bytes the cache accounts for its entries, bounded by its byte budget."),
		hitsDesc:        d("hits_total", "Queries answered from a fresh cache entry."),
		missesDesc:      d("misses_total", "Queries that needed an upstream query (joined or started)."),
		evictionsDesc:   d("evictions_total", "Entries evicted, least recently used first, to stay within the byte budget."),
		prefetchesDesc:  d("prefetches_total", "Popular entries refreshed in the background before they expired."),
		staleDesc:       d("stale_answers_total", "Queries answered from an expired entry because the upstream failed (RFC 8767)."),
		insertsDesc:     d("inserts_total", "Replies stored, by kind.", "kind"),
		uncacheableDesc: d("uncacheable_total", "Upstream replies not stored, by reason.", "reason"),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.entriesDesc, m.bytesDesc, m.hitsDesc, m.missesDesc, m.evictionsDesc,
		m.prefetchesDesc, m.staleDesc, m.insertsDesc, m.uncacheableDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.c.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(m.entriesDesc, float64(st.Entries))
	gauge(m.bytesDesc, float64(st.Bytes))
	counter(m.hitsDesc, st.Hits)
	counter(m.missesDesc, st.Misses)
	counter(m.evictionsDesc, st.Evictions)
	counter(m.prefetchesDesc, st.Prefetches)
	counter(m.staleDesc, st.Stale)
	for k := range numKinds {
		counter(m.insertsDesc, m.inserts[k].Load(), k.String())
	}
	for r := reasonNone + 1; r < numReasons; r++ {
		counter(m.uncacheableDesc, m.uncacheable[r].Load(), r.String())
	}
}

// Stats is a snapshot of the cache's figures.
type Stats struct {
	Entries   int    // entries held, fresh or stale
	Denials   int    // of those, negative and SERVFAIL entries
	Bytes     int64  // bytes accounted, at most Config.MaxBytes
	Hits      uint64 // fresh answers
	Misses    uint64 // queries that went to an upstream flight
	Evictions uint64 // entries evicted for space
	// EvictedDenials is how many of those were negative or SERVFAIL.
	EvictedDenials uint64
	Prefetches     uint64  // prefetches started
	Stale          uint64  // stale answers served
	HitRate        float64 // Hits / (Hits + Misses); 0 before any query
}

// Stats returns the cache's current figures.
func (c *Cache) Stats() Stats {
	var st Stats
	for _, s := range c.shards {
		s.mu.Lock()
		st.Entries += s.lru.Len()
		st.Denials += s.kinds[kindNegative] + s.kinds[kindServfail]
		st.EvictedDenials += s.evictedDenials
		st.Bytes += s.bytes
		st.Hits += s.hits
		s.mu.Unlock()
	}
	st.Misses = c.met.misses.Load()
	st.Evictions = c.met.evictions.Load()
	st.Prefetches = c.met.prefetches.Load()
	st.Stale = c.met.stale.Load()
	if total := st.Hits + st.Misses; total > 0 {
		st.HitRate = float64(st.Hits) / float64(total)
	}
	return st
}
