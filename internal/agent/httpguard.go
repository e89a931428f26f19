package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The health and metrics listeners are on the node IP, reachable from every
// pod: one pod holding thousands of idle or slow connections must not grow
// the agent's memory or keep the kubelet's probes out. Each server gets
// timeouts for reading the request, writing the reply and between requests,
// and a small header limit (httpServer); its listener a guard: at
// most httpMaxConnsPerClient connections per client IP (the excess is
// closed at once) and at most httpMaxConns in all; when that is reached,
// the connection idle the longest (accepted and silent, or between
// requests) is closed to make room, so a new client, such as the kubelet,
// is served while one client's idle connections are dropped. A client at
// its own cap is treated the same way: its longest-idle connection (a
// keep-alive it left open) is closed for the new one, and only a client
// whose every connection is busy is refused, so a fresh request is always
// answered.
//
// The read timeout bounds reading the request only; a reply that streams
// longer (a pprof profile, `nodecache tail`) is bounded by the write
// timeout alone, which the admin socket does not set.
const (
	httpMaxConns          = 256
	httpMaxConnsPerClient = 16
	httpMaxHeaderBytes    = 8 << 10
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 15 * time.Second
	httpIdleTimeout       = 30 * time.Second
)

// httpServer returns a server for h with the limits above and the given
// write timeout (0: none, for streams on the root-only admin socket).
func httpServer(h http.Handler, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		ReadTimeout:       httpReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}
}

// serveUntil serves h on ln until ctx ends, then shuts h down, letting
// requests in progress finish for up to grace. It returns nil on a clean
// stop and the server's error otherwise.
func serveUntil(ctx context.Context, h *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- h.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		_ = h.Shutdown(sctx)
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// connGuard caps the connections of one listener; install it with guard.
type connGuard struct {
	maxConns, maxPerClient int
	refused                *prometheus.CounterVec // by reason: per_client, per_client_evicted, evicted, total

	mu      sync.Mutex // guards following
	conns   map[net.Conn]*guardedConn
	perAddr map[netip.Addr]int
}

type guardedConn struct {
	addr  netip.Addr
	idle  bool      // accepted and silent, or between requests
	since time.Time // when idle began
}

func newConnGuard(maxConns, maxPerClient int, refused *prometheus.CounterVec) *connGuard {
	return &connGuard{maxConns: maxConns, maxPerClient: maxPerClient, refused: refused,
		conns: map[net.Conn]*guardedConn{}, perAddr: map[netip.Addr]int{}}
}

// guard wraps ln and sets srv.ConnState so that g tracks srv's connections.
func (g *connGuard) guard(ln net.Listener, srv *http.Server) net.Listener {
	srv.ConnState = g.connState
	return &guardedListener{Listener: ln, g: g}
}

type guardedListener struct {
	net.Listener
	g *connGuard
}

// Accept returns the next connection within the caps; connections over a
// client's cap are closed here and never reach the server.
func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.admit(c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit registers c, or reports false when it cannot. At its client's cap
// it closes that client's longest-idle connection, at the total cap the
// longest-idle of all; with none idle there, c is refused.
func (g *connGuard) admit(c net.Conn) bool {
	var addr netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		addr = ta.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.perAddr[addr] >= g.maxPerClient {
		victim := g.longestIdleLocked(func(gc *guardedConn) bool { return gc.addr == addr })
		if victim == nil {
			g.refused.WithLabelValues("per_client").Inc()
			return false
		}
		g.forgetLocked(victim)
		_ = victim.Close()
		g.refused.WithLabelValues("per_client_evicted").Inc()
	}
	if len(g.conns) >= g.maxConns {
		victim := g.longestIdleLocked(nil)
		if victim == nil {
			g.refused.WithLabelValues("total").Inc()
			return false
		}
		g.forgetLocked(victim)
		_ = victim.Close() // the server sees the read fail and ends it
		g.refused.WithLabelValues("evicted").Inc()
	}
	g.conns[c] = &guardedConn{addr: addr, idle: true, since: time.Now()}
	g.perAddr[addr]++
	return true
}

// longestIdleLocked returns the connection idle the longest of those
// match accepts (nil: all), or nil when none of them is idle.
func (g *connGuard) longestIdleLocked(match func(*guardedConn) bool) net.Conn {
	var victim net.Conn
	var oldest time.Time
	for c, gc := range g.conns {
		if gc.idle && (match == nil || match(gc)) && (victim == nil || gc.since.Before(oldest)) {
			victim, oldest = c, gc.since
		}
	}
	return victim
}

func (g *connGuard) forgetLocked(c net.Conn) {
	gc, ok := g.conns[c]
	if !ok {
		return
	}
	delete(g.conns, c)
	if g.perAddr[gc.addr]--; g.perAddr[gc.addr] <= 0 {
		delete(g.perAddr, gc.addr)
	}
}

// connState follows the server's view of each connection.
func (g *connGuard) connState(c net.Conn, st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		g.forgetLocked(c)
	case http.StateActive:
		if gc, ok := g.conns[c]; ok {
			gc.idle = false
		}
	case http.StateIdle:
		if gc, ok := g.conns[c]; ok {
			gc.idle, gc.since = true, time.Now()
		}
	}
}

// open returns the number of connections the guard holds.
func (g *connGuard) open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}
