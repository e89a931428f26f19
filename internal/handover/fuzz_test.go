package handover

import (
	"encoding/binary"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// unixPair returns the two ends of a connected unix stream socket pair.
func unixPair(tb testing.TB) (*net.UnixConn, *net.UnixConn) {
	tb.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	conns := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

func frameBytes(body string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// FuzzReadFrame feeds arbitrary bytes to the handover frame reader over a
// real socket: it returns a message or an error, never panics, never hands
// out descriptors nobody sent, and never reads past a frame's length.
func FuzzReadFrame(f *testing.F) {
	f.Add(frameBytes(`{"op":"hello","version":1}`))
	f.Add(frameBytes(`{"op":"offer","addrs":["127.0.0.1:53"],"udp":1,"tcp":1}`))
	f.Add(frameBytes(`{"op":"done"}`)[:6])
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<31))
	f.Add(frameBytes(`null`))
	f.Add(frameBytes(`{"op":"hello","version":1e999}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		w, r := unixPair(t)
		defer r.Close()
		go func() {
			_, _ = w.Write(in)
			_ = w.Close()
		}()
		var m Msg
		files, err := ReadFrame(r, &m)
		CloseFiles(files)
		if len(files) > 0 {
			t.Fatalf("ReadFrame: got %d descriptors, want none (none were sent)", len(files))
		}
		if err != nil {
			return
		}
		if size := binary.BigEndian.Uint32(in); int(size) > len(in)-4 {
			t.Fatalf("ReadFrame: got a message from a frame of %d bytes with %d sent", size, len(in)-4)
		}
	})
}
