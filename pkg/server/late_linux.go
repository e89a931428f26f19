//go:build linux

package server

import (
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/nodecache/nodecache/pkg/wire"
)

// Bounds of a lateQueue: how many replies wait at most, and the largest
// one it takes (the EDNS size nodecache advertises; larger ones are sent
// at once).
const (
	lateMax  = 64
	lateSlot = wire.DefaultUDPSize
)

// lateQueue carries the replies the slow-path workers finish (misses) for
// one UDP socket, so that several leave in one sendmmsg rather than one
// sendto each. While the socket's batched read loop runs, it sends them
// with the next batch it sends: a reply waits at most until the loop is
// done with the batch it has read, or finds nothing to read. While the
// loop waits for the socket to become readable (parked), or after it has
// ended, the worker that queues the first reply becomes the flusher: it
// lets the goroutines that are ready to run go first (runtime.Gosched;
// under a miss load, workers whose upstream replies arrived together),
// then sends what they queued meanwhile with its own. A reply never waits
// for the loop on a quiet socket, nor for more than the goroutines
// already ready to run.
//
// The read loop owns park, unpark and end, and takes with its own batch;
// any number of workers offer; one at a time flushes.
type lateQueue struct {
	out *batchConn // the flusher's send slots, used by it alone

	// Atomic, so that the loop's side costs no lock while nothing is
	// queued (a hit load): the loop stores parked then loads count, an
	// offer stores count then loads parked, so one of them sees the other.
	parked atomic.Bool  // the loop waits for readability, or has ended
	count  atomic.Int32 // n, stored under mu

	mu       sync.Mutex // guards following
	flushing bool       // a worker has taken on to send what is queued
	n        int        // replies queued: bufs[:n], to[:n]
	to       [lateMax]netip.AddrPort
	bufs     [lateMax][]byte // each with its own lateSlot bytes of slab
}

func newLateQueue(out *batchConn) *lateQueue {
	l := &lateQueue{out: out}
	slab := make([]byte, lateMax*lateSlot)
	for i := range l.bufs {
		l.bufs[i] = slab[i*lateSlot : i*lateSlot : (i+1)*lateSlot]
	}
	return l
}

// offer queues a copy of reply for to, and reports whether it did; not
// when the queue is full or the reply larger than lateSlot: the caller
// then sends it itself. With flush the caller is to send what is queued
// (flushQueued): the loop is parked and no other worker does.
func (l *lateQueue) offer(reply []byte, to netip.AddrPort) (queued, flush bool) {
	if len(reply) > lateSlot {
		return false, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == lateMax {
		return false, false
	}
	l.bufs[l.n] = append(l.bufs[l.n][:0], reply...)
	l.to[l.n] = to
	l.n++
	l.count.Store(int32(l.n))
	if l.parked.Load() && !l.flushing {
		l.flushing = true
		return true, true
	}
	return true, false
}

// flushQueued is the flusher's part (offer said flush): after the
// goroutines ready to run have had their turn, it sends what is queued,
// batchSize at a time, until nothing is.
func (l *lateQueue) flushQueued() error {
	runtime.Gosched()
	var errs []error
	for {
		l.mu.Lock()
		l.takeLocked(batchSize, l.out.putLate)
		if l.out.wn == 0 {
			l.flushing = false
			l.mu.Unlock()
			return errors.Join(errs...)
		}
		l.mu.Unlock()
		if err := l.out.flush(); err != nil {
			errs = append(errs, err)
		}
	}
}

// park marks the loop as about to wait for readability, unless replies are
// queued that no flusher sends: then it reports false, and the loop sends
// them instead of waiting.
func (l *lateQueue) park() bool {
	l.parked.Store(true)
	if l.count.Load() == 0 {
		return true // an offer from now on sees parked
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 && !l.flushing {
		l.parked.Store(false)
		return false
	}
	return true
}

// unpark marks the loop as running again: it will take what is offered.
func (l *lateQueue) unpark() { l.parked.Store(false) }

// take hands at most max queued replies, oldest first, to put (which
// copies them: the bytes are reused once take returns) and reports
// whether more are queued.
func (l *lateQueue) take(max int, put func(reply []byte, to netip.AddrPort)) bool {
	if l.count.Load() == 0 {
		return false // one offered meanwhile is seen by the loop's next park
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.takeLocked(max, put)
}

func (l *lateQueue) takeLocked(max int, put func(reply []byte, to netip.AddrPort)) bool {
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
	l.count.Store(int32(l.n))
	return l.n > 0
}

// end marks the loop as gone for good: from now on the workers send their
// replies (a flusher at a time). The caller then takes what is queued.
func (l *lateQueue) end() { l.parked.Store(true) }
