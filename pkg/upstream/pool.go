package upstream

import (
	"io"
	"net"
	"sync"
	"time"
)

// connPool keeps the idle connections to one upstream server for reuse:
// TCP connections (tcpPool) and connected UDP sockets (udpPool). A
// connection is owned by exactly one query between get and put; the pool
// only holds idle ones. It is bounded by maxIdle, and each idle connection
// carries the time it expires, after which get and sweep close it.
type connPool[C io.Closer] struct {
	maxIdle int // > 0

	mu     sync.Mutex     // guards following
	idle   []idleEntry[C] // oldest put first; the last one was put most recently
	closed bool           // once set, put closes instead of keeping
}

type idleEntry[C io.Closer] struct {
	conn    C
	expires time.Time // closed rather than handed out from then on
}

// tcpPool holds idle TCP connections; each expires TCPIdleTimeout after it
// was put back.
type tcpPool = connPool[net.Conn]

func newConnPool[C io.Closer](maxIdle int) *connPool[C] {
	return &connPool[C]{maxIdle: maxIdle}
}

// get returns the most recently put connection that has not expired at
// now, and true; or false when there is none. Expired connections found on
// the way are closed.
func (p *connPool[C]) get(now time.Time) (C, bool) {
	var c C
	found := false
	var expired []idleEntry[C]
	p.mu.Lock()
	for n := len(p.idle); n > 0 && !found; n-- {
		e := p.idle[n-1]
		p.idle[n-1] = idleEntry[C]{}
		p.idle = p.idle[:n-1]
		if now.Before(e.expires) {
			c, found = e.conn, true
		} else {
			expired = append(expired, e)
		}
	}
	p.mu.Unlock()
	closeAll(expired)
	return c, found
}

// put returns a healthy connection to the pool, to be closed at expires.
// When the pool is full the oldest idle connection is closed; after close,
// c is closed.
func (p *connPool[C]) put(c C, expires time.Time) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	var evicted C
	evict := len(p.idle) >= p.maxIdle
	if evict {
		evicted = p.idle[0].conn
		copy(p.idle, p.idle[1:])
		p.idle[len(p.idle)-1] = idleEntry[C]{}
		p.idle = p.idle[:len(p.idle)-1]
	}
	p.idle = append(p.idle, idleEntry[C]{conn: c, expires: expires})
	p.mu.Unlock()
	if evict {
		_ = evicted.Close()
	}
}

// sweep closes the connections that have expired at now and returns how
// many it closed.
func (p *connPool[C]) sweep(now time.Time) int {
	var expired []idleEntry[C]
	p.mu.Lock()
	keep := p.idle[:0]
	for _, e := range p.idle {
		if now.Before(e.expires) {
			keep = append(keep, e)
		} else {
			expired = append(expired, e)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	closeAll(expired)
	return len(expired)
}

// close closes every idle connection; later puts close their connection.
// It is idempotent.
func (p *connPool[C]) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	closeAll(idle)
}

// size returns the number of idle connections.
func (p *connPool[C]) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func closeAll[C io.Closer](entries []idleEntry[C]) {
	for _, e := range entries {
		_ = e.conn.Close()
	}
}
