// Package server is nodecache's wire edge: the UDP and TCP listeners on every
// local IP, request validation, and the dispatch of each query to the
// cluster zone, the cache, or the upstream resolvers through the cache.
//
// Listening: one SO_REUSEPORT UDP socket per CPU and one TCP listener per
// address. A cache hit or a memoized cluster-zone answer is written from the
// UDP read loop itself, from stored wire bytes, without allocating; a miss
// leaves the loop for a reused worker goroutine (internal/workers), bounded by
// Config.MaxInFlight and, per client IP, by Config.MaxInFlightPerClient (UDP
// and TCP alike; over either, REFUSED). TCP serves pipelined queries
// (several in flight per connection, replies in completion order), with an
// idle timeout, queries of at most 1 KiB parsed in the connection's read
// buffer, and caps on connections, in all and per client IP. A panic while
// answering a query is recovered: that query gets SERVFAIL, the rest go on.
//
// Validation, in one place (answer.go): an unparseable header or a response
// gets no reply; not exactly one question or a malformed body gets FORMERR;
// an opcode other than QUERY gets NOTIMP; EDNS version above 0 gets BADVERS;
// a class other than IN, and zone transfers, get REFUSED; ANY gets the
// minimal RFC 8482 answer; overload gets REFUSED; upstream failure SERVFAIL.
// Replies fit the client: UDP size from EDNS (512 without, at most 1232),
// truncated with TC when larger; the OPT record is echoed.
//
// Metrics: nodecache_server_requests_total{proto,qtype}, nodecache_server_
// responses_total{source,rcode}, nodecache_server_request_duration_seconds
// {source}, nodecache_server_dropped_total{reason},
// nodecache_server_tcp_connections, nodecache_server_panics_total.
package server
