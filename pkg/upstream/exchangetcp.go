package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// dotMaxConns bounds the connections to one DNS over TLS server. Each
// costs a handshake; beyond it a query waits for one of them (and its
// reply) instead of opening another, so a flood of misses costs at most
// this many handshakes, not one per query past the idle pool.
const dotMaxConns = 32

// tryTCP sends the query over a pooled or new TCP connection. A reused
// connection that turns out closed by the server is replaced by a fresh
// one within the same deadline. To a DNS over TLS server it first takes
// one of dotMaxConns slots, waiting for a query on one to finish.
func (f *Forwarder) tryTCP(ctx context.Context, s *server, req []byte, deadline time.Time) (wire.UpstreamReply, error) {
	if s.dotSlots != nil {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		select {
		case s.dotSlots <- struct{}{}:
			defer func() { <-s.dotSlots }()
		case <-wctx.Done():
			return wire.UpstreamReply{}, classify(ctx, s.addr, protoTCP, fmt.Errorf("all %d DNS over TLS connections busy: %w", dotMaxConns, wctx.Err()))
		}
	}
	for {
		conn, reused := s.tcp.get(time.Now())
		if !reused {
			c, err := s.dial(ctx, deadline)
			if err != nil {
				return wire.UpstreamReply{}, classify(ctx, s.addr, protoTCP, err)
			}
			conn = c
		}
		r, reusable, err := f.watchedTCP(ctx, s, conn, req, deadline)
		if err == nil {
			if reusable {
				s.tcp.put(conn, time.Now().Add(f.cfg.TCPIdleTimeout))
			} else {
				_ = conn.Close()
			}
			return r, nil
		}
		_ = conn.Close()
		if !reused || !staleConn(err) || ctx.Err() != nil {
			return wire.UpstreamReply{}, classify(ctx, s.addr, protoTCP, err)
		}
	}
}

// dial opens a TCP connection to s, with a TLS handshake for a DNS over
// TLS server.
func (s *server) dial(ctx context.Context, deadline time.Time) (net.Conn, error) {
	d := &net.Dialer{Deadline: deadline}
	if s.tls == nil {
		return d.DialContext(ctx, "tcp", s.addr.String())
	}
	return (&tls.Dialer{NetDialer: d, Config: s.tls}).DialContext(ctx, "tcp", s.addr.String())
}

// watchedTCP is roundTripTCP under conn's deadline and a watch on ctx.
// reusable is false when the watcher ran as the reply came in: conn may
// then carry a past deadline and must not be pooled.
func (f *Forwarder) watchedTCP(ctx context.Context, s *server, conn net.Conn, req []byte, deadline time.Time) (r wire.UpstreamReply, reusable bool, err error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return wire.UpstreamReply{}, false, err
	}
	stop := watch(ctx, conn)
	r, err = f.roundTripTCP(s, conn, req)
	return r, stop(), err
}

// roundTripTCP writes one length-prefixed query on conn and reads replies
// until one matches it. The returned error is the raw socket error.
func (f *Forwarder) roundTripTCP(s *server, conn net.Conn, req []byte) (wire.UpstreamReply, error) {
	id := newID(req)
	bufp := f.bufs.get()
	defer f.bufs.put(bufp)
	out := binary.BigEndian.AppendUint16((*bufp)[:0], uint16(len(req)))
	out = append(out, req...)
	s.countRequest(protoTCP, false)
	if _, err := conn.Write(out); err != nil {
		return wire.UpstreamReply{}, err
	}
	var lenBuf [2]byte
	for {
		if _, err := io.ReadFull(conn, lenBuf[:]); err != nil {
			return wire.UpstreamReply{}, err
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:]))
		in := (*bufp)[:cap(*bufp)]
		if n > len(in) {
			in = make([]byte, n)
		}
		if _, err := io.ReadFull(conn, in[:n]); err != nil {
			return wire.UpstreamReply{}, err
		}
		var r wire.UpstreamReply
		switch parseReply(in[:n], id, req, &r) {
		case replyOK, replyTruncatedWhole:
			// TC over TCP is the server's final word; hand it back.
			return r.Clone(), nil
		case replyTruncated, replyMalformed:
			s.countError(kindMalformed)
		case replySpoofed:
			s.countError(kindSpoofed)
		}
	}
}

// staleConn reports whether err is what a reused TCP connection returns
// when the server closed it while it sat idle in the pool.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
