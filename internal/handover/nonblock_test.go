package handover

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Sending a listener's duplicate must leave the listener non-blocking: the
// duplicate shares its open file description, and os.File.Fd would switch
// both to blocking mode, so that the sender's own Accept blocks a thread and
// its shutdown waits for the next connection.
func TestWriteFrameKeepsNonBlocking(t *testing.T) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, r := unixPair(t)
	defer r.Close()
	go func() {
		var m Msg
		files, _ := ReadFrame(r, &m)
		CloseFiles(files)
	}()
	if err := WriteFrame(w, Msg{Op: OpOffer, TCP: 1}, []*os.File{f}); err != nil {
		t.Fatalf("WriteFrame: %v", err)
	}
	rc, err := ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatalf("reading the listener's flags: %v %v", err, ferr)
	}
	if flags&unix.O_NONBLOCK == 0 {
		t.Error("listener after WriteFrame: got blocking, want non-blocking")
	}
}

// rights is the SCM_RIGHTS control message carrying files, nil for none,
// for tests that write frames by hand.
func rights(files []*os.File) []byte {
	if len(files) == 0 {
		return nil
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	return unix.UnixRights(fds...)
}
