package server

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// missHold keeps UDP queries without a slow-path slot each until
// something they wait for is ready: a restored cache's import
// (HoldMisses) or the cluster zone's first list (HoldZone). A query for a
// name the import brings is then a hit instead of a trip upstream, and
// every other query is answered at once rather than behind the wait.
type missHold struct {
	max      int           // queries held at most; beyond, see add
	end      chan struct{} // closed to end the hold early (the server stops)
	released chan struct{} // closed when the hold has ended
	once     sync.Once

	mu   sync.Mutex // guards following
	open bool
	held []*slowBuf
}

// add holds b; false when the hold has ended or is full.
func (h *missHold) add(b *slowBuf) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := h.open && len(h.held) < h.max
	if ok {
		h.held = append(h.held, b)
	}
	return ok
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
	s.startHold(&s.hold, done, d, s.releaseHeld, "answering the queries that waited for the cache's restore")
}

// startHold puts a hold in p until done is closed, d has passed (0: no
// limit) or the server stops, then hands each query it kept to release.
func (s *Server) startHold(p *atomic.Pointer[missHold], done <-chan struct{}, d time.Duration, release func(*slowBuf), msg string) {
	h := &missHold{max: s.cfg.MaxInFlight, end: make(chan struct{}), released: make(chan struct{}), open: true}
	p.Store(h)
	s.queries.Add(1) // Shutdown waits for the held queries' answers
	start := time.Now()
	go func() {
		defer s.queries.Done()
		var timeout <-chan time.Time
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-done:
		case <-timeout:
		case <-h.end:
		}
		p.Store(nil)
		h.mu.Lock()
		held := h.held
		h.held, h.open = nil, false
		h.mu.Unlock()
		close(h.released)
		for _, b := range held {
			release(b)
		}
		if len(held) > 0 {
			s.log.Info(msg, "held", len(held), "waited", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// endHold ends the holds now: the server stops.
func (s *Server) endHold() {
	for _, p := range []*atomic.Pointer[missHold]{&s.hold, &s.zoneHold} {
		if h := p.Load(); h != nil {
			h.once.Do(func() { close(h.end) })
		}
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
	if !h.add(b) {
		s.slowBufs.put(b)
		return false
	}
	return true
}

// releaseHeld answers a held query from the cache when it hits now, else
// sends it down the slow path (or refuses it over the caps) as a miss.
func (s *Server) releaseHeld(b *slowBuf) {
	q := &b.q
	p, mode, ok := s.resolver.Lookup(q, time.Now())
	if !ok {
		s.runHeld(b)
		return
	}
	b.out = p.AppendReply(b.out[:0], q, s.mode(mode), s.udpSize(q))
	s.sendHeld(b, Result{Rcode: p.Rcode(), Source: wire.SourceCache})
}

// runHeld sends a held query down the slow path, or refuses it over the
// caps.
func (s *Server) runHeld(b *slowBuf) {
	if s.acquireSlot(b.client.Addr()) {
		s.queries.Add(1)
		s.workers.RunTask(b)
		return
	}
	var res Result
	b.out, res = refused(b.out[:0], b.pkt, &b.q)
	s.sendHeld(b, res)
}

// sendHeld records and sends the reply a held query got, b.out.
func (s *Server) sendHeld(b *slowBuf, res Result) {
	s.record(nil, s.udpEdge(b.conn), b.client, &b.q, res, b.start, b.pkt, b.out)
	s.sendLate(b.conn, b.late, b.out, b.client)
	s.slowBufs.put(b)
}
