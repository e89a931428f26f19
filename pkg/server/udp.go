package server

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

const (
	protoUDP = iota
	protoTCP
)

// serveUDP is one socket's read loop: batched (recvmmsg/sendmmsg) where the
// kernel offers it, else one datagram a syscall. Hits are answered inline
// from buffers owned by the loop; misses are copied to a goroutine.
func (s *Server) serveUDP(c *net.UDPConn) {
	if s.serveUDPBatched(c) {
		return
	}
	buf := make([]byte, 65535)
	var q wire.Query
	w := &singleWriter{c: c, out: make([]byte, 0, 65535)}
	for {
		n, client, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				s.logRated("udp-read", "reading from udp socket", logkey.Addr, c.LocalAddr(), logkey.Err, err)
			}
			continue
		}
		s.serveDatagram(c, buf[:n], client, &q, time.Now(), w, nil)
	}
}

// replyQueue is where the read loop puts replies it answers inline: sent at
// once, or batched until the loop flushes.
type replyQueue interface {
	slot() []byte
	queue(reply []byte, to netip.AddrPort) error
	// lateReplies is where the slow path puts the replies it finishes
	// for this loop, or nil: each is sent at once.
	lateReplies() *lateQueue
}

// singleWriter sends each reply at once with one sendto.
type singleWriter struct {
	c   *net.UDPConn
	out []byte
}

func (w *singleWriter) slot() []byte { return w.out[:0] }

func (w *singleWriter) lateReplies() *lateQueue { return nil }

func (w *singleWriter) queue(reply []byte, to netip.AddrPort) error {
	_, err := w.c.WriteToUDPAddrPort(reply, to)
	return err
}

// serveDatagram answers one query: inline on the fast path (into rq,
// accounted in t, or at once when t is nil), or on a slow-path worker.
func (s *Server) serveDatagram(c *net.UDPConn, pkt []byte, client netip.AddrPort, q *wire.Query, start time.Time, rq replyQueue, t *tally) {
	defer s.recoverDatagram(pkt, client, rq)
	s.answerDatagram(c, pkt, client, q, start, rq, t)
}

// answerDatagram is serveDatagram without the panic guard: the batched
// loop guards a whole batch at once (serveBatch).
func (s *Server) answerDatagram(c *net.UDPConn, pkt []byte, client netip.AddrPort, q *wire.Query, start time.Time, rq replyQueue, t *tally) {
	perr := wire.Parse(pkt, q)
	maxSize := s.udpSize(q)
	reply, res, ok := s.fast(pkt, q, perr, client.Addr(), rq.slot(), maxSize, start)
	if !ok && s.holdMiss(c, pkt, client, q, start, rq) {
		return // answered once the cache's restore ends
	}
	if !ok && !s.acquireSlot(client.Addr()) {
		reply, res = refused(rq.slot(), pkt, q)
		ok = true
	}
	if ok {
		if reply != nil {
			// Recorded before it is queued: should record panic, the
			// guard's SERVFAIL is the query's one reply.
			s.record(t, s.udpEdge(c), client, q, res, start, pkt, reply)
			if err := rq.queue(reply, client); err != nil {
				s.metrics.dropped("write_error")
				s.logRated("udp-write", "writing udp reply", "client", client, logkey.Err, err)
			}
		}
		return
	}
	b := s.newSlowBuf(c, pkt, client, q, start, rq)
	s.queries.Add(1)
	s.workers.RunTask(b) // a Task, not a closure: no allocation per miss
}

// newSlowBuf is a pooled slowBuf holding a copy of the query pkt (parsed as
// q) from client on c, for an answer after the read loop has moved on.
func (s *Server) newSlowBuf(c *net.UDPConn, pkt []byte, client netip.AddrPort, q *wire.Query, start time.Time, rq replyQueue) *slowBuf {
	b := s.slowBufs.get()
	b.pkt = append(b.pkt[:0], pkt...)
	q.CopyTo(&b.q, b.pkt)
	b.srv, b.conn, b.client, b.start, b.late = s, c, client, start, rq.lateReplies()
	return b
}

// Run answers b's UDP query on a slow-path worker (workers.Task).
func (b *slowBuf) Run() {
	s, client := b.srv, b.client // b goes back to the pool before these defers run
	defer s.queries.Done()
	defer s.releaseSlot(client.Addr())
	if s.holdZoneUDP(b) {
		return // run again once the zone has listed
	}
	s.slowUDP(b.conn, b, client, b.start)
}

func (s *Server) slowUDP(c *net.UDPConn, b *slowBuf, client netip.AddrPort, start time.Time) {
	defer s.slowBufs.put(b)
	defer func() {
		if v := recover(); v != nil {
			if reply := s.servfailAfterPanic(v, b.pkt, b.out[:0]); reply != nil {
				s.sendLate(c, b.late, reply, client)
			}
		}
	}()
	q := &b.q
	by := time.Now().Add(s.cfg.QueryTimeout)
	reply, res := s.slow(s.ctx, by, b.pkt, q, client.Addr(), b.out[:0], s.udpSize(q))
	b.out = reply
	s.record(nil, s.udpEdge(c), client, q, res, start, b.pkt, reply) // before the send, as on the fast path
	s.sendLate(c, b.late, reply, client)
}

// sendLate sends a slow-path reply through late (lateQueue), or at once
// when there is none or it is full.
func (s *Server) sendLate(c *net.UDPConn, late *lateQueue, reply []byte, client netip.AddrPort) {
	if late == nil {
		s.writeUDP(c, reply, client)
		return
	}
	queued, flush := late.offer(reply, client)
	if !queued {
		s.writeUDP(c, reply, client)
		return
	}
	if flush {
		if err := late.flushQueued(); err != nil {
			s.metrics.dropped("write_error")
			s.logRated("udp-write", "writing udp replies", logkey.Addr, c.LocalAddr(), logkey.Err, err)
		}
	}
}

// slowBuf holds what the slow path needs for one query: its copy of the
// packet, the query the fast path parsed, moved onto that copy (it escapes
// to the heap through the resolver interfaces), the buffer the reply is
// built in, and for UDP the socket and client (it is the worker's Task).
// It returns to a pool once the reply is sent, so that a miss allocates
// none of them.
type slowBuf struct {
	pkt []byte
	q   wire.Query
	out []byte

	// A UDP query's: what Run needs.
	srv    *Server
	conn   *net.UDPConn
	client netip.AddrPort
	start  time.Time
	late   *lateQueue // the read loop's, or nil
}

// slowBufPool recycles slowBufs. Buffers grown past maxPooledBuf for an
// unusually large query or reply are dropped rather than kept.
type slowBufPool struct{ p sync.Pool }

const maxPooledBuf = 4096

func (p *slowBufPool) get() *slowBuf {
	if b, ok := p.p.Get().(*slowBuf); ok {
		return b
	}
	return &slowBuf{pkt: make([]byte, 0, 512), out: make([]byte, 0, wire.DefaultUDPSize)}
}

func (p *slowBufPool) put(b *slowBuf) {
	if cap(b.pkt) > maxPooledBuf || cap(b.out) > maxPooledBuf {
		return
	}
	b.srv, b.conn, b.late = nil, nil, nil
	p.p.Put(b)
}

func (s *Server) writeUDP(c *net.UDPConn, reply []byte, client netip.AddrPort) {
	if _, err := c.WriteToUDPAddrPort(reply, client); err != nil {
		s.metrics.dropped("write_error")
		s.logRated("udp-write", "writing udp reply", "client", client, logkey.Err, err)
	}
}

// udpSize is the largest reply q's client accepts over UDP: 512 without
// EDNS, else its advertised size capped by MaxUDPSize.
func (s *Server) udpSize(q *wire.Query) int {
	if !q.EDNS {
		return 512
	}
	return min(int(q.UDPSize), s.cfg.MaxUDPSize)
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}
