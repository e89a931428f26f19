//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodecache/nodecache/pkg/iface"
)

// TestIfaceLibraryAcceptRestriction: with --accept-interfaces or
// --accept-sources the kernel holds, in NODECACHE-INPUT, an ACCEPT for the
// node's own queries (lo), one per allowed interface and source, and a DROP
// for the rest; a query from a peer namespace over a veth arrives when its
// interface or source is allowed and is dropped (the DROP rule counts it,
// the listener gets nothing) when not, while the node's own always arrive.
// The chain's default policy here is ACCEPT: the drop is the agent's.
func TestIfaceLibraryAcceptRestriction(t *testing.T) {
	inOwnNetns(t, "TestIfaceLibraryAcceptRestriction", acceptRestrictionScenario)
}

func acceptRestrictionScenario(t *testing.T, mode iface.IPTablesMode) {
	local := netip.MustParseAddr("169.254.20.10")
	peer := newNetNS(t, "peer")
	mustIP(t, "link", "add", "ncin0", "type", "veth", "peer", "name", "ncout0", "netns", peer.Name)
	mustIP(t, "addr", "add", "10.77.0.1/24", "dev", "ncin0")
	mustIP(t, "link", "set", "ncin0", "up")
	mustIP(t, "-n", peer.Name, "addr", "add", "10.77.0.2/24", "dev", "ncout0")
	mustIP(t, "-n", peer.Name, "link", "set", "ncout0", "up")
	mustIP(t, "-n", peer.Name, "route", "add", local.String()+"/32", "via", "10.77.0.1")
	ipt := xtables("iptables", mode, "")
	pfx := netip.MustParsePrefix
	tail := " -p udp -m udp --dport 53 -m comment --comment nodecache -j "
	tests := []struct {
		name    string
		ifaces  []string
		sources []netip.Prefix
		rules   []string // the chain's udp/53 rules for local, in order
		arrives bool     // the peer's query
	}{
		{"allowed interface", []string{"ncin+"}, nil, []string{
			"-d 169.254.20.10/32 -i lo" + tail + "ACCEPT", "-d 169.254.20.10/32 -i ncin+" + tail + "ACCEPT",
			"-d 169.254.20.10/32" + tail + "DROP"}, true},
		{"other interface", []string{"cali+"}, nil, nil, false},
		{"allowed source", nil, []netip.Prefix{pfx("10.77.0.0/24")}, []string{
			"-d 169.254.20.10/32 -i lo" + tail + "ACCEPT", "-s 10.77.0.0/24 -d 169.254.20.10/32" + tail + "ACCEPT",
			"-d 169.254.20.10/32" + tail + "DROP"}, true},
		{"other source", []string{"ncin+"}, []netip.Prefix{pfx("10.88.0.0/16")}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := iface.Config{LocalIPs: []netip.Addr{local}, SetupInterface: true, SetupIPTables: true,
				IPTablesMode: mode, SyncInterval: time.Hour, AcceptInterfaces: tc.ifaces, AcceptSources: tc.sources}
			m := newLibManager(t, cfg, &warnLog{})
			if err := m.Setup(context.Background()); err != nil {
				t.Fatalf("Setup: %v", err)
			}
			t.Cleanup(func() { _ = m.Teardown(context.Background()) })
			if _, err := m.Check(context.Background()); err != nil {
				t.Errorf("Check after Setup: got %v, want the kernel's rules as desired", err)
			}
			var udp []string
			for _, r := range chainRules(t, ipt, "filter", "NODECACHE-INPUT") {
				if strings.Contains(r, "-p udp") {
					udp = append(udp, r)
				}
			}
			t.Logf("%s NODECACHE-INPUT udp rules:\n%s", ipt, strings.Join(udp, "\n"))
			if tc.rules != nil && !slices.Equal(udp, tc.rules) {
				t.Errorf("rules:\ngot  %q\nwant %q", udp, tc.rules)
			}
			conn, err := net.ListenPacket("udp4", local.String()+":53")
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			sendLocal(t, local)
			if got := readOne(t, conn, 5*time.Second); got != "local" {
				t.Errorf("the node's own query: got %q, want it to arrive", got)
			}
			drops := dropCount(t, ipt)
			runTool(t, "ip", "netns", "exec", peer.Name, "bash", "-c", "echo -n peer > /dev/udp/"+local.String()+"/53")
			if tc.arrives {
				if got := readOne(t, conn, 5*time.Second); got != "peer" {
					t.Errorf("the peer's query: got %q, want it to arrive", got)
				}
				return
			}
			eventually(t, "the DROP rule to count the peer's query", func() error {
				if n := dropCount(t, ipt); n != drops+1 {
					return fmt.Errorf("DROP counted %d packets, want %d", n, drops+1)
				}
				return nil
			})
			if got := readOne(t, conn, 100*time.Millisecond); got != "" { // dropped at INPUT: it can never arrive later
				t.Errorf("the peer's query: got %q, want it dropped", got)
			}
		})
	}
}

func sendLocal(t *testing.T, ip netip.Addr) {
	t.Helper()
	c, err := net.Dial("udp4", ip.String()+":53")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("local")); err != nil {
		t.Fatal(err)
	}
}

// readOne returns the next datagram on conn, "" when none came within d.
func readOne(t *testing.T, conn net.PacketConn, d time.Duration) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		return ""
	}
	return string(buf[:n])
}

// dropCount is the packet counter of NODECACHE-INPUT's udp/53 DROP rule.
func dropCount(t *testing.T, ipt string) int {
	t.Helper()
	for _, l := range strings.Split(runTool(t, ipt, "-w", "5", "-t", "filter", "-L", "NODECACHE-INPUT", "-v", "-x", "-n"), "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && f[2] == "DROP" && strings.Contains(l, "udp dpt:53") {
			n, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("counter of %q: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("no udp/53 DROP rule in NODECACHE-INPUT")
	return 0
}
