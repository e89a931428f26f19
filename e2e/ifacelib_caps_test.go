//go:build e2e

package e2e

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/iface"
)

// nftCaps are the capabilities the agent keeps on a node whose rules are
// written with iptables-nft (deploy/overlays/nft-only): NET_RAW is not
// among them.
var nftCaps = []int{unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE}

// TestIfaceLibraryCapabilities runs the library as root with only
// NET_ADMIN and NET_BIND_SERVICE (setpriv drops the rest from the bounding
// set): the nft backend sets up the link and every rule, checks and tears
// down, and port 53 binds; the legacy backend cannot write its rules (it
// talks to the kernel over a raw socket, which needs NET_RAW), which is why
// the base DaemonSet keeps NET_RAW.
func TestIfaceLibraryCapabilities(t *testing.T) {
	bounding := "-all"
	for _, c := range nftCaps {
		bounding += ",+" + capName(c)
	}
	wrap := []string{"setpriv", "--bounding-set=" + bounding, "--inh-caps=-all", "--"}
	inOwnNetnsVia(t, "TestIfaceLibraryCapabilities", wrap, capsScenario)
}

func capName(c int) string {
	return map[int]string{unix.CAP_NET_ADMIN: "net_admin", unix.CAP_NET_BIND_SERVICE: "net_bind_service"}[c]
}

func capsScenario(t *testing.T, mode iface.IPTablesMode) {
	var want uint64
	for _, c := range nftCaps {
		want |= 1 << c
	}
	if got := effectiveCaps(t); got != want {
		t.Fatalf("effective capabilities: got %#x, want %#x (NET_ADMIN and NET_BIND_SERVICE only)", got, want)
	}
	cfg := iface.Config{LocalIPs: []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("fd00:20::10")},
		SetupInterface: true, SetupIPTables: true, IPTablesMode: mode, SyncInterval: time.Hour}
	ctx := context.Background()
	m, err := iface.New(cfg, prometheus.NewRegistry(), slog.New(&warnLog{}))
	if err == nil {
		defer m.Close()
		err = m.Setup(ctx)
	}
	if mode == iface.ModeLegacy {
		if err == nil {
			t.Errorf("legacy Setup without NET_RAW: got nil, want it refused by the kernel")
		}
		t.Logf("legacy without NET_RAW: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("nft Setup without NET_RAW: %v", err)
	}
	if _, err := m.Check(ctx); err != nil {
		t.Errorf("nft Check without NET_RAW: %v", err)
	}
	ln, err := net.ListenPacket("udp4", "169.254.20.10:53")
	if err != nil {
		t.Errorf("binding port 53 with NET_BIND_SERVICE: %v", err)
	} else {
		_ = ln.Close()
	}
	if err := m.Teardown(ctx); err != nil {
		t.Errorf("nft Teardown without NET_RAW: %v", err)
	}
}

// effectiveCaps is this process's CapEff from /proc/self/status.
func effectiveCaps(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return 0
}
