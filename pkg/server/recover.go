package server

import (
	"errors"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// A panic while answering one query must not take DNS away from the node:
// each place that answers queries (the UDP read loop per datagram, a TCP
// connection per query, the slow-path workers) recovers it, answers that
// query SERVFAIL and goes on.

// servfailAfterPanic accounts a panic recovered while answering pkt and
// returns the SERVFAIL to send for it (appended to out), or nil when pkt
// gets no reply at all. The panic is counted in nodecache_server_panics_total
// and logged at Error with its stack, at most once per 10 s (the counter
// has them all). It must be called from the deferred function that
// recovered, so that the stack is still the panicking one.
func (s *Server) servfailAfterPanic(v any, pkt, out []byte) []byte {
	s.metrics.panics.Inc()
	if s.logLimiter.allow("panic", time.Now()) {
		s.log.Error("recovered from a panic answering a query; answered SERVFAIL", logkey.Panic, v, logkey.Stack, string(debug.Stack()))
	}
	var q wire.Query
	if err := wire.Parse(pkt, &q); errors.Is(err, wire.ErrNoReply) {
		return nil
	}
	return wire.AppendError(out, pkt, &q, dns.RcodeServerFailure)
}

// recoverDatagram, deferred around one datagram's handling in the read
// loop, answers SERVFAIL when it panicked and lets the loop go on.
func (s *Server) recoverDatagram(pkt []byte, client netip.AddrPort, rq replyQueue) {
	if v := recover(); v != nil {
		if reply := s.servfailAfterPanic(v, pkt, rq.slot()); reply != nil {
			_ = rq.queue(reply, client)
		}
	}
}
