package upstream

import (
	"context"
	"errors"
	"net"
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
// between udpSocket and releaseUDP; an idle one has no deadline set and no
// watcher that could set one.
type udpSock struct {
	conn    *net.UDPConn
	expires time.Time // udpMaxAge after the dial
	uses    int       // queries sent on it so far

	// Made on first need, once per socket rather than once per query; a
	// socket discarded after one query (a truncated reply) never makes them.
	unblock func()                // sets a past deadline on conn, for watch
	raw     syscall.RawConn       // conn's, for quiet
	peek    func(fd uintptr) bool // for quiet; sets queued
	queued  bool                  // set by peek: a datagram or an error waits
}

func dialUDP(addr *net.UDPAddr, now time.Time) (*udpSock, error) {
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return nil, err
	}
	return &udpSock{conn: conn, expires: now.Add(udpMaxAge)}, nil
}

// Close closes the socket.
func (u *udpSock) Close() error { return u.conn.Close() }

// watch is watch for the socket's owner, with the unblock func made once
// per socket instead of once per query.
func (u *udpSock) watch(ctx context.Context) (stop func() bool) {
	if ctx.Done() == nil {
		return watchedNothing
	}
	if u.unblock == nil {
		conn := u.conn
		u.unblock = func() { _ = conn.SetDeadline(aLongTimeAgo) }
	}
	return context.AfterFunc(ctx, u.unblock)
}

// quiet reports whether nothing waits on the idle socket: no datagram (a
// late or duplicate reply, or a forgery aimed at its port) and no pending
// error (an ICMP port unreachable). Either would be read by the next
// query and blamed on it, so such a socket is closed instead. It costs one
// non-blocking recvfrom with MSG_PEEK.
func (u *udpSock) quiet() bool {
	if u.raw == nil {
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
	}
	u.queued = true
	if err := u.raw.Read(u.peek); err != nil {
		return false
	}
	return !u.queued
}

// udpSocket returns a pooled socket to s that has nothing queued, or a new
// one. Pooled sockets that have expired or have something queued are
// closed on the way.
func (s *server) udpSocket(now time.Time) (*udpSock, error) {
	for {
		u, ok := s.udp.get(now)
		if !ok {
			return dialUDP(s.udpAddr, now)
		}
		if u.quiet() {
			return u, nil
		}
		_ = u.Close()
	}
}

// releaseUDP ends a query's ownership of u. Only a socket that gave one
// clean reply (reusable), is under its use bound and sheds its deadline
// goes back to the pool; any other is closed, so that nothing an abandoned
// query left behind reaches the next one.
func (s *server) releaseUDP(u *udpSock, reusable bool) {
	if !reusable || u.uses >= s.maxUses || u.conn.SetDeadline(time.Time{}) != nil {
		_ = u.Close()
		return
	}
	s.udp.put(u, u.expires)
}
