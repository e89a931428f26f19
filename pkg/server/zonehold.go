package server

import (
	"net/netip"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// HoldZone lets a server read its sockets before the cluster zone has
// listed (a process restarted on sockets in which queries wait): until
// ready is closed, a query for a name the zone owns is answered only when
// the zone already answers it with records (from a snapshot); any other
// (a negative answer, one a snapshot may not know of yet, or the SERVFAIL
// of a zone not listed) waits, and is then answered as usual. UDP queries
// wait without a slow-path slot, TCP ones on their connection's worker.
// Hits and misses outside the zone are answered at once. Call it before
// Serve; ready nil or a server without a zone holds nothing. The caller
// closes ready: nothing else ends the hold but Shutdown.
func (s *Server) HoldZone(ready <-chan struct{}) {
	if ready == nil || s.zone == nil {
		return
	}
	s.startHold(&s.zoneHold, ready, 0, s.runHeld, "answering the cluster zone's queries that waited for its first list")
}

// zoneWaits is the zone hold q must wait for, nil when it need not: no hold
// is on, q is not the zone's, or the zone answers it with records already.
// Autopath's answers (a search path tried on the client's behalf) wait:
// they are negative for every name but one.
func (s *Server) zoneWaits(q *wire.Query, client netip.Addr) *missHold {
	h := s.zoneHold.Load()
	if h == nil || q.Type == dns.TypeANY || !s.zoneOwns(q.LowerName()) {
		return nil
	}
	qname := keyName(q)
	if _, _, ok := s.autopathBase(client, qname); ok {
		return h
	}
	if za := s.zone.Lookup(qname, q.Type); za.Rcode == dns.RcodeSuccess && len(za.Answer) > 0 {
		return nil
	}
	return h
}

// holdZoneUDP keeps b (a UDP query on the slow path, holding a slot) in the
// zone hold when it must wait for the zone: true when the hold took it (the
// caller releases its slot; the hold runs it again once the zone is ready).
// A full hold makes it wait where it is.
func (s *Server) holdZoneUDP(b *slowBuf) bool {
	h := s.zoneWaits(&b.q, b.client.Addr())
	if h == nil || h.add(b) {
		return h != nil
	}
	s.waitZone(h)
	return false
}

// waitZone waits until the zone hold h has ended or the server aborts.
func (s *Server) waitZone(h *missHold) {
	select {
	case <-h.released:
	case <-s.ctx.Done():
	}
}
