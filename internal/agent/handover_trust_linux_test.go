//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/internal/handover"
)

// predecessorEnv makes the test binary a fake predecessor: it listens on the
// unix socket named by the variable's value (PATH,ADDR), offers UDP and TCP
// sockets bound to ADDR to the first successor and exits. Run as another uid
// by TestHandoverDialChecksPeerCredentials.
const predecessorEnv = "NODECACHE_TEST_PREDECESSOR"

// runFakePredecessor is the child's side of predecessorEnv.
func runFakePredecessor(spec string) int {
	path, addr, _ := strings.Cut(spec, ",")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	defer ln.Close()
	files, err := boundSockets(addr)
	if err != nil {
		fmt.Println("sockets:", err)
		return 1
	}
	if err := offerOnce(ln, []string{addr}, files, 1, 1); err != nil {
		fmt.Println("offer:", err)
		return 1
	}
	return 0
}

// boundSockets opens a UDP socket and a TCP listener on addr and returns
// their descriptors, UDP first.
func boundSockets(addr string) ([]*os.File, error) {
	lc := net.ListenConfig{Control: reuseAddrPort} // as the agent's own, which a successor tops up
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	ln, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	u, err := pc.(*net.UDPConn).File()
	if err != nil {
		return nil, err
	}
	t, err := ln.(*net.TCPListener).File()
	if err != nil {
		_ = u.Close()
		return nil, err
	}
	return []*os.File{u, t}, nil
}

// offerOnce plays a predecessor for one successor: it reads the hello,
// offers files as udp+tcp listeners of addrs, sends no cache and waits for
// the successor to hang up.
func offerOnce(ln *net.UnixListener, addrs []string, files []*os.File, udp, tcp int) error {
	defer handover.CloseFiles(files)
	c, err := ln.AcceptUnix()
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	var hello handover.Msg
	if _, err := handover.ReadFrame(c, &hello); err != nil {
		return fmt.Errorf("reading hello: %w", err)
	}
	offer := handover.Msg{Op: handover.OpOffer, Addrs: addrs, UDP: udp, TCP: tcp}
	if err := handover.WriteFrame(c, offer, files); err != nil {
		return err
	}
	if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil { // no cache follows
		return err
	}
	var b [1]byte
	_, _ = c.Read(b[:])
	return nil
}

// trustAgent is an agent (not running) whose handover socket is path and
// whose only address is 127.0.0.1:port.
func trustAgent(t *testing.T, path string, port uint16) *Agent {
	t.Helper()
	cfg := testAgentConfig(t, netip.MustParseAddrPort("127.0.0.1:53"), t.TempDir(), port, "--handover-socket", path)
	return newTestAgent(t, cfg)
}

// receive runs the successor's side against whatever listens on the agent's
// handover socket and returns its error; it fails t when the agent took
// listeners.
func receive(t *testing.T, a *Agent) error {
	t.Helper()
	l, conn, err := a.receiveHandover(context.Background())
	if l != nil {
		l.Close()
		_ = conn.Close()
		t.Fatalf("the successor took the offered listeners; want them refused")
	}
	return err
}

// inProcessPredecessor listens on path (as this process, root) and offers
// files once, in a goroutine.
func inProcessPredecessor(t *testing.T, path string, addrs []string, files []*os.File, udp, tcp int) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		handover.CloseFiles(files)
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = offerOnce(ln, addrs, files, udp, tcp) }()
	t.Cleanup(func() { _ = ln.Close(); <-done })
}

// TestHandoverDialRefusesOtherUsersDirectory: a handover socket in a
// directory another user owns (0755, so nobody else can write to it) is
// that user's, whatever it offers: the successor does not dial it, and a
// listening agent does not put its own socket there.
func TestHandoverDialRefusesOtherUsersDirectory(t *testing.T) {
	requireRoot(t, "giving a directory to another uid")
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "handover.sock")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	inProcessPredecessor(t, path, []string{addr}, genuine(t, addr), 1, 1)
	err := receive(t, trustAgent(t, path, port))
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("dialing into uid 65534's directory: got %v, want a refusal naming the owner", err)
	}
	if _, err := listenSocket(t, filepath.Join(dir, "admin.sock"), 0); err == nil {
		t.Errorf("listening in uid 65534's directory: got nil, want a refusal")
	}
}

// TestHandoverDialRefusesOtherUsersSocket: a socket file that another user
// owns, in a directory root owns, is refused before it is dialled.
func TestHandoverDialRefusesOtherUsersSocket(t *testing.T) {
	requireRoot(t, "giving a socket to another uid")
	path := filepath.Join(t.TempDir(), "handover.sock")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	inProcessPredecessor(t, path, []string{addr}, genuine(t, addr), 1, 1)
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := receive(t, trustAgent(t, path, port))
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("dialing uid 65534's socket: got %v, want a refusal naming the owner", err)
	}
}

// TestHandoverDialChecksPeerCredentials: the process listening on the
// handover socket is checked (SO_PEERCRED) when the successor dials, not
// only the files: a peer re-executed as uid 65534, whose socket file was
// then given to root, offers real sockets bound to the right address and
// is refused.
func TestHandoverDialChecksPeerCredentials(t *testing.T) {
	requireRoot(t, "running a peer as another uid")
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Like /tmp: root's, writable by all, sticky. The peer may create its
	// socket here, but nobody may replace another's.
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil { //nolint:gosec // G302: on purpose, for the other uid
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir)} { // the peer must reach dir
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // G302: on purpose, for the other uid
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "handover.sock")
	port := freePort(t)
	bin := filepath.Join(dir, "peer.test")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,127.0.0.1:%d", predecessorEnv, path, port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitForSocket(t, path, &out)
	if err := os.Lchown(path, 0, 0); err != nil { // only the credentials check is left
		t.Fatal(err)
	}
	err := receive(t, trustAgent(t, path, port))
	if err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("a predecessor running as uid 65534: got %v, want a refusal naming its uid", err)
	}
}

func waitForSocket(t *testing.T, path string, out fmt.Stringer) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the peer never listened on %s: %s", path, out)
}

// TestHandoverRefusesForeignDescriptors: every descriptor of an offer must
// be a socket of the kind its place says (UDP, then TCP listening) bound to
// an address of the offer; anything else ends the handover and every
// descriptor is closed.
func TestHandoverRefusesForeignDescriptors(t *testing.T) {
	requireRoot(t, "the handover socket's checks expect root's directories")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	elsewhere := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tests := []struct {
		name  string
		files func(t *testing.T) []*os.File
		want  string
	}{
		{"a pipe for the UDP socket", func(t *testing.T) []*os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			return []*os.File{r, genuine(t, addr)[1]}
		}, "not a socket"},
		{"sockets bound elsewhere", func(t *testing.T) []*os.File { return genuine(t, elsewhere) }, "bound to " + elsewhere},
		{"TCP first, UDP second", func(t *testing.T) []*os.File {
			f := genuine(t, addr)
			return []*os.File{f[1], f[0]}
		}, "want a UDP socket"},
		{"a TCP socket that does not listen", func(t *testing.T) []*os.File {
			return []*os.File{genuine(t, addr)[0], rawSocket(t, unix.SOCK_STREAM, addr)}
		}, "not listening"},
		{"a unix datagram socket", func(t *testing.T) []*os.File {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			_ = unix.Close(fds[1])
			return []*os.File{os.NewFile(uintptr(fds[0]), "unixgram"), genuine(t, addr)[1]}
		}, "want a UDP socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "handover.sock")
			inProcessPredecessor(t, path, []string{addr}, tc.files(t), 1, 1)
			err := receive(t, trustAgent(t, path, port))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	t.Run("genuine sockets are taken", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "handover.sock")
		inProcessPredecessor(t, path, []string{addr}, genuine(t, addr), 1, 1)
		a := trustAgent(t, path, port)
		l, conn, err := a.receiveHandover(context.Background())
		if err != nil || l == nil {
			t.Fatalf("got %v, %v, want the listeners", l, err)
		}
		l.Close()
		_ = conn.Close()
	})
}

// genuine is a UDP socket and a TCP listener on addr, as a predecessor
// offers them.
func genuine(t *testing.T, addr string) []*os.File {
	t.Helper()
	files, err := boundSockets(addr)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// rawSocket is an IPv4 socket of type typ bound to addr, neither
// connected nor listening.
func rawSocket(t *testing.T, typ int, addr string) *os.File {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(addr)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil && !errors.Is(err, unix.EADDRINUSE) {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), "raw")
}
