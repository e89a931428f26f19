package server

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/nodecache/nodecache/internal/testnet"
)

// withProcs runs the test with GOMAXPROCS n, whatever the machine has.
func withProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

func freeAddr(t testing.TB) netip.AddrPort {
	t.Helper()
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

func udpPerAddr(l *Listeners) map[netip.AddrPort]int {
	n := map[netip.AddrPort]int{}
	for _, c := range l.UDP {
		n[c.LocalAddr().(*net.UDPAddr).AddrPort()]++
	}
	return n
}

// TestListenOneUDPSocketPerCPU checks the default of one SO_REUSEPORT
// socket per CPU per address, on a fresh start and after a handover from a
// predecessor that had fewer (or more) sockets.
func TestListenOneUDPSocketPerCPU(t *testing.T) {
	withProcs(t, 3)
	a, b := freeAddr(t), freeAddr(t)
	l, err := Listen(context.Background(), []netip.AddrPort{a, b}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := udpPerAddr(l); got[a] != 3 || got[b] != 3 || len(l.TCP) != 2 {
		t.Errorf("fresh start: got %v UDP sockets and %d TCP listeners, want 3 per address and 2", got, len(l.TCP))
	}

	for _, had := range []int{1, 5} {
		c := freeAddr(t)
		old, err := Listen(context.Background(), []netip.AddrPort{c}, had)
		if err != nil {
			t.Fatal(err)
		}
		files, err := old.Files()
		if err != nil {
			t.Fatal(err)
		}
		l, err := FromFiles(files)
		old.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := max(had, 3)
		if got := udpPerAddr(l); got[c] != want || len(l.UDP) != want || len(l.TCP) != 1 {
			t.Errorf("handover of %d: got %v UDP sockets and %d TCP listeners, want %d and 1", had, got, len(l.TCP), want)
		}
		l.Close()
	}
}
