package kubezone

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawReadConn is a TCP connection whose reads skip the Go runtime's
// syscall bookkeeping. Go sockets are non-blocking: a read either returns
// at once or says EAGAIN, and then the goroutine parks in the netpoller
// until the socket is readable. Made as a plain syscall, each read first
// tells the scheduler it may block, and in a process that was idle (an
// agent between two EndpointSlice events, 50 ms apart) that wakes the
// runtime's monitor thread every time: a futex wake and a thread
// schedule per event, a tenth of what an update cost the agent
// (docs/scale.md). A raw read cannot block here, so it needs none of it.
type rawReadConn struct {
	net.Conn
	rc syscall.RawConn
}

// withRawReads wraps c's reads when c is a TCP connection; anything else
// is returned as it is.
func withRawReads(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	// Only a non-blocking socket (every one net dials) may be read raw: a
	// raw read of a blocking one would hold its thread and P until data came.
	nonblocking := false
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking = err == nil && fl&unix.O_NONBLOCK != 0
	}); err != nil || !nonblocking {
		return c
	}
	return &rawReadConn{Conn: tc, rc: rc}
}

func (c *rawReadConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if e == syscall.EINTR {
				continue
			}
			n, errno = int(r), e
			return e != syscall.EAGAIN // not yet readable: the netpoller waits, then this runs again
		}
	})
	switch {
	case err != nil: // a deadline, or the connection closed; already a *net.OpError
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(),
			Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}
