// Package tap sends dnstap messages (dnstap.info) about the queries
// nodecache answers and the queries it forwards, over Frame Streams to a
// unix or TCP socket, as CoreDNS's dnstap plugin does.
//
// Messages: CLIENT_QUERY and CLIENT_RESPONSE for every answered query
// (with the query and reply bytes), FORWARDER_QUERY and FORWARDER_RESPONSE
// for every attempt sent to an upstream (the response only when one came).
// Messages are encoded on the serving goroutine into a bounded queue
// (Config.Buffer); when it is full a message is dropped and counted, never
// waited for. One goroutine owns the connection: it dials (again after a
// failure, every Config.RetryInterval), writes, and flushes whenever the
// queue is empty.
//
// Config: Addr "unix:///path" or "tcp://host:port" (required), Buffer
// 10000, RetryInterval 2s, WriteTimeout 5s, Identity (the node name) and
// Version. TCP is clear text: an address other than loopback logs one
// warning in New (the stream is meant for a collector on the node).
//
// Metrics: nodecache_dnstap_messages_total{result} (sent, dropped: the
// queue was full, lost: written to a connection that then failed).
package tap
