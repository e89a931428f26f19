package supervise

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A listener the supervisor keeps must be in no epoll set of the process:
// one in the runtime's netpoller woke the supervisor at every datagram the
// serving process read and every reply it sent. It must still carry the
// socket: a datagram sent to it is read through the kept descriptor, and
// through the file made for the next serving process.
func TestHeldListenersOutsideNetpoller(t *testing.T) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// As handover.ReadFrame makes them: os.NewFile of a non-blocking socket.
	var dup int
	rc, _ := conn.SyscallConn()
	if err := rc.Control(func(fd uintptr) { dup, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(dup), "received")
	if !inEpoll(t, dup) {
		t.Fatalf("descriptor %d of os.NewFile is in no epoll set: the check below cannot fail", dup)
	}
	h, err := hold([]*os.File{f})
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	defer h.close()
	// The registration was made under dup, the file's own descriptor: the
	// runtime takes it out of its epoll set when the file is closed. The
	// held descriptor is a new number that was never registered.
	if inEpoll(t, dup) {
		t.Fatalf("descriptor %d of the file hold was given is still in an epoll set: the file was not closed", dup)
	}
	if len(h) != 1 || inEpoll(t, h[0]) {
		t.Fatalf("held %v: want one descriptor in no epoll set", h)
	}
	// The socket is shared with the serving process, whose loops rely on
	// it being non-blocking: nothing on the way may clear O_NONBLOCK.
	flags, err := unix.FcntlInt(uintptr(h[0]), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("held socket flags %#x (%v): want the description left non-blocking", flags, err)
	}
	sendTo(t, conn.LocalAddr(), "one")
	buf := make([]byte, 16)
	n, _, err := unix.Recvfrom(h[0], buf, 0)
	if err != nil || string(buf[:n]) != "one" {
		t.Fatalf("reading through the held descriptor: %q, %v", buf[:n], err)
	}

	files, err := h.files()
	if err != nil || len(files) != 1 {
		t.Fatalf("files: %v, %v", files, err)
	}
	sendTo(t, conn.LocalAddr(), "two")
	rc, _ = files[0].SyscallConn()
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN
	}); err != nil || rerr != nil || string(buf[:n]) != "two" {
		t.Fatalf("reading through the next process's file: %q, %v %v", buf[:n], err, rerr)
	}
	_ = files[0].Close()
	if _, err := unix.FcntlInt(uintptr(h[0]), unix.F_GETFD, 0); err != nil {
		t.Fatalf("held descriptor after the file made from it was closed: %v", err)
	}
}

func sendTo(t *testing.T, to net.Addr, msg string) {
	t.Helper()
	c, err := net.Dial("udp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// inEpoll reports whether descriptor fd is watched by an epoll instance of
// this process (the tfd lines of /proc/self/fdinfo of each eventpoll).
func inEpoll(t *testing.T, fd int) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		info, _ := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		for _, line := range strings.Split(string(info), "\n") {
			var tfd int
			if _, err := fmt.Sscanf(line, "tfd: %d", &tfd); err == nil && tfd == fd {
				return true
			}
		}
	}
	return false
}
