//go:build linux

package iface

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The real-kernel test re-runs this test binary inside a network namespace it creates (`ip netns
// exec`), so that every thread, socket and iptables process of the scenario lives there and nothing
// can reach the namespace the test was started in.
const (
	childModeEnv = "NODECACHE_IFACE_NETNS_CHILD" // iptables mode; set only in the child
	parentNSEnv  = "NODECACHE_IFACE_PARENT_NETNS"
)

func netnsInode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestRealKernelInNetns(t *testing.T) {
	inNetns(t, "TestRealKernelInNetns", realKernelScenario)
}

// inNetns runs scenario once per iptables flavour, each in a child process (this test binary,
// -test.run=^name$) inside a network namespace of its own; name must be the calling test.
func inNetns(t *testing.T, name string, scenario func(t *testing.T, mode IPTablesMode)) {
	t.Helper()
	if mode := os.Getenv(childModeEnv); mode != "" {
		scenario(t, IPTablesMode(mode))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: creating a network namespace and running iptables needs root")
	}
	ipCmd, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("skipping: ip(8) not found")
	}
	for _, mode := range []IPTablesMode{ModeNFT, ModeLegacy} {
		t.Run(string(mode), func(t *testing.T) {
			for _, fam := range []Family{FamilyV4, FamilyV6} {
				if _, err := exec.LookPath(binary(fam, mode, "")); err != nil {
					t.Skipf("skipping: %s not installed", binary(fam, mode, ""))
				}
			}
			ns := fmt.Sprintf("nciface-%d-%s", os.Getpid(), mode)
			if out, err := exec.Command(ipCmd, "netns", "add", ns).CombinedOutput(); err != nil {
				t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command(ipCmd, "netns", "delete", ns).CombinedOutput(); err != nil {
					t.Errorf("ip netns delete %s: %v: %s", ns, err, out)
				}
			})
			cmd := exec.Command(ipCmd, "netns", "exec", ns, os.Args[0],
				"-test.run=^"+name+"$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), childModeEnv+"="+string(mode),
				fmt.Sprintf("%s=%d", parentNSEnv, netnsInode(t, "/proc/self/ns/net")))
			out, err := cmd.CombinedOutput()
			t.Logf("child in netns %s:\n%s", ns, out)
			if err != nil {
				t.Fatalf("child: got %v, want success", err)
			}
			if !strings.Contains(string(out), "--- PASS: "+name) {
				t.Fatal("child: got no PASS line, want the scenario to have run")
			}
		})
	}
}

// requireOwnNetns stops a child scenario that is not inside a namespace of its own.
func requireOwnNetns(t *testing.T) {
	t.Helper()
	self := netnsInode(t, "/proc/self/ns/net")
	if parent := os.Getenv(parentNSEnv); parent == "" || fmt.Sprint(self) == parent {
		t.Fatal("refusing to run: not inside a namespace of our own")
	}
}

// realKernelScenario runs in the child, inside the fresh namespace.
func realKernelScenario(t *testing.T, mode IPTablesMode) {
	requireOwnNetns(t)
	cfg := Config{
		LocalIPs: []netip.Addr{netip.MustParseAddr("169.254.20.10"), netip.MustParseAddr("10.96.0.10"),
			netip.MustParseAddr("fd00:20::10")},
		ExtraTCPPorts:  []uint16{9254},
		SetupInterface: true, SetupIPTables: true, IPTablesMode: mode,
	}
	logs := newLogCapture()
	ctx := context.Background()
	m := newReal(t, cfg, logs)
	if got := m.Status().Rules.Backend; got != string(mode) {
		t.Errorf("backend: got %s, want %s", got, mode)
	}
	start := time.Now()
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Logf("first Setup (create link, 3 addresses, 8 chains, 53 rules): %v", time.Since(start))
	want := assertRealState(t, mode, cfg, logs)

	start = time.Now()
	if err := m.Setup(ctx); err != nil {
		t.Fatalf("second Setup: %v", err)
	}
	t.Logf("steady-state Setup (inspect only): %v", time.Since(start))
	if got := ourSaveLines(t, mode); !slices.Equal(got, want) {
		t.Errorf("rules after second Setup:\n%s\nwant as after the first:\n%s", joinLines(got), joinLines(want))
	}
	if st, err := m.Check(ctx); err != nil || st.Counts.Readds != (KindCounts{}) {
		t.Errorf("Check after second Setup: got %v, readds %+v, want nil and none", err, st.Counts.Readds)
	}

	// A killed predecessor, plus an operator's meddling, before a new Manager adopts the state.
	dup := "-d 10.96.0.10/32 -p tcp -m tcp --dport 53 -m comment --comment nodecache -j ACCEPT"
	iptablesCmd(t, binary(FamilyV4, mode, ""), append([]string{"-t", "filter", "-A", "NODECACHE-INPUT"}, strings.Fields(dup)...)...)
	iptablesCmd(t, binary(FamilyV4, mode, ""), "-t", "raw", "-A", "PREROUTING", "-m", "comment", "--comment", "nodecache", "-j", "NODECACHE-PREROUTING")
	iptablesCmd(t, binary(FamilyV4, mode, ""), "-t", "filter", "-D", "INPUT", "1")
	iptablesCmd(t, binary(FamilyV6, mode, ""), "-t", "raw", "-F", "NODECACHE-OUTPUT")
	m2 := newReal(t, cfg, logs)
	if _, err := m2.Check(ctx); !errors.Is(err, ErrNotConverged) {
		t.Errorf("Check after meddling: got %v, want ErrNotConverged", err)
	}
	if err := m2.Setup(ctx); err != nil {
		t.Fatalf("Setup after restart: %v", err)
	}
	if got := ourSaveLines(t, mode); !slices.Equal(got, want) {
		t.Errorf("rules after restart:\n%s\nwant:\n%s", joinLines(got), joinLines(want))
	}

	readdAddressViaRun(t, m2, DefaultInterfaceName)

	if err := m2.Teardown(ctx); err != nil {
		t.Fatalf("Teardown: %v", err)
	}
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		out := iptablesCmd(t, binary(fam, mode, "-save"))
		if strings.Contains(out, "nodecache") || strings.Contains(out, "NODECACHE") {
			t.Errorf("%s after Teardown: got our rules or chains, want none:\n%s", binary(fam, mode, "-save"), out)
		}
	}
	if _, err := netlink.LinkByName(DefaultInterfaceName); err == nil {
		t.Error("link after Teardown: got present, want absent")
	}
	if _, err := m2.Check(ctx); !errors.Is(err, ErrNotConverged) {
		t.Errorf("Check after Teardown: got %v, want ErrNotConverged", err)
	}

	// auto picks the flavour that holds rules: here the one this scenario runs.
	iptablesCmd(t, binary(FamilyV4, mode, ""), "-t", "filter", "-A", "FORWARD", "-j", "ACCEPT")
	auto := cfg
	auto.IPTablesMode = ModeAuto
	if got := newReal(t, auto, logs).Status().Rules.Backend; got != string(mode) {
		t.Errorf("auto with rules only in %s: got %s, want %s", mode, got, mode)
	}
}

func newReal(t *testing.T, cfg Config, logs logCapture) *Manager {
	t.Helper()
	m, err := New(cfg, prometheus.NewRegistry(), slog.New(logs))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func iptablesCmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// ourSaveLines returns the rule lines of both families' -save output, in order, each prefixed with
// its family and table ("ipv4 raw -A ...").
func ourSaveLines(t *testing.T, mode IPTablesMode) []string {
	t.Helper()
	var out []string
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		table := ""
		for _, l := range strings.Split(iptablesCmd(t, binary(fam, mode, "-save")), "\n") {
			if name, ok := strings.CutPrefix(l, "*"); ok {
				table = name
			}
			if strings.HasPrefix(l, "-A ") {
				out = append(out, fam.String()+" "+table+" "+l)
			}
		}
	}
	return out
}

// readdAddressViaRun deletes an address by hand and measures how long Run takes to put it back.
func readdAddressViaRun(t *testing.T, m *Manager, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: got %v, want nil", err)
		}
	}()
	link, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	victim := desiredAddr(netip.MustParseAddr("169.254.20.10"))
	for range 100 { // let Run subscribe and finish its first pass (it re-adds either way)
		if m.Status().Counts.Reconciles > 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := netlink.AddrDel(link, victim); err != nil {
		t.Fatalf("deleting %s by hand: %v", victim.IPNet, err)
	}
	for time.Since(start) < time.Second {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			t.Fatalf("listing addresses: %v", err)
		}
		if slices.ContainsFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == victim.IPNet.String() }) {
			t.Logf("address %s re-added by Run %v after deletion", victim.IPNet, time.Since(start))
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Errorf("address %s: got still missing 1s after deletion, want it back within 1s", victim.IPNet)
}

// assertRealState checks the kernel against the contract and returns our rule lines.
func assertRealState(t *testing.T, mode IPTablesMode, cfg Config, logs logCapture) []string {
	t.Helper()
	link, err := netlink.LinkByName(DefaultInterfaceName)
	if err != nil {
		t.Fatalf("link: %v", err)
	}
	if kind := link.Type(); kind == "bridge" {
		if got := logs.count(slog.LevelWarn, "dummy"); got != 1 {
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
		want := desiredAddr(ip)
		i := slices.IndexFunc(addrs, func(a netlink.Addr) bool { return a.IPNet.String() == want.IPNet.String() })
		switch {
		case i < 0:
			t.Errorf("address %s: got missing, want present", want.IPNet)
		case ip.Is6() && addrs[i].Flags&unix.IFA_F_NODAD == 0:
			t.Errorf("address %s: got flags %#x, want NODAD", want.IPNet, addrs[i].Flags)
		}
	}
	lines := ourSaveLines(t, mode)
	counts := map[string]int{}
	for _, l := range lines {
		if strings.Contains(l, "--comment nodecache") {
			counts[strings.Fields(l)[0]]++
		}
	}
	// v4: 2 IPs x 3 (proto, port) x 5 rules + 4 jumps; v6: 1 x 3 x 5 + 4.
	if counts["ipv4"] != 34 || counts["ipv6"] != 19 {
		t.Errorf("rules with our comment: got %v, want ipv4:34 ipv6:19\n%s", counts, joinLines(lines))
	}
	for _, l := range lines {
		if strings.Count(joinLines(lines)+"\n", l+"\n") != 1 {
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
