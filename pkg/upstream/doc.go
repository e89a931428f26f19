// Package upstream forwards the queries nodecache cannot answer from its
// zone or cache to the node's upstream resolvers, and to the servers of
// stub domains.
//
// # Behaviour
//
// Forwarder.Exchange asks for one cache key's entry: it writes the query
// from the key's bytes (wire.Key.AppendRequest) and tries the servers of
// the matching set: the stub domain that is
// the longest suffix of the query name, else the default servers. Each
// attempt sends a new random query ID on a connected UDP socket, so the
// kernel picks a random source port and drops datagrams from any other
// address. A reply is taken only if it has that ID, QR set and the same
// question (name compared case-insensitively, type and class); anything
// else is counted as spoofed or malformed and the read goes on until the
// per-try timeout. The query name's letters go out in random case (0x20);
// once a server has echoed that case, a reply in another case is counted
// as spoofed too (after 8 distinct queries in a row answered only in
// another case the server counts as not echoing, re-tested every 5
// minutes). A truncated reply is retried over TCP on a connection from a
// small per-server pool (idle expiry, bounded, one owner at a
// time). A server that answers REFUSED is skipped in favour of the next;
// its reply is returned only if no other server answers.
//
// Each reply is read once, and what that read found goes with it to the
// caller (wire.UpstreamReply): one in the plain shape nearly every reply
// has is checked in place by wire.ScanUpstream (names, pointers, rdata
// lengths, the question against the request's), and the cache stores it
// from that scan; any other is unpacked with miekg/dns to check it, and
// handed over unpacked. A UDP reply is handed over in the pooled buffer it
// was read into, lent to it until the caller releases it
// (wire.UpstreamReply.Release).
//
// UDP sockets are pooled per server too, as dialling one per query was
// most of the miss path's CPU. A socket serves one query at a time and
// goes back to the pool only after a clean round trip: a timeout, a
// socket error (ICMP port unreachable included), a cancel, a truncated
// reply or any spoofed or malformed datagram read on the way closes it,
// so nothing an abandoned query left behind reaches the next. A pooled
// socket is also closed rather than reused when a datagram or an error
// waits on it. So that source ports keep rotating (RFC 5452), a socket
// serves at most 16 queries and lives at most 2s; at most 256 idle
// sockets (and no more than Config.MaxInFlight) are kept per server.
//
// Servers are ordered per query by Config.Policy (sequential, random,
// round_robin); servers marked down go last but are still tried, so a
// query never fails without reaching some server. A server is marked down
// after Config.FailThreshold consecutive timeouts or socket errors; one
// goroutine per down server then probes it with ". NS" queries, backing
// off from Config.ProbeInterval to 30 times it, until any valid reply
// brings it back (a successful real query does too).
//
// Exchange admits at most Config.MaxInFlight concurrent queries; beyond
// that it fails fast with ErrOverloaded, which the server edge maps to
// REFUSED. When no server answers before the deadline it returns
// ErrNoAnswer wrapping the last *AttemptError (SERVFAIL at the edge).
//
// Config.ForceTCP sends the default servers' queries over TCP alone
// (CoreDNS's force_tcp), and probes them over TCP when down, as it does for
// a stub domain's force-tcp servers. A stub domain may carry its own settings (Config.StubOptions, parsed by
// ParseStub): a policy, TCP only (force-tcp), a per-try timeout and
// an in-flight cap of its own, within the Forwarder's. Servers listed in
// Config.TLS are reached over DNS over TLS (RFC 7858): the same pooled
// connections as TCP, verified against the server name given, probed
// over TLS when down; their attempts count as proto "tcp".
//
// # Configuration
//
// Config lists the servers, the stub domains, the DNS over TLS servers,
// the policy, the per-try timeout (2s) and overall deadline (5s), the
// in-flight cap (1000), the fail threshold (3), the probe interval (1s),
// the TCP idle timeout (10s) and pool bound (8; a DNS over TLS server gets
// at most dotMaxConns, 32, connections in all, exchangetcp.go), and the agent's own listen
// addresses. New refuses an upstream that is one of those addresses, or a
// loopback address on the port of a wildcard listener: that would be a
// forwarding loop.
//
// The grammar of --upstream and --stub-domain is in spec.go and parsed
// nowhere else: ParseServers takes "IP[:port],tls://IP[:port][#NAME],..."
// or a resolv.conf path, ParseStub "domain=SERVER,... [options]" (its TTL
// caps are the cache's), and TLSConfigs turns the tls:// names into
// Config.TLS. LoadKubeDNSConfig reads a kube-dns ConfigMap directory with
// stubDomains and upstreamNameservers.
//
// # Metrics
//
//	nodecache_upstream_requests_total{server,proto}  attempts sent (proto udp|tcp), health probes not included
//	nodecache_upstream_responses_total{server,rcode} valid replies by rcode
//	nodecache_upstream_probes_total{server,result}   health probes of down servers (ok|failed)
//	nodecache_upstream_errors_total{server,kind}     kind: timeout, refused, conn_refused, spoofed,
//	                                                 malformed, network, truncated, canceled
//	nodecache_upstream_duration_seconds{server}      round-trip time of successful attempts
//	nodecache_upstream_healthy{server}               1 up, 0 marked down
//	nodecache_upstream_overloaded_total              queries refused by the in-flight cap
//
// The server label is the IP:port of a configured upstream, a bounded set.
//
// CoreDNS-compatible (coredns.go): coredns_proxy_request_duration_seconds
// {proxy_name="forward",to,rcode} and coredns_proxy_healthcheck_failures_total
// {proxy_name,to} as CoreDNS 1.15 names them; coredns_forward_healthcheck_
// broken_total and _max_concurrent_rejects_total; and the pre-1.11 per-upstream
// series the community's forward alerts still query: coredns_forward_requests_total
// {to}, _responses_total{rcode,to}, _request_duration_seconds{to,rcode} and
// _healthcheck_failures_total{to}. to is the upstream's IP:port.
package upstream
