//go:build linux

package iface

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
)

// TestHostSafetyInNetns checks, against the real kernel and both iptables flavours, that the
// Manager marks the link it creates, refuses a CNI bridge of the configured name, and keeps exactly
// one copy of its jump while other writers edit the same built-in chain without losing theirs.
func TestHostSafetyInNetns(t *testing.T) {
	inNetns(t, "TestHostSafetyInNetns", hostSafetyScenario)
}

func hostSafetyScenario(t *testing.T, mode IPTablesMode) {
	requireOwnNetns(t)
	ctx := context.Background()
	cfg := Config{
		LocalIPs:       []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("fd00:20::10")},
		SetupInterface: true, SetupIPTables: true, IPTablesMode: mode,
	}
	m := newReal(t, cfg, newLogCapture())
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	l, err := netlink.LinkByName(DefaultInterfaceName)
	if err != nil {
		t.Fatalf("link: %v", err)
	}
	if l.Attrs().Alias != linkAlias {
		t.Errorf("alias of the %s link Setup created: got %q, want %q", l.Type(), l.Attrs().Alias, linkAlias)
	}

	checkCNIBridgeRefused(t, cfg)
	checkForeignWriters(t, m, mode)

	if err := m.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	out := iptablesCmd(t, binary(FamilyV4, mode, "-save"), "-t", "raw")
	if strings.Contains(out, "nodecache") {
		t.Errorf("after Teardown: got our rules, want none:\n%s", out)
	}
	for _, spec := range []string{foreignFirstReal, "-m comment --comment static -j ACCEPT"} {
		if n := strings.Count(out, spec); n != 1 {
			t.Errorf("after Teardown: got %d copies of %q, want 1:\n%s", n, spec, out)
		}
	}
}

// checkCNIBridgeRefused: --interface-name=cni0 with a CNI's bridge there fails Setup and leaves the
// bridge, its address and its state alone, through Teardown too.
func checkCNIBridgeRefused(t *testing.T, base Config) {
	t.Helper()
	for _, args := range [][]string{
		{"link", "add", "cni0", "type", "bridge"},
		{"addr", "add", "10.244.0.1/24", "dev", "cni0"},
		{"link", "set", "cni0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	cfg := base
	cfg.InterfaceName, cfg.SetupIPTables = "cni0", false
	m := newReal(t, cfg, newLogCapture())
	err := m.Setup(context.Background())
	if !errors.Is(err, ErrForeignLink) || !strings.Contains(err.Error(), "not created by nodecache") {
		t.Errorf("Setup with --interface-name=cni0: got %v, want ErrForeignLink saying why", err)
	}
	if err := m.Teardown(context.Background()); !errors.Is(err, ErrForeignLink) {
		t.Errorf("Teardown with --interface-name=cni0: got %v, want ErrForeignLink", err)
	}
	out, err := exec.Command("ip", "-o", "addr", "show", "dev", "cni0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.244.0.1/24") || strings.Contains(string(out), "169.254.20.10") {
		t.Errorf("cni0 after Setup and Teardown: got %v\n%s\nwant it present with 10.244.0.1/24 only", err, out)
	}
}

// checkForeignWriters runs two other writers on raw PREROUTING while the Manager is given a second
// copy of its jump and re-syncs, 30 times: one keeps its rule first with an atomic move (as Calico
// in insert mode), one inserts and deletes a rule of its own at position 1 (shifting positions).
// A rule appended before they start must survive, and every rule must end up once.
func checkForeignWriters(t *testing.T, m *Manager, mode IPTablesMode) {
	t.Helper()
	ipt := binary(FamilyV4, mode, "")
	ref := ourChains()[0]
	jump := jumpSpec(ref)
	const static = "-m comment --comment static -j ACCEPT"
	iptablesCmd(t, ipt, append([]string{"-t", "raw", "-A", "PREROUTING"}, strings.Fields(static)...)...)
	iptablesCmd(t, ipt, append([]string{"-t", "raw", "-A", "PREROUTING"}, strings.Fields(foreignFirstReal)...)...)
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
			cmd := exec.Command(binary(FamilyV4, mode, "-restore"), "--noflush", "--wait", "5")
			cmd.Stdin = strings.NewReader(input)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("foreign writer: %v: %s", err, out)
				return
			}
		}
	}
	wg.Add(2)
	go writer("*raw\n-D PREROUTING " + foreignFirstReal + "\n-I PREROUTING 1 " + foreignFirstReal + "\nCOMMIT\n")
	go writer("*raw\n-I PREROUTING 1 " + foreignSecondReal + "\nCOMMIT\n*raw\n-D PREROUTING " + foreignSecondReal + "\nCOMMIT\n")
	for range 30 {
		iptablesCmd(t, ipt, append([]string{"-t", "raw", "-A", "PREROUTING"}, jump...)...)
		if err := m.Setup(context.Background()); err != nil {
			t.Logf("Setup with foreign writers: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if err := m.Setup(context.Background()); err != nil {
		t.Errorf("Setup after the writers stopped: %v", err)
	}
	rules, _, err := m.rules.ListRules(FamilyV4, ref.Table, ref.Parent)
	if err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]int{static: 1, foreignFirstReal: 1, foreignSecondReal: 0, joinSpec(jump): 1} {
		if got := countOf(rules, spec); got != want {
			t.Errorf("raw/PREROUTING after the writers: got %d copies of %q, want %d\n%s", got, spec, want, joinLines(rules))
		}
	}
	if i := slices.Index(rules, joinSpec(jump)); i > 1 {
		t.Errorf("raw/PREROUTING after the writers: got our jump at position %d, want 1 or 2 (below the writer that wants 1 at most)\n%s", i+1, joinLines(rules))
	}
	t.Logf("raw/PREROUTING after 30 syncs against two writers:\n%s", joinLines(rules))
}

// The foreign rules of the real-kernel test, in the form iptables -S prints them.
const (
	foreignFirstReal  = "-m comment --comment calico -j ACCEPT"
	foreignSecondReal = "-m comment --comment kube-proxy -j ACCEPT"
)
