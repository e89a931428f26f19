package server

import (
	"net/netip"
	"sync"

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

func newPerClient(limit int) *perClient {
	return &perClient{max: limit, held: make(map[netip.Addr]int)}
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
	return wire.AppendError(out, pkt, q, dns.RcodeRefused), Result{Rcode: dns.RcodeRefused, Source: wire.SourceLocal}
}
