package supervise

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// held is the listening sockets the supervisor keeps for the next serving
// process, as bare descriptors (close-on-exec), outside the Go runtime's
// netpoller. An *os.File of a non-blocking socket is registered with the
// runtime's epoll, and a socket in an epoll set wakes whoever waits on that
// set at each datagram that arrives and each reply that leaves: the
// supervisor, idle in epoll_wait, was woken about once per batch the
// serving process answered, and cost about as much CPU per answer as the
// serving process's own read loop.
type held []int

// hold keeps a duplicate of each file's descriptor and closes the files,
// which takes them out of the netpoller. On error it keeps nothing; the
// files are closed either way.
func hold(files []*os.File) (held, error) {
	var h held
	var errs []error
	for _, f := range files {
		fd, err := dupFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("keeping %s: %w", f.Name(), err))
		} else {
			h = append(h, fd)
		}
		_ = f.Close()
	}
	if err := errors.Join(errs...); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// dupFile duplicates f's descriptor through SyscallConn rather than
// os.File.Fd. For the files hold is given (os.NewFile of a socket received
// already non-blocking) Fd would do too: it sets blocking mode only on a
// descriptor the os package itself made non-blocking. SyscallConn keeps
// that true for any file, and Control holds the file open while it runs.
func dupFile(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	return nfd, derr
}

// files returns a new file per descriptor, for a serving process's
// ExtraFiles; the caller closes them once it has started (the files are
// in the netpoller only meanwhile).
func (h held) files() ([]*os.File, error) {
	out := make([]*os.File, 0, len(h))
	for i, fd := range h {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, f := range out {
				_ = f.Close()
			}
			return nil, fmt.Errorf("duplicating listener %d: %w", i, err)
		}
		out = append(out, os.NewFile(uintptr(nfd), fmt.Sprintf("listener-%d", i)))
	}
	return out, nil
}

func (h held) close() {
	for _, fd := range h {
		_ = unix.Close(fd)
	}
}
