// Package cache is nodecache's reply cache for names outside the cluster
// zone: a byte-bounded LRU of upstream replies kept as wire.Packed, sharded
// by key hash (one simplelru.LRU and mutex per shard), in front of an
// Exchanger (the upstream forwarder).
//
// The hit path, Lookup, hashes the parsed query with a seeded maphash,
// checks the stored reply's own question and the entry's DO and CD bits
// against the query (a hash collision is a miss) and returns the Packed
// reply with the seconds elapsed since it was stored, rounded up so a
// served TTL never outlives the entry. It does not allocate. A hit moves
// its entry to the front of the shard's LRU only when more than a quarter
// of the shard's entries were inserted since the entry was last moved
// (shard.go, touchLocked): a name hit over and over costs a map probe and
// no list writes, and a name hit once per quarter-shard of inserts is
// never evicted for space.
//
// An entry keeps no separate copy of its name: the key is the reply's
// question. An entry and its reply are one pointer-free allocation: the
// entry's fields and its wire.Packed (40 bytes), then the reply and its
// TTL offsets (shard.go): a hit reads the map slot, the LRU's list element
// it points to and the entry the element points to, with the reply beside
// its fields, three dependent loads where a separate reply buffer made
// four. A one-A-record name costs about 215
// bytes of heap (that allocation, the LRU's 80-byte list element and its
// map slot; BenchmarkMemoryPerName), a name with make bench's reply (its
// record, the zone's NS and glue) 248; the cache charges about 230 and 264
// against MaxBytes (shard.go, entryOverhead), so the budget bounds the
// heap it holds. The process's
// RSS per name is larger by the room the collector lets the heap grow by
// (GOGC) as far as garbage fills it: what a miss allocates and does not
// keep costs memory too, not only CPU (docs/architecture.md, "What RSS
// holds above the live heap").
//
// The miss path, Resolve, folds concurrent misses for a key into one
// upstream query (a flight), except that a flight older than FlightMaxAge
// is not joined: a client's retry starts a fresh query. Replies are stored
// per RFC 2308 (policy.go): positive for the smallest answer TTL, negative
// (NXDOMAIN, NODATA) for min(SOA TTL, SOA MINIMUM), SERVFAIL for
// ServfailTTL, each capped; never truncated replies, replies to another
// question, negatives without SOA, other rcodes, or TTL 0. Record TTLs are
// clamped to the entry's lifetime before packing. A reply the forwarder
// scanned in place (wire.ScanUpstream) is judged and stored from its bytes
// and that scan (wire.PackUpstream); any other arrives unpacked and is
// packed.
//
// Popular entries (PrefetchMinHits hits) are refreshed once in the
// background when under PrefetchPercent of their TTL is left. When the
// upstream fails (any error but one wrapping wire.ErrOverloaded, or SERVFAIL), an entry
// expired no longer than StaleMaxAge ago is served with TTL StaleTTL
// (RFC 8767) and refreshed in the background; for StaleTTL after such a
// failure the name is answered stale without asking the upstream. Expired
// entries therefore stay, charged to the byte budget, until the LRU evicts
// them or they are found past StaleMaxAge.
//
// Export and Import hand the warm cache to a successor process over a
// versioned, length-prefixed stream. The journal (journal.go) keeps a copy
// in a file another process holds, for a restart after a crash: a miss's
// insert queues its entry, and a goroutine of the journal's own appends the
// queued records every 20 ms to a ring of a fixed size (DefaultJournalBytes,
// 5 MiB), overwriting the oldest records once it is full; it is never
// rewritten nor copied, and writing it makes no garbage. A record is an
// entry's kind, lifetime and stored time and its reply, whose question is
// the key (journalrecord.go). Lookup does not touch it. ScanJournal and
// ImportJournal read it back, oldest first, skipping under a byte bound
// the oldest records; each record is judged again as a fetched reply
// would be (admit.go), read in place by wire.ScanUpstream.
//
// Config (zero values select defaults): MaxBytes 64 MiB, MaxTTL 1h,
// MaxNegativeTTL 1h, ServfailTTL 5s, StaleMaxAge 1h (negative disables),
// StaleTTL 30s, FlightMaxAge 2s, RefreshTimeout 5s, PrefetchPercent 10
// (negative disables), PrefetchMinHits 2, MaxPrefetches 16, Shards
// automatic, Now time.Now. ZoneLimits caps the TTLs of
// names under some zones apart from MaxTTL and MaxNegativeTTL (the longest
// zone wins whole; a zero cap is the cache-wide one); SetZoneLimits
// replaces them while running, for entries stored from then on.
//
// Stats.Denials counts the negative and SERVFAIL entries held, and
// Stats.EvictedDenials those evicted for space (the agent serves
// coredns_cache_entries and _evictions_total{type="denial"} from them).
//
// Metrics: nodecache_cache_entries and nodecache_cache_bytes (gauges),
// nodecache_cache_hits_total, nodecache_cache_misses_total,
// nodecache_cache_evictions_total, nodecache_cache_prefetches_total,
// nodecache_cache_stale_answers_total, nodecache_cache_inserts_total{kind}
// (positive|negative|servfail) and nodecache_cache_uncacheable_total{reason}
// (truncated|question_mismatch|no_soa|rcode|zero_ttl|too_large|bad_reply|import_rejected;
// the last: an entry imported from a predecessor that a fetch would not have stored as claimed).
package cache
