// Package server is nodecache's wire edge: the UDP and TCP listeners on every
// local IP, request validation, and the dispatch of each query to the
// cluster zone, the cache, or the upstream resolvers through the cache.
//
// Listening: one SO_REUSEPORT UDP socket per CPU and one TCP listener per
// address. A cache hit or a memoized cluster-zone answer is written from the
// UDP read loop itself, from stored wire bytes, without allocating; a miss
// leaves the loop for a reused worker goroutine (pkg/workers), bounded by
// Config.MaxInFlight and, per client IP, by Config.MaxInFlightPerClient (UDP
// and TCP alike; over either, REFUSED). On Linux its reply goes out in a
// sendmmsg with others (late_linux.go): the read loop's next batch while the
// loop runs, else one a worker sends once the goroutines ready to run have
// queued theirs. TCP serves pipelined queries
// (several in flight per connection, replies in completion order), with an
// idle timeout, queries of at most 1 KiB parsed in the connection's read
// buffer, and caps on connections, in all and per client IP. A panic while
// answering a query is recovered: that query gets SERVFAIL, the rest go on.
//
// A process restarted on sockets in which queries wait can hold some of
// them without a slow-path slot each (hold.go, zonehold.go): the misses
// until a restored cache has imported (HoldMisses), the cluster zone's
// names whose answer could be negative until the zone has listed
// (HoldZone); everything else is answered at once.
//
// The most specific zone wins, as in CoreDNS: a name under a stub domain
// that lies below the cluster domain (other-cluster.svc.cluster.local) or
// below a reverse tree is not the zone's; it goes through the cache to the
// stub's servers (stubcut.go).
//
// Validation, in one place (answer.go): an unparseable header or a response
// gets no reply; not exactly one question or a malformed body gets FORMERR;
// an opcode other than QUERY gets NOTIMP; EDNS version above 0 gets BADVERS;
// a class other than IN, and zone transfers, get REFUSED; ANY gets the
// minimal RFC 8482 answer; overload gets REFUSED (the per-client query
// rate and a resolver's ErrOverloaded here, the in-flight caps in fair.go);
// upstream failure SERVFAIL; a panic SERVFAIL (recover.go); a zone answer
// that cannot be packed, or whose ExternalName chase fails, SERVFAIL
// (zone.go).
// Replies fit the client: UDP size from EDNS (512 without, at most 1232),
// truncated with TC when larger, keeping the whole records that fit; the OPT
// record is echoed.
//
// Every answered query goes to Deps.Observer (client, question, result,
// latency: `nodecache tail`, the query log), to Deps.Counter (client,
// result, count, latency: the per-client counts of `nodecache top`) and,
// when set, to Deps.Tap with the query and reply bytes (dnstap). All are
// called on the serving goroutine and must not block. The batched UDP loop
// adds a batch's metrics and counts once, alike queries together, just
// before its replies are sent (tally.go); the totals are those of one
// query at a time.
//
// Metrics: nodecache_server_requests_total{proto,qtype}, nodecache_server_
// responses_total{source,rcode}, nodecache_server_request_duration_seconds
// {source}, nodecache_server_dropped_total{reason},
// nodecache_server_tcp_connections, nodecache_server_panics_total. Beside them, the CoreDNS-compatible
// series (coredns.go), with CoreDNS's names, labels and buckets:
// coredns_dns_requests_total{server,zone,view,proto,family,type},
// coredns_dns_responses_total{server,zone,view,rcode,plugin},
// coredns_dns_request_duration_seconds{server,zone,view},
// coredns_dns_request_size_bytes and _response_size_bytes
// {server,zone,view,proto}, coredns_dns_do_requests_total{server,zone,view}
// and the cache's coredns_cache_requests_total, _hits_total{type},
// _misses_total and _served_stale_total{server,zones,view}. server is
// "dns://" and the listen address the query came in on; zone is the cluster
// domain, a stub domain (Config.StubDomains) or "."; plugin says what
// answered (kubernetes, cache, forward, "" for the server's own refusals
// and errors). Children are made on first use, so only what happened is
// exported, and cost one atomic load each on the hit path after that.
package server
