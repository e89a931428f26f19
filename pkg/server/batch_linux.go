//go:build linux

package server

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// batchSize is how many datagrams one recvmmsg or sendmmsg call moves at
// most. Under load the socket has a queue and one syscall serves many
// queries; when idle a call returns the one datagram there is.
const batchSize = 32

// batchSlotSize is the read buffer per datagram. A query larger than this
// arrives truncated (MSG_TRUNC) and is dropped: queries are a few dozen bytes.
const batchSlotSize = 4096

// readBackoffMax bounds the wait after a failed read: a persistent error
// (a seccomp filter refusing recvmmsg with EPERM, say) costs a call every
// 100 ms, not a core, and closing the server waits at most that long.
const readBackoffMax = 100 * time.Millisecond

// Seams for tests: the raw system call the batch loop makes, and how it
// waits after a failed read.
var (
	batchSyscall = unix.RawSyscall6
	batchSleep   = time.Sleep
)

// readBackoff is the wait after the fails-th failed read in a row: 1 ms,
// doubling, at most readBackoffMax.
func readBackoff(fails int) time.Duration {
	if fails > 8 {
		return readBackoffMax
	}
	return min(time.Millisecond<<(fails-1), readBackoffMax)
}

// mmsghdr is struct mmsghdr of <sys/socket.h>.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// batchConn reads and writes datagrams of one UDP socket in batches with
// recvmmsg and sendmmsg, without allocating. It is used by one goroutine.
type batchConn struct {
	rc  syscall.RawConn
	sys func(trap, a1, a2, a3, a4, a5, a6 uintptr) (r1, r2 uintptr, err syscall.Errno)

	rhdrs  [batchSize]mmsghdr
	riovs  [batchSize]unix.Iovec
	rnames [batchSize]unix.RawSockaddrInet6
	rbufs  [batchSize][]byte

	whdrs  [batchSize]mmsghdr
	wiovs  [batchSize]unix.Iovec
	wnames [batchSize]unix.RawSockaddrInet6
	wbufs  [batchSize][]byte // replies queued for the next flush
	wn     int
	is6    bool

	late   *lateQueue // the slow path's replies for the next flush; nil in a sender
	parked bool       // late is parked: set by recvmmsg before a wait

	putLate func(reply []byte, to netip.AddrPort) // b.queueCopy, made once

	// Results of the syscall bodies, and the bodies as method values made
	// once, so that a read or a flush allocates nothing.
	readFn, writeFn func(fd uintptr) bool
	rn, sent, wn2   int
	rerr, werr      error
}

func newBatchConn(c *net.UDPConn) (*batchConn, error) {
	b, err := newBatchSender(c, batchSlotSize)
	if err != nil {
		return nil, err
	}
	b.readFn = b.recvmmsg
	slab := make([]byte, batchSize*batchSlotSize)
	for i := range b.rbufs {
		b.rbufs[i] = slab[i*batchSlotSize : (i+1)*batchSlotSize : (i+1)*batchSlotSize]
		b.riovs[i].Base = &b.rbufs[i][0]
		b.rhdrs[i].hdr.Iov = &b.riovs[i]
		b.rhdrs[i].hdr.Iovlen = 1
		b.rhdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&b.rnames[i]))
	}
	out, err := newBatchSender(c, lateSlot)
	if err != nil {
		return nil, err
	}
	b.late = newLateQueue(out)
	return b, nil
}

// newBatchSender is a batchConn that only sends, replies of at most slot
// bytes: a lateQueue's flusher's.
func newBatchSender(c *net.UDPConn, slot int) (*batchConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	la, _ := c.LocalAddr().(*net.UDPAddr)
	b := &batchConn{rc: rc, sys: batchSyscall, is6: la != nil && la.IP.To4() == nil}
	b.writeFn, b.putLate = b.sendmmsg, b.queueCopy
	slab := make([]byte, batchSize*slot)
	for i := range b.wbufs {
		b.wbufs[i] = slab[i*slot : i*slot : (i+1)*slot]
		b.whdrs[i].hdr.Iov = &b.wiovs[i]
		b.whdrs[i].hdr.Iovlen = 1
		b.whdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&b.wnames[i]))
	}
	return b, nil
}

// read waits for at least one datagram and returns how many it read.
func (b *batchConn) read() (int, error) {
	for i := range b.rhdrs {
		b.riovs[i].Len = batchSlotSize
		b.rhdrs[i].hdr.Namelen = uint32(unsafe.Sizeof(b.rnames[i]))
		b.rhdrs[i].hdr.Flags = 0
	}
	b.rn, b.rerr = 0, nil
	if err := b.rc.Read(b.readFn); err != nil {
		return 0, err
	}
	if b.rerr != nil {
		return 0, b.rerr
	}
	return b.rn, nil
}

// recvmmsg is the body of read's RawConn.Read: false asks the runtime to
// wait until the socket is readable.
//
// It and sendmmsg are raw system calls, which do not tell the scheduler
// they may block. MSG_DONTWAIT keeps them from waiting on the socket, not
// from sleeping in the kernel (a page fault, memory-cgroup reclaim), and
// while they do the runtime cannot hand the loop's P on. A plain one lets the
// runtime hand the loop's P to another thread when the call takes more
// than 20 µs, as a sendmmsg of a full batch over loopback does (it
// delivers every datagram on the way); with one P that meant a futex wake
// of another thread and a netpoller round trip on it per batch, and the
// loop waiting for its P back after the call.
//
// Before it waits, the loop parks its lateQueue (the slow path's workers
// then flush their replies themselves), unless replies no worker flushes
// are queued there: then it returns with nothing read, to send them.
func (b *batchConn) recvmmsg(fd uintptr) bool {
	if b.parked {
		b.late.unpark()
		b.parked = false
	}
	r, _, e := b.sys(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&b.rhdrs[0])), batchSize,
		unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EWOULDBLOCK {
		if !b.late.park() {
			return true // b.rn is 0: flush the late replies
		}
		b.parked = true
		return false
	}
	if e != 0 {
		b.rerr = e
	}
	b.rn = int(r)
	return true
}

// datagram returns the i-th datagram read and its sender; ok is false for
// one that did not fit its buffer or whose sender cannot be read.
func (b *batchConn) datagram(i int) (pkt []byte, from netip.AddrPort, ok bool) {
	h := &b.rhdrs[i]
	if h.hdr.Flags&unix.MSG_TRUNC != 0 {
		return nil, netip.AddrPort{}, false
	}
	from, ok = sockaddrToAddrPort(&b.rnames[i])
	return b.rbufs[i][:h.n], from, ok
}

// slot returns the buffer the next queued reply should be appended to.
func (b *batchConn) slot() []byte { return b.wbufs[b.wn][:0] }

// queue adds reply (appended to slot()) for to; flushes when the batch is full.
func (b *batchConn) queue(reply []byte, to netip.AddrPort) error {
	i := b.wn
	b.wbufs[i] = reply
	addrPortToSockaddr(to, b.is6, &b.wnames[i], &b.whdrs[i].hdr)
	b.wn++
	if b.wn == batchSize {
		return b.flush()
	}
	return nil
}

// lateReplies is where the slow path puts the replies it finishes for
// this loop (replyQueue).
func (b *batchConn) lateReplies() *lateQueue { return b.late }

// queueCopy queues a copy of reply for to in a free slot (take's put: it
// is given no more replies than there are free slots). Unlike queue it
// never flushes: take runs under the lateQueue's lock, and its caller
// flushes once that is released.
func (b *batchConn) queueCopy(reply []byte, to netip.AddrPort) {
	i := b.wn
	b.wbufs[i] = append(b.wbufs[i][:0], reply...)
	addrPortToSockaddr(to, b.is6, &b.wnames[i], &b.whdrs[i].hdr)
	b.wn++
}

// flushAll sends the queued replies with the slow path's late ones,
// batchSize at a time.
func (b *batchConn) flushAll() error {
	var errs []error
	for {
		more := b.late.take(batchSize-b.wn, b.putLate)
		if err := b.flush(); err != nil {
			errs = append(errs, err)
		}
		if !more {
			return errors.Join(errs...)
		}
	}
}

// endLate ends the loop's part in the late replies: the slow path sends
// its own from now on, and those queued are sent.
func (b *batchConn) endLate() error {
	b.late.end()
	return b.flushAll()
}

// flush sends every queued reply. A reply the kernel refuses is dropped
// and reported; the others are still sent.
func (b *batchConn) flush() error {
	if b.wn == 0 {
		return nil
	}
	for i := 0; i < b.wn; i++ {
		b.wiovs[i].Base = unsafe.SliceData(b.wbufs[i])
		b.wiovs[i].Len = uint64(len(b.wbufs[i]))
	}
	var errs []error
	for b.sent = 0; b.sent < b.wn; {
		b.wn2, b.werr = 0, nil
		if err := b.rc.Write(b.writeFn); err != nil {
			errs = append(errs, err)
			break
		}
		if b.werr != nil { // the message at sent failed: skip it
			errs = append(errs, b.werr)
			b.wn2 = 1
		}
		b.sent += b.wn2
	}
	b.wn = 0
	return errors.Join(errs...)
}

// sendmmsg is the body of flush's RawConn.Write.
func (b *batchConn) sendmmsg(fd uintptr) bool {
	r, _, e := b.sys(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&b.whdrs[b.sent])),
		uintptr(b.wn-b.sent), unix.MSG_DONTWAIT, 0, 0)
	if e == unix.EAGAIN || e == unix.EWOULDBLOCK {
		return false
	}
	if e != 0 {
		b.werr = e
	}
	b.wn2 = int(r)
	return true
}

func sockaddrToAddrPort(sa *unix.RawSockaddrInet6) (netip.AddrPort, bool) {
	raw := (*[unsafe.Sizeof(unix.RawSockaddrInet6{})]byte)(unsafe.Pointer(sa))
	port := binary.BigEndian.Uint16(raw[2:4])
	switch sa.Family {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), port), true
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port), true
	}
	return netip.AddrPort{}, false
}

func addrPortToSockaddr(ap netip.AddrPort, is6 bool, sa *unix.RawSockaddrInet6, h *unix.Msghdr) {
	*sa = unix.RawSockaddrInet6{}
	raw := (*[unsafe.Sizeof(unix.RawSockaddrInet6{})]byte)(unsafe.Pointer(sa))
	binary.BigEndian.PutUint16(raw[2:4], ap.Port())
	if !is6 {
		sa.Family = unix.AF_INET
		a4 := ap.Addr().As4()
		copy(raw[4:8], a4[:])
		h.Namelen = uint32(unsafe.Sizeof(unix.RawSockaddrInet4{}))
		return
	}
	sa.Family = unix.AF_INET6
	sa.Addr = ap.Addr().As16()
	h.Namelen = uint32(unsafe.Sizeof(unix.RawSockaddrInet6{}))
}

// serveUDPBatched is serveUDP with recvmmsg and sendmmsg: every datagram of
// a batch is parsed and, on the fast path, answered into the batch's send
// slots, flushed with one sendmmsg. It returns false, having served
// nothing, when batching is unavailable.
func (s *Server) serveUDPBatched(c *net.UDPConn) bool {
	b, err := newBatchConn(c)
	if err != nil {
		return false
	}
	defer func() {
		if err := b.endLate(); err != nil {
			s.metrics.dropped("write_error")
			s.logRated("udp-write", "writing udp replies", logkey.Addr, c.LocalAddr(), logkey.Err, err)
		}
	}()
	var q wire.Query
	var t tally
	fails := 0 // failed reads in a row
	for {
		n, err := b.read()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return true
			}
			if errors.Is(err, unix.ENOSYS) {
				return false // no recvmmsg: the plain loop takes over
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				// Logged at most once per 10 s; waited out so that an
				// error that persists does not spin the loop.
				s.logRated("udp-read", "reading from udp socket", logkey.Addr, c.LocalAddr(), logkey.Err, err)
				fails++
				batchSleep(readBackoff(fails))
			}
			continue
		}
		fails = 0
		start := time.Now()
		t.observe = s.observing()
		for i := 0; i < n; {
			i = s.serveBatch(c, b, i, n, &q, start, &t)
		}
		// Accounted before the send, as one query at a time is: a client
		// that has its reply sees it counted.
		if t.pending() {
			t.flush(s.metrics, s.counter, time.Since(start))
		}
		if err := b.flushAll(); err != nil {
			s.metrics.dropped("write_error")
			s.logRated("udp-write", "writing udp replies", logkey.Addr, c.LocalAddr(), logkey.Err, err)
		}
	}
}

// serveBatch answers datagrams from to n-1 of b's batch and returns n, or,
// when answering one panicked, answers that one SERVFAIL as serveDatagram
// would and returns the index after it, for the loop to go on from there:
// one deferred guard per batch rather than one per datagram.
func (s *Server) serveBatch(c *net.UDPConn, b *batchConn, from, n int, q *wire.Query, start time.Time, t *tally) (next int) {
	i := from
	defer func() {
		if v := recover(); v != nil {
			pkt, client, _ := b.datagram(i)
			if reply := s.servfailAfterPanic(v, pkt, b.slot()); reply != nil {
				_ = b.queue(reply, client)
			}
			next = i + 1
		}
	}()
	for ; i < n; i++ {
		pkt, client, ok := b.datagram(i)
		if !ok {
			s.metrics.dropped("oversized_or_unknown_sender")
			continue
		}
		s.answerDatagram(c, pkt, client, q, start, b, t)
	}
	return n
}
