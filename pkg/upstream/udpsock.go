package upstream

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// Bounds on the reuse of an upstream UDP socket. A connected socket keeps
// the random source port the kernel gave it, so the queries sent on it
// share that port: an off-path attacker who learns it (the ICMP side
// channel of SAD DNS, say) has only the 16-bit ID left to guess (RFC 5452
// asks for the port to be randomised per query). Dialling a socket per
// query, though, costs socket, connect, getsockname, getpeername, epoll
// registration and close. Measured on loopback (BenchmarkExchangeUDPReuse,
// best of 4 on a shared 2-core VM): a fresh port per query 42.0 µs and 43
// allocations, a port per 4 queries 27.5 µs, per 16 23.7 µs, per 64 24.2 µs
// and 32 allocations: past 16 more reuse buys nothing measurable. So a
// port serves at most 16 queries and lives at most 2 s, whichever ends
// first; an attacker who finds it has a few queries and 2 s, not 64 and
// 10 s as before. CoreDNS reuses its upstream sockets for up to 10 s with
// no bound on the count.
const (
	udpMaxUses = 16
	udpMaxAge  = 2 * time.Second
	// udpMaxIdle bounds the idle sockets kept per server (and so the file
	// descriptors held between bursts); Config.MaxInFlight bounds it too.
	udpMaxIdle = 256
)

// udpPool holds idle UDP sockets; each expires udpMaxAge after it was
// dialled, however often it was used.
type udpPool = connPool[*udpSock]

// udpSock is a UDP socket connected to one server, so the kernel drops
// datagrams from any other address. It is owned by exactly one query
// between udpSocket and releaseUDP. An idle one keeps the deadline of its
// last query (or a past one its watch set), which udpSocket replaces with
// the next query's before anything else: clearing it on release as well
// was a second deadline change (runtime timer work) per query.
type udpSock struct {
	conn    *net.UDPConn
	expires time.Time // udpMaxAge after the dial
	uses    int       // queries sent on it so far

	// Made on first need, once per socket rather than once per query; a
	// socket discarded after one query (a truncated reply) never makes them.
	unblock func()                // sets a past deadline on conn, for watch
	watched <-chan struct{}       // Done of the context unblock is registered with; nil: none
	unwatch func() bool           // ends that registration (context.AfterFunc's stop)
	raw     syscall.RawConn       // conn's, for quiet and exchange
	peek    func(fd uintptr) bool // for quiet; sets queued
	queued  bool                  // set by peek: a datagram or an error waits
	xfer    func(fd uintptr) bool // exchange's body (u.transfer)

	// exchange's: the query to send first (nil: none), the buffer to read
	// into, and what the read gave.
	out, in []byte
	n       int
	err     error
}

func dialUDP(addr *net.UDPAddr, now time.Time) (*udpSock, error) {
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return nil, err
	}
	return &udpSock{conn: conn, expires: now.Add(udpMaxAge)}, nil
}

// Close ends the socket's watch and closes it.
func (u *udpSock) Close() error {
	u.endWatch()
	return u.conn.Close()
}

// watch makes the cancellation of ctx unblock the socket's read, as the
// package's watch does for a query, but the registration outlives the
// query: the queries of one socket come with one long-lived context (the
// cache's), so it is made once per socket rather than once per query (an
// allocation pair and a lock of the context's children per miss). It
// reports whether the socket may be used under ctx: not when ctx is done
// (a past deadline may land at any moment), nor when a registration with
// another context fired. Call it after setting the query's deadline. A
// registration that fires while the socket idles in the pool leaves a past
// deadline there; the next owner sets its own, and its watch refuses the
// socket, its context (the same) being done.
func (u *udpSock) watch(ctx context.Context) bool {
	done := ctx.Done()
	if done != nil && done == u.watched {
		return ctx.Err() == nil
	}
	if !u.endWatch() {
		return false
	}
	if done == nil {
		return true
	}
	if u.unblock == nil {
		conn := u.conn
		u.unblock = func() { _ = conn.SetDeadline(aLongTimeAgo) }
	}
	u.watched, u.unwatch = done, context.AfterFunc(ctx, u.unblock)
	return ctx.Err() == nil
}

// endWatch ends the socket's watch, if any. It reports false when the
// watch fired or is firing: the socket's deadline is no longer its
// owner's to set.
func (u *udpSock) endWatch() bool {
	if u.unwatch == nil {
		return true
	}
	ok := u.unwatch()
	u.watched, u.unwatch = nil, nil
	return ok
}

// quiet reports whether nothing waits on the idle socket: no datagram (a
// late or duplicate reply, or a forgery aimed at its port) and no pending
// error (an ICMP port unreachable). Either would be read by the next
// query and blamed on it, so such a socket is closed instead. It costs one
// non-blocking recvfrom with MSG_PEEK.
func (u *udpSock) quiet() bool {
	if !u.rawConn() {
		return false
	}
	u.queued = true
	if err := u.raw.Read(u.peek); err != nil {
		return false
	}
	return !u.queued
}

// rawConn makes, once per socket, what quiet and exchange call the kernel
// with; false if the socket has no raw access.
func (u *udpSock) rawConn() bool {
	if u.raw != nil {
		return true
	}
	raw, err := u.conn.SyscallConn()
	if err != nil {
		return false
	}
	u.raw = raw
	u.peek = func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		u.queued = !errors.Is(err, syscall.EAGAIN)
		return true // done: never wait for readability
	}
	u.xfer = u.transfer
	return true
}

// exchange sends req, unless it is nil, and reads one datagram into buf
// by the socket's deadline; n == len(buf) may mean the kernel cut a larger
// one. The error is the raw socket error.
//
// The query is written from within the read's wait loop, after the runtime
// has armed it: a reply can then not slip between the send and the wait,
// and the read needs no first try that finds the socket empty (conn.Write
// then conn.Read made one read call per query that returned EAGAIN).
func (u *udpSock) exchange(req, buf []byte) (int, error) {
	if !u.rawConn() {
		if req != nil {
			if _, err := u.conn.Write(req); err != nil {
				return 0, err
			}
		}
		return u.conn.Read(buf)
	}
	u.out, u.in, u.n, u.err = req, buf, 0, nil
	err := u.raw.Read(u.xfer)
	u.out, u.in = nil, nil
	if err != nil {
		return 0, err // the deadline, or a closed socket
	}
	return u.n, u.err
}

// transfer is exchange's RawConn.Read body: false waits for readability.
func (u *udpSock) transfer(fd uintptr) bool {
	if req := u.out; req != nil {
		u.out = nil
		_, err := syscall.Write(int(fd), req)
		for errors.Is(err, syscall.EINTR) {
			_, err = syscall.Write(int(fd), req)
		}
		if err != nil {
			u.err = os.NewSyscallError("write", err)
			return true
		}
		return false // the reply comes later; the wait sees it even if it came meanwhile
	}
	n, err := syscall.Read(int(fd), u.in)
	for errors.Is(err, syscall.EINTR) {
		n, err = syscall.Read(int(fd), u.in)
	}
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return false
	case err != nil:
		u.err = os.NewSyscallError("read", err)
		return true
	}
	u.n = n
	return true
}

// udpSocket returns a pooled socket to s that has nothing queued, or a new
// one, with deadline set (zero: none). Pooled sockets that have expired or
// have something queued are closed on the way.
func (s *server) udpSocket(now, deadline time.Time) (*udpSock, error) {
	for {
		u, ok := s.udp.get(now)
		if !ok {
			u, err := dialUDP(s.udpAddr, now)
			if err != nil {
				return nil, err
			}
			if err := u.conn.SetDeadline(deadline); err != nil {
				_ = u.Close()
				return nil, err
			}
			return u, nil
		}
		// before the idle check, which a past deadline would fail
		if u.conn.SetDeadline(deadline) == nil && u.quiet() {
			return u, nil
		}
		_ = u.Close()
	}
}

// releaseUDP ends a query's ownership of u. Only a socket that gave one
// clean reply (reusable) and is under its use bound goes back to the pool;
// any other is closed, so that nothing an abandoned query left behind
// reaches the next one.
func (s *server) releaseUDP(u *udpSock, reusable bool) {
	if !reusable || u.uses >= s.maxUses {
		_ = u.Close()
		return
	}
	s.udp.put(u, u.expires)
}
