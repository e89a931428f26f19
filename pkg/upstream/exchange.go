package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

const (
	// bufSize is the size of pooled read buffers: at least the 1232 bytes
	// of the DNS flag day advice, enough for common EDNS sizes.
	bufSize    = 4096
	headerSize = 12
	qrBit      = 0x80 // in the third header byte
	tcBit      = 0x02 // in the third header byte
)

// aLongTimeAgo is a deadline in the past; setting it unblocks a pending
// read at once.
var aLongTimeAgo = time.Unix(1, 0) //nolint:gochecknoglobals // never mutated

type bufPool struct{ p sync.Pool }

func (b *bufPool) get() *[]byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return v
	}
	buf := make([]byte, bufSize)
	return &buf
}

func (b *bufPool) put(buf *[]byte) { b.p.Put(buf) }

// verdict is what parseReply makes of a datagram or TCP message.
type verdict int

const (
	replyOK             verdict = iota
	replyTruncated              // TC is set, and the rest may be cut: retry over TCP
	replyTruncatedWhole         // TC is set, and the rest unpacks
	replySpoofed                // wrong ID, QR clear or another question: ignore
	replyMalformed              // does not unpack: ignore
)

// parseReply checks that buf answers the packed query req (with the
// given ID) before trusting it, and reads it once into r, which then
// aliases buf; r is written only for a reply taken (replyOK,
// replyTruncatedWhole). The header is checked on the raw bytes so that a
// spoofed datagram costs no allocation; a reply in the plain shape
// wire.ScanUpstream takes is checked in place, and any other is unpacked,
// as a reply that does not unpack is ignored.
func parseReply(buf []byte, id uint16, req []byte, r *wire.UpstreamReply) verdict {
	if len(buf) < headerSize {
		return replyMalformed
	}
	if binary.BigEndian.Uint16(buf) != id || buf[2]&qrBit == 0 {
		return replySpoofed
	}
	if u, ok := wire.ScanUpstream(buf); ok {
		if !u.AnswersQuery(req) {
			return replySpoofed
		}
		*r = wire.UpstreamReply{Raw: buf, Scanned: true, Scan: u}
		return replyOK
	}
	resp := new(dns.Msg)
	err := resp.Unpack(buf)
	if !sameQuestion(resp, req) {
		if err != nil && len(resp.Question) == 0 {
			return replyMalformed
		}
		return replySpoofed
	}
	truncated := buf[2]&tcBit != 0
	switch {
	case err != nil && truncated:
		// A truncated reply may be cut anywhere after the question.
		return replyTruncated
	case err != nil:
		return replyMalformed
	}
	*r = wire.UpstreamReply{Raw: buf, Msg: resp}
	if truncated {
		return replyTruncatedWhole
	}
	return replyOK
}

// sameQuestion reports whether m's one question is the one of the packed
// query req: name (ignoring case), type and class.
func sameQuestion(m *dns.Msg, req []byte) bool {
	if len(m.Question) != 1 {
		return false
	}
	q := &m.Question[0]
	var name [wire.MaxNameLen]byte
	n, err := dns.PackDomainName(q.Name, name[:], 0, nil, false)
	end := headerSize + n
	return err == nil && len(req) >= end+4 && bytes.EqualFold(name[:n], req[headerSize:end]) &&
		binary.BigEndian.Uint16(req[end:]) == q.Qtype && binary.BigEndian.Uint16(req[end+2:]) == q.Qclass
}

// watch sets a past deadline on c when ctx is cancelled, unblocking any
// read or write. The returned func stops watching; it returns false if the
// deadline has been or is being set, in which case c must not be reused:
// the past deadline may land after the next owner has set its own.
func watch(ctx context.Context, c net.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return watchedNothing
	}
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
}

func watchedNothing() bool { return true }

// newID writes a fresh random query ID into the packed message.
func newID(req []byte) uint16 {
	id := uint16(rand.Uint32()) //nolint:gosec // math/rand/v2 is ChaCha8-seeded per thread
	binary.BigEndian.PutUint16(req, id)
	return id
}

// tryServer makes one attempt at s: UDP on a pooled or new socket, then
// TCP if the reply is truncated; TCP alone when forceTCP and for a DNS
// over TLS server. req is the packed request; its ID is rewritten.
func (f *Forwarder) tryServer(ctx context.Context, s *server, req []byte, deadline time.Time, forceTCP bool) (wire.UpstreamReply, error) {
	sent := time.Now()
	if forceTCP || s.tls != nil {
		r, err := f.tryTCP(ctx, s, req, deadline)
		f.tap(s, true, req, r.Raw, sent)
		return r, err
	}
	r, truncated, err := f.tryUDP(ctx, s, req, deadline, false)
	if err != nil || !truncated {
		f.tap(s, false, req, r.Raw, sent)
		return r, err
	}
	f.tap(s, false, req, nil, sent) // the truncated reply is not kept
	s.countError(kindTruncated)
	sent = time.Now()
	r, err = f.tryTCP(ctx, s, req, deadline)
	f.tap(s, true, req, r.Raw, sent)
	return r, err
}

// tap hands one attempt to Config.Tap, if any: the query sent at sent and
// the reply (nil when none came).
func (f *Forwarder) tap(s *server, tcp bool, query, reply []byte, sent time.Time) {
	if f.cfg.Tap != nil {
		f.cfg.Tap.TapForwarder(s.addr, tcp, query, reply, sent, time.Now())
	}
}

// tryUDP sends the query on a connected UDP socket of s's pool: the kernel
// gave it a random ephemeral port and drops datagrams from any address but
// the server's. The socket goes back to the pool only after a clean round
// trip (see releaseUDP).
// A probe is not counted as a request.
func (f *Forwarder) tryUDP(ctx context.Context, s *server, req []byte, deadline time.Time, probe bool) (wire.UpstreamReply, bool, error) {
	u, err := s.udpSocket(time.Now())
	if err != nil {
		return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
	}
	// The deadline is set before the watch starts, so that a cancel that
	// fires at once is not overwritten by it.
	if err := u.conn.SetDeadline(deadline); err != nil {
		_ = u.Close()
		return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
	}
	stop := u.watch(ctx)
	r, truncated, clean, err := f.roundTripUDP(s, u, req, probe)
	stopped := stop()
	s.releaseUDP(u, clean && stopped)
	if err != nil {
		return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
	}
	return r, truncated, nil
}

// roundTripUDP sends req on u and reads datagrams until one answers it.
// clean reports a valid, untruncated reply that was the only datagram
// read. The returned error is the raw socket error.
func (f *Forwarder) roundTripUDP(s *server, u *udpSock, req []byte, probe bool) (r wire.UpstreamReply, truncated, clean bool, err error) {
	id := newID(req)
	mixed := randomizeCase(req)
	u.uses++
	s.countRequest(protoUDP, probe)
	if _, err := u.conn.Write(req); err != nil {
		return wire.UpstreamReply{}, false, false, err
	}
	bufp := f.bufs.get()
	defer f.bufs.put(bufp)
	buf := *bufp
	clean = true
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			return wire.UpstreamReply{}, false, false, err
		}
		v := parseReply(buf[:n], id, req, &r)
		if v == replyOK && !s.acceptCase(buf[:n], req, mixed) {
			v = replySpoofed
		}
		switch v {
		case replyOK:
			return r.Clone(), false, clean, nil
		case replyTruncated, replyTruncatedWhole:
			return wire.UpstreamReply{}, true, false, nil
		case replySpoofed:
			s.countError(kindSpoofed)
		case replyMalformed:
			if n == len(buf) {
				// The kernel cut a datagram larger than the buffer;
				// the whole reply may come over TCP.
				return wire.UpstreamReply{}, true, false, nil
			}
			s.countError(kindMalformed)
		}
		// Whoever sent that may send more; the next owner must not read it.
		clean = false
	}
}

// tryTCP sends the query over a pooled or new TCP connection. A reused
// connection that turns out closed by the server is replaced by a fresh
// one within the same deadline.
func (f *Forwarder) tryTCP(ctx context.Context, s *server, req []byte, deadline time.Time) (wire.UpstreamReply, error) {
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

var (
	// ErrOverloaded is returned by Exchange when Config.MaxInFlight queries
	// are already in flight. It wraps wire.ErrOverloaded, the sentinel the
	// cache and the server edge know: the edge answers REFUSED.
	ErrOverloaded error = errOverloaded{}
	// ErrNoAnswer is returned by Exchange when no server gave a valid reply
	// before the deadline. It wraps the last cause, usually an
	// *AttemptError. The server edge answers SERVFAIL.
	ErrNoAnswer = errors.New("upstream: no answer")
	// ErrClosed is returned by Exchange after Close.
	ErrClosed = errors.New("upstream: forwarder closed")
	// ErrBadRequest is returned by Exchange for a nil message or one that
	// does not carry exactly one question.
	ErrBadRequest = errors.New("upstream: request must carry exactly one question")
)

// errOverloaded is ErrOverloaded: its own message, and wire.ErrOverloaded
// beneath it.
type errOverloaded struct{}

func (errOverloaded) Error() string { return "upstream: too many queries in flight" }
func (errOverloaded) Unwrap() error { return wire.ErrOverloaded }

// AttemptError describes one failed attempt at one server.
type AttemptError struct {
	Server netip.AddrPort
	Proto  string // "udp" or "tcp"
	Kind   string // one of the nodecache_upstream_errors_total kinds
	Err    error  // the underlying cause; may be nil for Kind "refused"
}

func (e *AttemptError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("querying %s over %s: %s", e.Server, e.Proto, e.Kind)
	}
	return fmt.Sprintf("querying %s over %s: %s: %v", e.Server, e.Proto, e.Kind, e.Err)
}

func (e *AttemptError) Unwrap() error { return e.Err }

// healthFailure reports whether an attempt that failed with kind counts
// towards marking its server down. A REFUSED answer proves the server is
// alive; a cancelled caller says nothing about the server.
func healthFailure(kind string) bool {
	switch kind {
	case kindTimeout, kindConnRefused, kindNetwork:
		return true
	}
	return false
}

// classify turns a socket error into an AttemptError. A caller that
// cancelled says nothing about the server (kind canceled); a caller's
// deadline that passed without an answer is a timeout like any other, so
// that a short edge deadline still lets silent servers be marked down.
func classify(ctx context.Context, s netip.AddrPort, proto string, err error) *AttemptError {
	kind := kindNetwork
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.Canceled):
		kind, err = kindCanceled, fmt.Errorf("%w (%w)", ctxErr, err)
	case ctxErr != nil:
		kind, err = kindTimeout, fmt.Errorf("%w (%w)", ctxErr, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		kind = kindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = kindConnRefused
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			kind = kindTimeout
		}
	}
	return &AttemptError{Server: s, Proto: proto, Kind: kind, Err: err}
}

// staleConn reports whether err is what a reused TCP connection returns
// when the server closed it while it sat idle in the pool.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// errorKind returns the kind of an *AttemptError, else kindNetwork.
func errorKind(err error) string {
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return kindNetwork
}
