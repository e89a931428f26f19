//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/nodecache/nodecache/pkg/iface"
)

// TestIfaceLibraryHostSafety checks, against the real kernel and each
// iptables flavour in a namespace of its own, that pkg/iface's Manager marks
// the link it creates, refuses a CNI bridge of the configured name, and keeps
// exactly one copy of its jump while other writers edit the same built-in
// chain without losing theirs.
func TestIfaceLibraryHostSafety(t *testing.T) {
	inOwnNetns(t, "TestIfaceLibraryHostSafety", ifaceHostSafetyScenario)
}

// The foreign rules of the host-safety scenario, in the form iptables -S
// prints them.
const (
	foreignFirstRule  = "-m comment --comment calico -j ACCEPT"
	foreignSecondRule = "-m comment --comment kube-proxy -j ACCEPT"
	staticRule        = "-m comment --comment static -j ACCEPT"
)

// ifaceHostSafetyScenario runs in the child, inside the fresh namespace.
func ifaceHostSafetyScenario(t *testing.T, mode iface.IPTablesMode) {
	ctx := context.Background()
	cfg := iface.Config{
		LocalIPs:       []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("fd00:20::10")},
		SetupInterface: true, SetupIPTables: true, IPTablesMode: mode,
	}
	m := newLibManager(t, cfg, &warnLog{})
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	l, err := netlink.LinkByName(iface.DefaultInterfaceName)
	if err != nil {
		t.Fatalf("link: %v", err)
	}
	const alias = "nodecache" // marks the link as nodecache's, as pkg/iface documents it
	if got := l.Attrs().Alias; got != alias {
		t.Errorf("alias of the %s link Setup created: got %q, want %q", l.Type(), got, alias)
	}

	checkCNIBridgeRefused(t, cfg)
	checkForeignWriters(t, m, mode)

	if err := m.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	out := runTool(t, xtables("iptables", mode, "-save"), "-t", "raw")
	if strings.Contains(out, "nodecache") {
		t.Errorf("after Teardown: got our rules, want none:\n%s", out)
	}
	for _, spec := range []string{foreignFirstRule, staticRule} {
		if n := strings.Count(out, spec); n != 1 {
			t.Errorf("after Teardown: got %d copies of %q, want 1:\n%s", n, spec, out)
		}
	}
}

// checkCNIBridgeRefused: InterfaceName cni0 with a CNI's bridge there fails
// Setup and leaves the bridge, its address and its state alone, through
// Teardown too.
func checkCNIBridgeRefused(t testing.TB, base iface.Config) {
	t.Helper()
	for _, args := range [][]string{
		{"link", "add", "cni0", "type", "bridge"},
		{"addr", "add", "10.244.0.1/24", "dev", "cni0"},
		{"link", "set", "cni0", "up"},
	} {
		mustIP(t, args...)
	}
	cfg := base
	cfg.InterfaceName, cfg.SetupIPTables = "cni0", false
	m := newLibManager(t, cfg, &warnLog{})
	err := m.Setup(context.Background())
	if !errors.Is(err, iface.ErrForeignLink) || !strings.Contains(err.Error(), "not created by nodecache") {
		t.Errorf("Setup with InterfaceName cni0: got %v, want ErrForeignLink saying why", err)
	}
	if err := m.Teardown(context.Background()); !errors.Is(err, iface.ErrForeignLink) {
		t.Errorf("Teardown with InterfaceName cni0: got %v, want ErrForeignLink", err)
	}
	out, err := ipCmd("-o", "addr", "show", "dev", "cni0")
	if err != nil || !strings.Contains(out, "10.244.0.1/24") || strings.Contains(out, "169.254.20.10") {
		t.Errorf("cni0 after Setup and Teardown: got %v\n%s\nwant it present with 10.244.0.1/24 only", err, out)
	}
}

// checkForeignWriters runs two other writers on raw PREROUTING while the
// Manager is given a second copy of its jump and re-syncs, 30 times: one
// keeps its rule first with an atomic move (as Calico in insert mode), one
// inserts and deletes a rule of its own at position 1 (shifting positions).
// A rule appended before they start must survive, and every rule must end up
// once.
func checkForeignWriters(t testing.TB, m *iface.Manager, mode iface.IPTablesMode) {
	t.Helper()
	ipt := xtables("iptables", mode, "")
	// The jump to our raw PREROUTING chain, as pkg/iface documents it.
	jump := "-m comment --comment nodecache -j NODECACHE-PREROUTING"
	runTool(t, ipt, append([]string{"-w", "5", "-t", "raw", "-A", "PREROUTING"}, strings.Fields(staticRule)...)...)
	runTool(t, ipt, append([]string{"-w", "5", "-t", "raw", "-A", "PREROUTING"}, strings.Fields(foreignFirstRule)...)...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	writer := func(input string) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cmd := exec.Command(xtables("iptables", mode, "-restore"), "--noflush", "--wait", "5")
			cmd.Stdin = strings.NewReader(input)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("foreign writer: %v: %s", err, out)
				return
			}
		}
	}
	wg.Add(2)
	go writer("*raw\n-D PREROUTING " + foreignFirstRule + "\n-I PREROUTING 1 " + foreignFirstRule + "\nCOMMIT\n")
	go writer("*raw\n-I PREROUTING 1 " + foreignSecondRule + "\nCOMMIT\n*raw\n-D PREROUTING " + foreignSecondRule + "\nCOMMIT\n")
	for range 30 {
		runTool(t, ipt, append([]string{"-w", "5", "-t", "raw", "-A", "PREROUTING"}, strings.Fields(jump)...)...)
		if err := m.Setup(context.Background()); err != nil {
			t.Logf("Setup with foreign writers: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if err := m.Setup(context.Background()); err != nil {
		t.Errorf("Setup after the writers stopped: %v", err)
	}
	rules := chainRules(t, ipt, "raw", "PREROUTING")
	list := strings.Join(rules, "\n")
	for spec, want := range map[string]int{staticRule: 1, foreignFirstRule: 1, foreignSecondRule: 0, jump: 1} {
		if got := countEqual(rules, spec); got != want {
			t.Errorf("raw/PREROUTING after the writers: got %d copies of %q, want %d\n%s", got, spec, want, list)
		}
	}
	if i := slices.Index(rules, jump); i > 1 {
		t.Errorf("raw/PREROUTING after the writers: got our jump at position %d, want 1 or 2 (below the writer that wants 1 at most)\n%s", i+1, list)
	}
	t.Logf("raw/PREROUTING after 30 syncs against two writers:\n%s", list)
}

// countEqual returns how many elements of list equal s.
func countEqual(list []string, s string) int {
	n := 0
	for _, e := range list {
		if e == s {
			n++
		}
	}
	return n
}
