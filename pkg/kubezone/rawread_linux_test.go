package kubezone

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpPair is a connected loopback TCP pair: the client side wrapped by
// withRawReads, and the server side.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	t.Cleanup(func() { c.Close(); s.Close() })
	return withRawReads(c), s
}

// TestRawReads: a wrapped connection reads what arrives in pieces, waits
// for data that is not there yet, honours a read deadline, and reports
// the peer's close as io.EOF and a read after its own close as an error.
func TestRawReads(t *testing.T) {
	c, s := tcpPair(t)
	if _, ok := c.(*rawReadConn); !ok {
		t.Fatalf("withRawReads: got %T, want *rawReadConn", c)
	}
	want := bytes.Repeat([]byte("0123456789"), 10_000)
	go func() {
		for i := 0; i < len(want); i += 7_000 {
			time.Sleep(time.Millisecond) // the reader parks between pieces
			_, _ = s.Write(want[i:min(i+7_000, len(want))])
		}
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadFull: %v (equal %v)", err, bytes.Equal(got, want))
	}
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: got %v, want os.ErrDeadlineExceeded", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if n, err := c.Read(got); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("read after the peer closed: got %d, %v; want 0, io.EOF", n, err)
	}
	c.Close()
	if _, err := c.Read(got); err == nil || !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: got %v, want net.ErrClosed", err)
	}
}

// TestRawReadsOtherConns: a connection that is not TCP is left as it is.
func TestRawReadsOtherConns(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := withRawReads(a); got != a {
		t.Errorf("withRawReads(pipe): got %T, want the pipe itself", got)
	}
}

// TestRawReadsBlockingSocket: a socket in blocking mode is left as it is:
// a raw read of it would hold the thread until data came.
func TestRawReadsBlockingSocket(t *testing.T) {
	c, _ := tcpPair(t)
	tc := c.(*rawReadConn).Conn.(*net.TCPConn)
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetNonblock(int(fd), false) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if got := withRawReads(tc); got != net.Conn(tc) {
		t.Errorf("withRawReads(blocking socket): got %T, want the connection itself", got)
	}
}
