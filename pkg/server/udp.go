package server

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

const (
	protoUDP = iota
	protoTCP
)

// serveUDP is one socket's read loop. Hits are answered inline from a buffer
// owned by the loop; misses are copied to a goroutine.
func (s *Server) serveUDP(c *net.UDPConn) {
	buf := make([]byte, 65535)
	out := make([]byte, 0, 65535)
	var q wire.Query
	for {
		n, client, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				s.logRated("udp-read", "reading from udp socket", "addr", c.LocalAddr(), "err", err)
			}
			continue
		}
		start := time.Now()
		pkt := buf[:n]
		perr := wire.Parse(pkt, &q)
		maxSize := s.udpSize(&q)
		reply, res, ok := s.fast(pkt, &q, perr, client.Addr(), out[:0], maxSize, start)
		if ok {
			if reply != nil {
				s.writeUDP(c, reply, client)
				s.record(client.Addr(), &q, res, start, protoUDP)
			}
			continue
		}
		if !s.inflight.TryAcquire(1) {
			s.metrics.dropped("inflight_limit")
			s.writeUDP(c, wire.AppendError(out[:0], pkt, &q, dns.RcodeRefused), client)
			s.record(client.Addr(), &q, Result{Rcode: dns.RcodeRefused, Source: SourceLocal}, start, protoUDP)
			continue
		}
		p := bytes.Clone(pkt)
		s.queries.Add(1)
		go func() {
			defer s.queries.Done()
			defer s.inflight.Release(1)
			s.slowUDP(c, p, client, start)
		}()
	}
}

func (s *Server) slowUDP(c *net.UDPConn, pkt []byte, client netip.AddrPort, start time.Time) {
	var q wire.Query
	if err := wire.Parse(pkt, &q); err != nil {
		return // parsed once already; cannot happen
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.QueryTimeout)
	defer cancel()
	reply, res := s.slow(ctx, pkt, &q, client.Addr(), make([]byte, 0, 512), s.udpSize(&q))
	s.writeUDP(c, reply, client)
	s.record(client.Addr(), &q, res, start, protoUDP)
}

func (s *Server) writeUDP(c *net.UDPConn, reply []byte, client netip.AddrPort) {
	if _, err := c.WriteToUDPAddrPort(reply, client); err != nil {
		s.metrics.dropped("write_error")
		s.logRated("udp-write", "writing udp reply", "client", client, "err", err)
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
