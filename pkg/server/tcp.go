package server

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// serveTCP accepts connections until the listener is stopped.
func (s *Server) serveTCP(ln *net.TCPListener) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.logRated("tcp-accept", "accepting tcp connection", "addr", ln.Addr(), "err", err)
			time.Sleep(5 * time.Millisecond) // EMFILE and friends: do not spin
			continue
		}
		if s.afterAccept != nil {
			s.afterAccept()
		}
		if !s.tcpConns.TryAcquire(1) {
			s.metrics.dropped("tcp_conn_limit")
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
			defer s.metrics.tcpConns.Dec()
			s.serveConn(c)
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

// serveConn reads length-prefixed queries from one connection. Up to
// TCPPipeline queries run at once; replies are written as they complete,
// each whole under the write lock.
func (s *Server) serveConn(c *net.TCPConn) {
	clientAP := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	client := clientAP.Addr()
	ep := edge{proto: protoTCP, server: s.serverOf(c.LocalAddr())}
	r := bufio.NewReaderSize(c, 4096)
	var wmu sync.Mutex // guards writes to c
	slots := make(chan struct{}, s.cfg.TCPPipeline)
	var wg sync.WaitGroup
	defer wg.Wait()
	write := func(reply []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		var hdr [2]byte
		binary.BigEndian.PutUint16(hdr[:], uint16(len(reply)))
		if _, err := (&net.Buffers{hdr[:], reply}).WriteTo(c); err != nil {
			s.metrics.dropped("write_error")
		}
	}
	out := make([]byte, 0, 4096)
	var q wire.Query
	for {
		s.extendReadDeadline(c)
		var hdr [2]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return // EOF, idle timeout, shutdown
		}
		pkt := make([]byte, binary.BigEndian.Uint16(hdr[:]))
		if _, err := io.ReadFull(r, pkt); err != nil {
			return
		}
		start := time.Now()
		perr := wire.Parse(pkt, &q)
		reply, res, ok := s.fast(pkt, &q, perr, client, out[:0], 65535, start)
		if ok {
			if reply == nil {
				return // garbage on a stream: the framing cannot be trusted
			}
			write(reply)
			s.record(ep, clientAP, &q, res, start, pkt, reply)
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		s.workers.Run(func() {
			defer wg.Done()
			defer func() { <-slots }()
			s.slowTCP(ep, pkt, clientAP, start, write)
		})
	}
}

func (s *Server) slowTCP(ep edge, pkt []byte, client netip.AddrPort, start time.Time, write func([]byte)) {
	var q wire.Query
	if err := wire.Parse(pkt, &q); err != nil {
		return
	}
	by := time.Now().Add(s.cfg.QueryTimeout)
	reply, res := s.slow(s.ctx, by, pkt, &q, client.Addr(), make([]byte, 0, 512), 65535)
	write(reply)
	s.record(ep, client, &q, res, start, pkt, reply)
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
