package server

import (
	"errors"
	"net/netip"
	"runtime/debug"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// perClient counts what each client IP holds of a shared resource (slow-path
// slots, TCP connections) and caps it, so that one pod cannot take all of
// it. The map holds only clients that hold something, so it is bounded by
// the resource's own global cap.
type perClient struct {
	max int

	mu   sync.Mutex // guards held
	held map[netip.Addr]int
}

func newPerClient(max int) *perClient {
	return &perClient{max: max, held: make(map[netip.Addr]int)}
}

// acquire takes one for client unless it holds max already.
func (p *perClient) acquire(client netip.Addr) bool {
	client = client.Unmap()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[client] >= p.max {
		return false
	}
	p.held[client]++
	return true
}

func (p *perClient) release(client netip.Addr) {
	client = client.Unmap()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[client] <= 1 {
		delete(p.held, client)
		return
	}
	p.held[client]--
}

// acquireSlot takes a slow-path slot for client: one of the client's
// MaxInFlightPerClient and one of the server's MaxInFlight, the same bound
// for UDP and TCP. On false the query is answered REFUSED.
func (s *Server) acquireSlot(client netip.Addr) bool {
	if !s.clientSlots.acquire(client) {
		s.metrics.dropped("client_inflight_limit")
		return false
	}
	if !s.inflight.TryAcquire(1) {
		s.clientSlots.release(client)
		s.metrics.dropped("inflight_limit")
		return false
	}
	return true
}

func (s *Server) releaseSlot(client netip.Addr) {
	s.inflight.Release(1)
	s.clientSlots.release(client)
}

// refused is the reply to a query over a cap.
func refused(out, pkt []byte, q *wire.Query) ([]byte, Result) {
	return wire.AppendError(out, pkt, q, dns.RcodeRefused), Result{Rcode: dns.RcodeRefused, Source: SourceLocal}
}

// servfailAfterPanic accounts a panic recovered while answering pkt and
// returns the SERVFAIL to send for it (appended to out), or nil when pkt
// gets no reply at all. The panic is counted in nodecache_server_panics_total
// and logged at Error with its stack, at most once per 10 s (the counter
// has them all). It must be called from the deferred function that
// recovered, so that the stack is still the panicking one.
func (s *Server) servfailAfterPanic(v any, pkt, out []byte) []byte {
	s.metrics.panics.Inc()
	if s.logLimiter.allow("panic", time.Now()) {
		s.log.Error("recovered from a panic answering a query; answered SERVFAIL", "panic", v, "stack", string(debug.Stack()))
	}
	var q wire.Query
	if err := wire.Parse(pkt, &q); errors.Is(err, wire.ErrNoReply) {
		return nil
	}
	return wire.AppendError(out, pkt, &q, dns.RcodeServerFailure)
}
