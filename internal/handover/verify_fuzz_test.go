package handover

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// peerKinds are the descriptors a fuzzed predecessor may attach, by the
// value of a byte of the fuzz input modulo their number.
var peerKinds = []string{"udp", "tcp", "udp elsewhere", "tcp elsewhere", "pipe", "tcp not listening", "unixgram"}

// peerFiles opens one descriptor of each of peerKinds; the offered address
// is the one "udp" and "tcp" are bound to.
func peerFiles(tb testing.TB) (files []*os.File, addr string) {
	tb.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	}}
	file := func(f *os.File, err error) *os.File {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = f.Close() })
		return f
	}
	// pair binds UDP on a port the kernel picks, then TCP on the same
	// port; another process may hold that TCP port, so it tries again.
	pair := func(addr string) (*os.File, *os.File, string) {
		tb.Helper()
		for try := 0; ; try++ {
			pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
			if err != nil {
				tb.Fatal(err)
			}
			bound := pc.LocalAddr().String()
			ln, err := lc.Listen(context.Background(), "tcp4", bound)
			if err != nil {
				_ = pc.Close()
				if try < 20 {
					continue
				}
				tb.Fatal(err)
			}
			u, t := file(pc.(*net.UDPConn).File()), file(ln.(*net.TCPListener).File())
			_, _ = pc.Close(), ln.Close()
			return u, t, bound
		}
	}
	udp, tcp, addr := pair("127.0.0.1:0")
	udp2, tcp2, _ := pair("127.0.0.1:0")
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	_ = w.Close()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	_ = unix.Close(fds[1])
	return []*os.File{udp, tcp, udp2, tcp2, file(r, nil), file(os.NewFile(uintptr(fd), "stream"), nil),
		file(os.NewFile(uintptr(fds[0]), "unixgram"), nil)}, addr
}

// FuzzCheckOffer plays a predecessor that sends any frame body with any
// mix of descriptors: the successor's check takes an offer only when every
// descriptor is what its place in the offer says, bound to the one address
// it serves, and never panics.
func FuzzCheckOffer(f *testing.F) {
	f.Add([]byte(`{"op":"offer","addrs":["ADDR"],"udp":1,"tcp":1}`), []byte{0, 1})
	f.Add([]byte(`{"op":"offer","addrs":["ADDR"],"udp":2,"tcp":1}`), []byte{0, 0, 1})
	f.Add([]byte(`{"op":"offer","addrs":["ADDR"],"udp":1,"tcp":1}`), []byte{1, 0})
	f.Add([]byte(`{"op":"offer","addrs":["ADDR"],"udp":1,"tcp":1}`), []byte{2, 3})
	f.Add([]byte(`{"op":"offer","addrs":["ADDR"],"udp":1,"tcp":1}`), []byte{4, 5})
	f.Add([]byte(`{"op":"offer","addrs":["ADDR","ADDR"],"udp":-1,"tcp":3}`), []byte{6, 1})
	f.Add([]byte(`{"op":"error","error":"no"}`), []byte{})
	kinds, addr := peerFiles(f)
	f.Fuzz(func(t *testing.T, body, pick []byte) {
		if len(pick) > 16 {
			pick = pick[:16]
		}
		body = []byte(strings.ReplaceAll(string(body), "ADDR", addr))
		send := make([]*os.File, len(pick))
		names := make([]string, len(pick))
		for i, b := range pick {
			k := int(b) % len(peerKinds)
			send[i], names[i] = kinds[k], peerKinds[k]
		}
		w, r := unixPair(t)
		defer r.Close()
		go func() {
			_, _, _ = w.WriteMsgUnix(frameBytes(string(body)), rights(send), nil)
			_ = w.Close()
		}()
		var m Msg
		files, err := ReadFrame(r, &m)
		if err != nil {
			return
		}
		if err := CheckOffer(m, files, []string{addr}); err != nil {
			return
		}
		defer CloseFiles(files)
		if len(names) != m.UDP+m.TCP {
			t.Fatalf("took an offer of %d UDP and %d TCP sockets with %d descriptors", m.UDP, m.TCP, len(names))
		}
		for i, n := range names {
			want := "udp"
			if i >= m.UDP {
				want = "tcp"
			}
			if n != want {
				t.Fatalf("took an offer whose descriptor %d is %q, want %q (%v for %+v)", i, n, want, names, m)
			}
		}
	})
}
