//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/iface"
)

// TestIfaceLibrary drives pkg/iface's Manager against the real kernel and
// each iptables flavour, in a namespace of its own: the exact rule lines after
// Setup, the link (dummy, or a bridge with one warning) and its addresses (v6
// with NODAD), an idempotent second Setup, Check and a second Manager
// repairing a killed predecessor's leftovers and an operator's meddling, Run
// putting back a deleted address on the netlink event, Teardown leaving no
// rule, chain or link, and ModeAuto picking the flavour that holds rules.
func TestIfaceLibrary(t *testing.T) {
	inOwnNetns(t, "TestIfaceLibrary", ifaceLibraryScenario)
}

// ifaceLibraryScenario runs in the child, inside the fresh namespace.
func ifaceLibraryScenario(t *testing.T, mode iface.IPTablesMode) {
	ctx := context.Background()
	cfg := iface.Config{
		LocalIPs: []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("10.96.0.10"),
			netip.MustParseAddr("fd00:20::10")},
		ExtraTCPPorts:  []uint16{9254},
		SetupInterface: true, SetupIPTables: true, IPTablesMode: mode,
		SyncInterval: time.Hour, // Run re-adds on netlink events only
	}
	warns := &warnLog{}
	m := newLibManager(t, cfg, warns)
	if got := m.Status().Rules.Backend; got != string(mode) {
		t.Errorf("backend: got %s, want %s", got, mode)
	}
	start := time.Now()
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Logf("first Setup (create link, 3 addresses, 8 chains, 53 rules): %v", time.Since(start))
	checkLibLink(t, cfg, warns)
	want := checkLibRules(t, mode)

	start = time.Now()
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	t.Logf("steady-state Setup (inspect only): %v", time.Since(start))
	if got := libSaveLines(t, mode); !slices.Equal(got, want) {
		t.Errorf("rules after second Setup:\n%s\nwant as after the first:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st, err := m.Check(ctx); err != nil || st.Counts.Readds != (iface.KindCounts{}) {
		t.Errorf("Check after second Setup: got %v, readds %+v, want nil and none", err, st.Counts.Readds)
	}

	m2 := meddleAndAdopt(t, cfg, mode, warns)
	if got := libSaveLines(t, mode); !slices.Equal(got, want) {
		t.Errorf("rules after restart:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	readdAddressViaRun(t, m2, iface.DefaultInterfaceName, netip.MustParseAddr("169.254.20.10"))

	if err := m2.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	for _, fam := range libFamilies {
		save := xtables(fam.cmd, mode, "-save")
		if out := runTool(t, save); strings.Contains(out, "nodecache") || strings.Contains(out, "NODECACHE") {
			t.Errorf("%s after Teardown: got our rules or chains, want none:\n%s", save, out)
		}
	}
	if _, err := netlink.LinkByName(iface.DefaultInterfaceName); err == nil {
		t.Error("link after Teardown: got present, want absent")
	}
	if _, err := m2.Check(ctx); !errors.Is(err, iface.ErrNotConverged) {
		t.Errorf("Check after Teardown: got %v, want ErrNotConverged", err)
	}

	// auto picks the flavour that holds rules: here the one this scenario runs.
	runTool(t, xtables("iptables", mode, ""), "-w", "5", "-t", "filter", "-A", "FORWARD", "-j", "ACCEPT")
	auto := cfg
	auto.IPTablesMode = iface.ModeAuto
	if got := newLibManager(t, auto, warns).Status().Rules.Backend; got != string(mode) {
		t.Errorf("auto with rules only in %s: got %s, want %s", mode, got, mode)
	}
}

// meddleAndAdopt leaves what a killed predecessor and an operator's meddling
// would (a duplicate rule, a second jump, a jump deleted, a chain flushed),
// wants a new Manager's Check to see it, and returns that Manager after its
// Setup.
func meddleAndAdopt(t testing.TB, cfg iface.Config, mode iface.IPTablesMode, warns *warnLog) *iface.Manager {
	t.Helper()
	ipt, ip6t := xtables("iptables", mode, ""), xtables("ip6tables", mode, "")
	dup := "-d 10.96.0.10/32 -p tcp -m tcp --dport 53 -m comment --comment nodecache -j ACCEPT"
	runTool(t, ipt, append([]string{"-w", "5", "-t", "filter", "-A", "NODECACHE-INPUT"}, strings.Fields(dup)...)...)
	runTool(t, ipt, "-w", "5", "-t", "raw", "-A", "PREROUTING", "-m", "comment", "--comment", "nodecache", "-j", "NODECACHE-PREROUTING")
	runTool(t, ipt, "-w", "5", "-t", "filter", "-D", "INPUT", "1")
	runTool(t, ip6t, "-w", "5", "-t", "raw", "-F", "NODECACHE-OUTPUT")
	m := newLibManager(t, cfg, warns)
	if _, err := m.Check(context.Background()); !errors.Is(err, iface.ErrNotConverged) {
		t.Errorf("Check after meddling: got %v, want ErrNotConverged", err)
	}
	if err := m.Setup(context.Background()); err != nil {
		t.Fatalf("Setup after restart: %v", err)
	}
	return m
}

// readdAddressViaRun deletes an address by hand while Run runs and waits
// for Run to put it back. The Manager's sync interval is an hour, so only
// the netlink event can explain a re-add within the wait; the time is logged.
func readdAddressViaRun(t testing.TB, m *iface.Manager, name string, ip netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	before := m.Status().Counts.Reconciles
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	}()
	// Run subscribes to netlink events before its first pass.
	eventually(t, "Run's first reconcile", func() error {
		if got := m.Status().Counts.Reconciles; got <= before {
			return fmt.Errorf("got %d reconciles, want more than %d", got, before)
		}
		return nil
	})
	link, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	victim := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}}
	start := time.Now()
	if err := netlink.AddrDel(link, victim); err != nil {
		t.Fatalf("deleting %s by hand: %v", victim.IPNet, err)
	}
	for time.Since(start) < 10*time.Second {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatalf("listing addresses: %v", err)
		}
		if slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == victim.IPNet.String() }) {
			t.Logf("address %s re-added by Run %v after deletion", victim.IPNet, time.Since(start))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Errorf("address %s: got still missing 10s after deletion (sync interval 1h), want it back on the netlink event", victim.IPNet)
}

// checkLibLink checks the link Setup made: a dummy, or a bridge with exactly
// one warning about the missing dummy driver; every local IP on it as a host
// prefix, the v6 ones with NODAD.
func checkLibLink(t testing.TB, cfg iface.Config, warns *warnLog) {
	t.Helper()
	link, err := netlink.LinkByName(iface.DefaultInterfaceName)
	if err != nil {
		t.Fatalf("link: %v", err)
	}
	if kind := link.Type(); kind == "bridge" {
		if got := warns.count("dummy"); got != 1 {
			t.Errorf("bridge fallback warnings: got %d, want 1", got)
		}
	} else if kind != "dummy" {
		t.Errorf("link kind: got %s, want dummy or bridge", kind)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, ip := range cfg.LocalIPs {
		want := hostPrefix(ip)
		i := slices.IndexFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == want })
		switch {
		case i < 0:
			t.Errorf("address %s: got missing, want present", want)
		case ip.Is6() && addrs[i].Flags&unix.IFA_F_NODAD == 0:
			t.Errorf("address %s: got flags %#x, want NODAD", want, addrs[i].Flags)
		}
	}
}

// checkLibRules checks the rules against pkg/iface's contract (its doc.go)
// and returns our rule lines: 5 rules per local IP and (protocol, port) plus
// 4 jumps per family, each once, each with the nodecache comment.
func checkLibRules(t testing.TB, mode iface.IPTablesMode) []string {
	t.Helper()
	lines := libSaveLines(t, mode)
	counts := map[string]int{}
	for _, l := range lines {
		if strings.Contains(l, "--comment nodecache") {
			counts[strings.Fields(l)[0]]++
		}
	}
	// v4: 2 IPs x 3 (proto, port) x 5 rules + 4 jumps; v6: 1 x 3 x 5 + 4.
	if counts["ipv4"] != 34 || counts["ipv6"] != 19 {
		t.Errorf("rules with our comment: got %v, want ipv4:34 ipv6:19\n%s", counts, strings.Join(lines, "\n"))
	}
	seen := map[string]int{}
	for _, l := range lines {
		if seen[l]++; seen[l] == 2 {
			t.Errorf("got duplicate line %q, want each once", l)
		}
	}
	for _, w := range []string{
		"ipv4 raw -A PREROUTING -m comment --comment nodecache -j NODECACHE-PREROUTING",
		"ipv6 filter -A OUTPUT -m comment --comment nodecache -j NODECACHE-OUTPUT",
		"ipv4 raw -A NODECACHE-PREROUTING -d 169.254.20.10/32 -p udp -m udp --dport 53 -m comment --comment nodecache -j NOTRACK",
		"ipv4 filter -A NODECACHE-OUTPUT -s 10.96.0.10/32 -p tcp -m tcp --sport 9254 -m comment --comment nodecache -j ACCEPT",
		"ipv6 filter -A NODECACHE-INPUT -d fd00:20::10/128 -p udp -m udp --dport 53 -m comment --comment nodecache -j ACCEPT",
	} {
		if !slices.Contains(lines, w) {
			t.Errorf("got no line %q", w)
		}
	}
	return lines
}
