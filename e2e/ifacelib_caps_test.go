//go:build e2e

package e2e

import (
	"context"
	"fmt"
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
	if got := procCaps(t, "self", "CapEff"); got != want {
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

// procCaps is the capability set field (CapEff, CapPrm, ...) of process
// pid ("self" for this one) from /proc/PID/status.
func procCaps(t *testing.T, pid, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%s/status", field, pid)
	return 0
}

// TestAgentDropsNetRaw: the agent, started as root with every capability,
// gives NET_RAW up once its rules are written with iptables-nft (and keeps
// serving and re-checking them), and keeps it with iptables-legacy, which
// needs it.
func TestAgentDropsNetRaw(t *testing.T) {
	requireSuite(t)
	for _, mode := range []string{"nft", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			r := newAgentRig(t, agentOpts{Flags: []string{"--iptables-mode=" + mode, "--sync-interval=200ms"}})
			pid := strconv.Itoa(r.agent.servingPID(t))
			for _, field := range []string{"CapEff", "CapPrm"} {
				has := procCaps(t, pid, field)&(1<<unix.CAP_NET_RAW) != 0
				if has != (mode == "legacy") {
					t.Errorf("%s of the serving process with %s: got NET_RAW %v, want %v", field, mode, has, mode == "legacy")
				}
			}
			ok := `nodecache_iface_reconciles_total{result="ok"}`
			first := metricSum(t, r.agent.metrics(t), ok)
			eventually(t, "three more reconciles", func() error { // at --sync-interval, without NET_RAW for nft
				if n := metricSum(t, r.agent.metrics(t), ok); n < first+3 {
					return fmt.Errorf("%s went from %v to %v", ok, first, n)
				}
				return nil
			})
			if n := metricSum(t, r.agent.metrics(t), `nodecache_iface_reconciles_total{result="error"}`); n != 0 {
				t.Errorf("failed reconciles: got %v, want 0", n)
			}
			if a := r.ask(t, query{Name: "dns-version." + clusterDomain + ".", Type: "TXT"}); a.Rcode != "NOERROR" {
				t.Errorf("after the reconciles: got %v, want NOERROR", a)
			}
		})
	}
}
