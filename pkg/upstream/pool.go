package upstream

import (
	"net"
	"sync"
	"time"
)

// tcpPool keeps the idle TCP connections to one upstream server for reuse.
// A connection is owned by exactly one query between get and put; the pool
// only holds idle ones. It is bounded by maxIdle, and connections idle for
// longer than idleTimeout are closed by get and by sweep.
type tcpPool struct {
	maxIdle     int           // > 0
	idleTimeout time.Duration // > 0

	mu     sync.Mutex // guards following
	idle   []idleConn // oldest first; the last one was put most recently
	closed bool       // once set, put closes instead of keeping
}

type idleConn struct {
	conn  net.Conn
	since time.Time // when it was put back
}

func newTCPPool(maxIdle int, idleTimeout time.Duration) *tcpPool {
	return &tcpPool{maxIdle: maxIdle, idleTimeout: idleTimeout}
}

// get returns the most recently used connection that has not expired at
// now, or nil. Expired connections found on the way are closed.
func (p *tcpPool) get(now time.Time) net.Conn {
	p.mu.Lock()
	var c net.Conn
	var expired []idleConn
	if n := len(p.idle); n > 0 {
		last := p.idle[n-1]
		if now.Sub(last.since) < p.idleTimeout {
			c = last.conn
			p.idle[n-1] = idleConn{}
			p.idle = p.idle[:n-1]
		} else {
			// The newest has expired, so all have.
			expired = p.idle
			p.idle = nil
		}
	}
	p.mu.Unlock()
	closeAll(expired)
	return c
}

// put returns a healthy connection to the pool at time now. When the pool
// is full the oldest idle connection is closed; after close, c is closed.
func (p *tcpPool) put(c net.Conn, now time.Time) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	var evicted net.Conn
	if len(p.idle) >= p.maxIdle {
		evicted = p.idle[0].conn
		copy(p.idle, p.idle[1:])
		p.idle[len(p.idle)-1] = idleConn{}
		p.idle = p.idle[:len(p.idle)-1]
	}
	p.idle = append(p.idle, idleConn{conn: c, since: now})
	p.mu.Unlock()
	if evicted != nil {
		_ = evicted.Close()
	}
}

// sweep closes the connections idle for idleTimeout or longer at now and
// returns how many it closed.
func (p *tcpPool) sweep(now time.Time) int {
	p.mu.Lock()
	keep := 0
	for keep < len(p.idle) && now.Sub(p.idle[keep].since) >= p.idleTimeout {
		keep++
	}
	expired := make([]idleConn, keep)
	copy(expired, p.idle[:keep])
	p.idle = append(p.idle[:0], p.idle[keep:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	p.mu.Unlock()
	closeAll(expired)
	return len(expired)
}

// close closes every idle connection; later puts close their connection.
// It is idempotent.
func (p *tcpPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	closeAll(idle)
}

// size returns the number of idle connections.
func (p *tcpPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func closeAll(conns []idleConn) {
	for _, ic := range conns {
		_ = ic.conn.Close()
	}
}
