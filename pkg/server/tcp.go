package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// maxTCPQuery is the longest query accepted over TCP; a longer length prefix
// closes the connection before its body is read. A query needs at most the
// header (12 bytes), one question (a 255-byte name, type and class: 259) and
// an OPT record (11 bytes) with the options a stub sends: a cookie (44),
// client subnet (24), keepalive (6), padding to the next 128-byte block
// (RFC 8467), about 480 in all. 1 KiB leaves room for a TSIG or options
// still to come, and bounds what one pending query can hold.
const maxTCPQuery = 1024

// tcpReadBuffer is each connection's read buffer. A query is parsed in place
// in it (bufio.Reader.Peek), so it must hold the longest one with its
// prefix; a body is only copied out, at its real size, for the slow path.
const tcpReadBuffer = 2048

// serveTCP accepts connections until the listener is stopped.
func (s *Server) serveTCP(ln *net.TCPListener) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.logRated("tcp-accept", "accepting tcp connection", logkey.Addr, ln.Addr(), logkey.Err, err)
			time.Sleep(5 * time.Millisecond) // EMFILE and friends: do not spin
			continue
		}
		if s.afterAccept != nil {
			s.afterAccept()
		}
		client := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		if !s.tcpConns.TryAcquire(1) {
			s.metrics.dropped("tcp_conn_limit")
			_ = c.Close()
			continue
		}
		if !s.tcpPerClient.acquire(client) {
			s.tcpConns.Release(1)
			s.metrics.dropped("tcp_client_conn_limit")
			_ = c.Close()
			continue
		}
		// A connection accepted while the server is stopping is served like
		// the others, under the drain deadline stop gives every registered
		// connection once this loop has returned: during a handover the
		// client's query is in it, and closing it lost that query.
		s.mu.Lock()
		closing := s.closing
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.queries.Add(1)
		s.metrics.tcpConns.Inc()
		go func() {
			defer s.queries.Done()
			defer s.tcpConns.Release(1)
			defer s.tcpPerClient.release(client)
			defer s.metrics.tcpConns.Dec()
			s.serveConn(c, client)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			_ = c.Close()
		}()
		if closing {
			return
		}
	}
}

// tcpConn is one client connection: its reader, and replies written whole
// under the write lock as they complete.
type tcpConn struct {
	s      *Server
	c      *net.TCPConn
	client netip.Addr
	peer   netip.AddrPort // client with its port, for the tap
	ep     edge           // protocol and listen address, for the metrics
	wmu    sync.Mutex     // guards writes to c
}

func (t *tcpConn) write(reply []byte) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	_ = t.c.SetWriteDeadline(time.Now().Add(t.s.cfg.TCPIdleTimeout))
	var hdr [2]byte
	binary.BigEndian.PutUint16(hdr[:], uint16(len(reply)))
	if _, err := (&net.Buffers{hdr[:], reply}).WriteTo(t.c); err != nil {
		t.s.metrics.dropped("write_error")
	}
}

// serveConn reads length-prefixed queries from one connection. Up to
// TCPPipeline queries run at once, each holding a slow-path slot of the
// server and of the client (over either cap a query is answered REFUSED);
// replies are written as they complete. A query is read into the
// connection's buffer and parsed there: memory follows what arrived, not
// what a length prefix claims.
func (s *Server) serveConn(c *net.TCPConn, client netip.Addr) {
	t := &tcpConn{s: s, c: c, client: client, peer: c.RemoteAddr().(*net.TCPAddr).AddrPort(),
		ep: edge{proto: protoTCP, server: s.serverOf(c.LocalAddr())}}
	r := bufio.NewReaderSize(c, tcpReadBuffer)
	pipeline := make(chan struct{}, s.cfg.TCPPipeline)
	var wg sync.WaitGroup
	defer wg.Wait()
	out := make([]byte, 0, 512)
	var q wire.Query
	for {
		s.extendReadDeadline(c)
		hdr, err := r.Peek(2)
		if err != nil {
			return // EOF, idle timeout, shutdown
		}
		n := int(binary.BigEndian.Uint16(hdr))
		if n > maxTCPQuery {
			s.metrics.dropped("tcp_query_too_long")
			s.logRated("tcp-long", "closing tcp connection: query longer than the limit", "client", client, "length", n, "limit", maxTCPQuery)
			return
		}
		msg, err := r.Peek(2 + n)
		if err != nil {
			return
		}
		pkt := msg[2:]
		start := time.Now()
		slow, ok := t.answerFast(pkt, &q, out[:0], start)
		if !ok {
			return // garbage on a stream: the framing cannot be trusted
		}
		if slow {
			pipeline <- struct{}{}
			b := s.slowBufs.get()
			b.pkt = append(b.pkt[:0], pkt...)
			q.CopyTo(&b.q, b.pkt)
			wg.Add(1)
			s.workers.Run(func() {
				defer wg.Done()
				defer func() { <-pipeline }()
				defer s.releaseSlot(client)
				t.slow(b, start)
			})
		}
		if _, err := r.Discard(2 + n); err != nil {
			return
		}
	}
}

// answerFast answers pkt if the fast path can, or REFUSED when the slow path
// has no slot for it; slow is true when it holds a slot and pkt goes to the
// slow path. ok is false when pkt gets no reply and the connection must
// close. A panic answers SERVFAIL.
func (t *tcpConn) answerFast(pkt []byte, q *wire.Query, out []byte, start time.Time) (slow, ok bool) {
	s := t.s
	defer func() {
		if v := recover(); v != nil {
			reply := s.servfailAfterPanic(v, pkt, out[:0])
			if reply != nil {
				t.write(reply)
			}
			slow, ok = false, reply != nil
		}
	}()
	perr := wire.Parse(pkt, q)
	reply, res, ok := s.fast(pkt, q, perr, t.client, out, 65535, start)
	if !ok {
		if s.acquireSlot(t.client) {
			return true, true
		}
		reply, res = refused(out, pkt, q)
	}
	if reply == nil {
		return false, false
	}
	t.write(reply)
	s.record(nil, t.ep, t.peer, q, res, start, pkt, reply)
	return false, true
}

// slow answers b's query on a worker and returns b to its pool. A panic
// answers SERVFAIL.
func (t *tcpConn) slow(b *slowBuf, start time.Time) {
	s := t.s
	defer s.slowBufs.put(b)
	defer func() {
		if v := recover(); v != nil {
			if reply := s.servfailAfterPanic(v, b.pkt, b.out[:0]); reply != nil {
				t.write(reply)
			}
		}
	}()
	q := &b.q
	if h := s.zoneWaits(q, t.client); h != nil {
		s.waitZone(h)
	}
	by := time.Now().Add(s.cfg.QueryTimeout)
	reply, res := s.slow(s.ctx, by, b.pkt, q, t.client, b.out[:0], 65535)
	t.write(reply)
	b.out = reply
	s.record(nil, t.ep, t.peer, q, res, start, b.pkt, reply)
}

// tcpDrain is how long a connection may still deliver queries that are
// already on their way once the server stops reading: a query in the socket
// buffer is answered, not dropped with the connection.
const tcpDrain = 100 * time.Millisecond

// extendReadDeadline gives c another idle timeout, unless the server is
// stopping: then stop has set the drain deadline, which must stand. The lock
// orders this against stop.
func (s *Server) extendReadDeadline(c *net.TCPConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
	}
}
