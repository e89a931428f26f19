package server

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// missHold keeps the UDP queries that missed the cache while a restored
// cache was still importing (HoldMisses), without a slow-path slot each,
// until the import ends: a query for a name the import brings is then a
// hit instead of a trip upstream, and every other query, hits and the
// zone's names, is answered at once rather than behind the import.
type missHold struct {
	max  int           // queries held at most; beyond, misses go the usual way
	end  chan struct{} // closed to end the hold early (the server stops)
	once sync.Once

	mu   sync.Mutex // guards following
	open bool
	held []*slowBuf
}

// HoldMisses makes UDP queries that miss the cache wait, from Serve until
// done is closed or d has passed, and then be looked up again: those that
// hit are answered from the cache, the others go upstream as misses do.
// Queries answered without the cache, and TCP ones, do not wait. Call it
// before Serve; done nil or d 0 holds nothing.
func (s *Server) HoldMisses(done <-chan struct{}, d time.Duration) {
	if done == nil || d <= 0 {
		return
	}
	h := &missHold{max: s.cfg.MaxInFlight, end: make(chan struct{}), open: true}
	s.hold.Store(h)
	s.queries.Add(1) // Shutdown waits for the held queries' answers
	start := time.Now()
	go func() {
		defer s.queries.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		case <-h.end:
		}
		s.hold.Store(nil)
		h.mu.Lock()
		held := h.held
		h.held, h.open = nil, false
		h.mu.Unlock()
		for _, b := range held {
			s.releaseHeld(b)
		}
		if len(held) > 0 {
			s.log.Info("answering the queries that waited for the cache's restore", "held", len(held),
				"waited", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// endHold ends a hold now: the server stops.
func (s *Server) endHold() {
	if h := s.hold.Load(); h != nil {
		h.once.Do(func() { close(h.end) })
	}
}

// holdMiss holds a UDP query that missed the fast path, when a hold is on
// and the query is one the cache answers; false: answer it the usual way.
func (s *Server) holdMiss(c *net.UDPConn, pkt []byte, client netip.AddrPort, q *wire.Query, start time.Time, rq replyQueue) bool {
	h := s.hold.Load()
	if h == nil || q.Type == dns.TypeANY || s.zoneOwns(q.LowerName()) {
		return false
	}
	b := s.newSlowBuf(c, pkt, client, q, start, rq)
	h.mu.Lock()
	ok := h.open && len(h.held) < h.max
	if ok {
		h.held = append(h.held, b)
	}
	h.mu.Unlock()
	if !ok {
		s.slowBufs.put(b)
	}
	return ok
}

// releaseHeld answers a held query from the cache when it hits now, else
// sends it down the slow path (or refuses it over the caps) as a miss.
func (s *Server) releaseHeld(b *slowBuf) {
	q := &b.q
	var res Result
	if p, mode, ok := s.resolver.Lookup(q, time.Now()); ok {
		b.out = p.AppendReply(b.out[:0], q, s.mode(mode), s.udpSize(q))
		res = Result{Rcode: p.Rcode(), Source: wire.SourceCache}
	} else if s.acquireSlot(b.client.Addr()) {
		s.queries.Add(1)
		s.workers.RunTask(b)
		return
	} else {
		b.out, res = refused(b.out[:0], b.pkt, q)
	}
	s.record(nil, s.udpEdge(b.conn), b.client, q, res, b.start, b.pkt, b.out)
	s.sendLate(b.conn, b.late, b.out, b.client)
	s.slowBufs.put(b)
}
