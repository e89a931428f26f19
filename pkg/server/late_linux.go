package server

import (
	"net/netip"
	"sync"

	"github.com/nodecache/nodecache/pkg/wire"
)

// Bounds of a lateQueue: how many replies wait at most, and the largest
// one it takes (the EDNS size nodecache advertises; larger ones are sent
// at once).
const (
	lateMax  = 64
	lateSlot = wire.DefaultUDPSize
)

// lateQueue carries the replies the slow-path workers finish (misses) to
// one socket's batched read loop, so that they leave with the loop's next
// sendmmsg rather than one sendto each. Under a miss load the loop runs
// between the workers anyway: a reply waits at most until the loop is done
// with the batch it has read, or finds nothing to read. While the loop
// waits for the socket to become readable (parked), or after it has ended,
// offer refuses and the worker sends its reply itself, so that no reply
// waits on a quiet socket.
//
// The read loop owns the receiving end (park, unpark, take, end); any
// number of workers offer.
type lateQueue struct {
	mu     sync.Mutex // guards following
	parked bool       // the loop waits for readability, or has ended
	n      int        // replies queued: bufs[:n], to[:n]
	to     [lateMax]netip.AddrPort
	bufs   [lateMax][]byte // each with its own lateSlot bytes of slab
}

func newLateQueue() *lateQueue {
	l := &lateQueue{}
	slab := make([]byte, lateMax*lateSlot)
	for i := range l.bufs {
		l.bufs[i] = slab[i*lateSlot : i*lateSlot : (i+1)*lateSlot]
	}
	return l
}

// offer queues a copy of reply for to, and reports whether it did: not
// when the loop is parked or has ended, the queue is full or the reply
// larger than lateSlot. The caller sends a refused reply itself.
func (l *lateQueue) offer(reply []byte, to netip.AddrPort) bool {
	if len(reply) > lateSlot {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.parked || l.n == lateMax {
		return false
	}
	l.bufs[l.n] = append(l.bufs[l.n][:0], reply...)
	l.to[l.n] = to
	l.n++
	return true
}

// park marks the loop as about to wait for readability, unless replies are
// queued: then it reports false, and the loop sends them instead of
// waiting.
func (l *lateQueue) park() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		return false
	}
	l.parked = true
	return true
}

// unpark marks the loop as running again: it will take what is offered.
func (l *lateQueue) unpark() {
	l.mu.Lock()
	l.parked = false
	l.mu.Unlock()
}

// take hands at most max queued replies, oldest first, to put (which
// copies them: the bytes are reused once take returns) and reports
// whether more are queued.
func (l *lateQueue) take(max int, put func(reply []byte, to netip.AddrPort)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := min(l.n, max)
	for i := 0; i < k; i++ {
		put(l.bufs[i], l.to[i])
	}
	// The rest move to the front; swapped, not copied, so that every
	// entry keeps its own slab bytes.
	for i := k; i < l.n; i++ {
		l.bufs[i-k], l.bufs[i] = l.bufs[i], l.bufs[i-k]
		l.to[i-k] = l.to[i]
	}
	l.n -= k
	return l.n > 0
}

// end marks the loop as gone for good: from now on every worker sends its
// own reply. The caller then takes what is queued.
func (l *lateQueue) end() {
	l.mu.Lock()
	l.parked = true
	l.mu.Unlock()
}
