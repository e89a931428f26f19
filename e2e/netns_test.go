//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// nsSeq numbers the namespaces of one test binary; names also carry the pid
// so two test binaries on one host do not collide.
var nsSeq atomic.Int64

// netnsPrefix starts the name of every namespace this suite creates.
const netnsPrefix = "nce2e-"

// netNS is a named network namespace (/run/netns/Name), usable with
// `ip netns exec`.
type netNS struct {
	Name string
}

// newNetNS creates a named network namespace with lo up; cleanup deletes it
// and its /etc/netns/Name directory.
func newNetNS(t testing.TB, role string) *netNS {
	t.Helper()
	n := &netNS{Name: fmt.Sprintf("%s%d-%s%d", netnsPrefix, os.Getpid(), role, nsSeq.Add(1))}
	mustIP(t, "netns", "add", n.Name)
	t.Cleanup(func() {
		if err := os.RemoveAll(filepath.Join("/etc/netns", n.Name)); err != nil {
			t.Errorf("removing /etc/netns/%s: %v", n.Name, err)
		}
		_ = os.Remove("/etc/netns") // only succeeds when empty
		if out, err := ipCmd("netns", "del", n.Name); err != nil {
			t.Errorf("deleting netns %s: %v: %s", n.Name, err, out)
		}
	})
	mustIP(t, "-n", n.Name, "link", "set", "lo", "up")
	return n
}

// ipCmd runs ip(8) and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func mustIP(t testing.TB, args ...string) string {
	t.Helper()
	out, err := ipCmd(args...)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return out
}

// writeResolvConf writes /etc/netns/Name/resolv.conf, which `ip netns exec`
// bind-mounts over /etc/resolv.conf, as the kubelet would write it for a pod
// in namespace podNS with ClusterFirst DNS.
func (n *netNS) writeResolvConf(t testing.TB, nameserver, podNS, domain string) {
	t.Helper()
	dir := filepath.Join("/etc/netns", n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("creating %s: %v", dir, err)
	}
	body := fmt.Sprintf("search %[1]s.svc.%[2]s svc.%[2]s %[2]s\nnameserver %[3]s\noptions ndots:5\n", podNS, domain, nameserver)
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(body), 0o644); err != nil {
		t.Fatalf("writing resolv.conf for %s: %v", n.Name, err)
	}
}

// do runs fn on an OS thread that has entered n, then returns the thread to
// the caller's namespace. Sockets created inside fn stay in n for their whole
// life, whichever thread later uses them. If the thread cannot be restored it
// stays locked and dies with its goroutine.
func (n *netNS) do(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("getting current netns: %w", err)
			return
		}
		defer orig.Close()
		target, err := netns.GetFromName(n.Name)
		if err != nil {
			errc <- fmt.Errorf("opening netns %s: %w", n.Name, err)
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("entering netns %s: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leaving netns %s: %w", n.Name, err)
			return // thread stays locked and is discarded
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// listen opens a stream listener inside n.
func (n *netNS) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// listenPacket opens a packet socket inside n.
func (n *netNS) listenPacket(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := n.do(func() (err error) {
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// dial connects from inside n; the connection stays in n.
func (n *netNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// vethSeq numbers pod links so each gets its own /24.
var vethSeq atomic.Int64

// pod is a "pod" netns joined to a node netns by a veth pair, as a CNI
// plugin would join it: eth0 inside the pod, vethN in the node.
type pod struct {
	NS      *netNS
	IP      string // eth0 address
	Gateway string // node side of the veth
}

// addPod creates a pod netns linked to node with a /32 route to each
// linkLocal IP (and a default route) via the node side of the veth.
func addPod(t testing.TB, node *netNS, linkLocal ...string) *pod {
	t.Helper()
	k := vethSeq.Add(1)
	if k > 250 {
		t.Fatalf("too many pods in one test binary: %d", k)
	}
	p := &pod{NS: newNetNS(t, "pod"), IP: fmt.Sprintf("10.200.%d.2", k), Gateway: fmt.Sprintf("10.200.%d.1", k)}
	hostSide := fmt.Sprintf("veth%d", k)
	mustIP(t, "-n", node.Name, "link", "add", hostSide, "type", "veth", "peer", "name", "eth0", "netns", p.NS.Name)
	mustIP(t, "-n", node.Name, "addr", "add", p.Gateway+"/24", "dev", hostSide)
	mustIP(t, "-n", node.Name, "link", "set", hostSide, "up")
	mustIP(t, "-n", p.NS.Name, "addr", "add", p.IP+"/24", "dev", "eth0")
	mustIP(t, "-n", p.NS.Name, "link", "set", "eth0", "up")
	for _, ip := range linkLocal {
		mustIP(t, "-n", p.NS.Name, "route", "add", ip+"/32", "via", p.Gateway, "dev", "eth0")
	}
	mustIP(t, "-n", p.NS.Name, "route", "add", "default", "via", p.Gateway, "dev", "eth0")
	return p
}

var dummyProbe = sync.OnceValue(func() error {
	name := fmt.Sprintf("nce2e-%d-probe", os.Getpid())
	if out, err := ipCmd("netns", "add", name); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	defer ipCmd("netns", "del", name) //nolint:errcheck // best effort
	if out, err := ipCmd("-n", name, "link", "add", "probe0", "type", "dummy"); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	return nil
})

// dummySupported reports whether the kernel can create dummy links (some
// VM kernels are built without CONFIG_DUMMY); the error says why not.
func dummySupported() error { return dummyProbe() }
