package cache

import (
	"time"

	"github.com/miekg/dns"

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
			name := e.key.PresentationName()
			if suffix != "" && !dns.IsSubDomain(suffix, name) {
				continue
			}
			if !fn(infoOf(e, name, now)) {
				return
			}
		}
	}
}

func infoOf(e *entry, name string, now time.Time) EntryInfo {
	return EntryInfo{
		Name: name, Type: e.key.Type, Class: e.key.Class, DO: e.key.DO, CD: e.key.CD,
		Kind: e.kind.String(), Rcode: e.packed.Rcode(), TTL: e.ttl, Left: e.expire.Sub(now),
		Stale: !e.fresh(now), Size: e.size,
	}
}

// Flush removes every entry for name, of any type, class and DNSSEC bits
// (not names below it), and returns how many it removed. "" removes all.
func (c *Cache) Flush(name string) int {
	var want string
	if name != "" {
		k, err := wire.NewKey(name, 0, 0, false, false)
		if err != nil {
			return 0
		}
		want = k.Name
	}
	n := 0
	for _, s := range c.shards {
		s.mu.Lock()
		if want == "" {
			n += s.lru.Len()
			s.lru.Purge()
			s.bytes = 0
			s.mu.Unlock()
			continue
		}
		for _, h := range s.lru.Keys() {
			if e, ok := s.lru.Peek(h); ok && e.key.Name == want {
				s.removeLocked(h)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}
