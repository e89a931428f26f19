//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/iface"
)

// The TestIfaceLibrary tests drive pkg/iface as a library (iface.New and the
// Manager's methods) against the real kernel and real iptables. Each runs its
// scenario in a child process, this test binary re-run with `ip netns exec` in
// a network namespace made for it, so that every thread, socket and iptables
// process of the scenario lives there and nothing can reach the namespace the
// test was started in. The child needs no apiserver: TestMain runs it without
// the suite's set-up (see ifaceChildMode).
const (
	ifaceChildEnv    = "NODECACHE_E2E_IFACE_CHILD"        // iptables mode; set only in the child
	ifaceParentNSEnv = "NODECACHE_E2E_IFACE_PARENT_NETNS" // the parent's netns inode
	ifaceChildNSEnv  = "NODECACHE_E2E_IFACE_NETNS"        // the name of the netns made for the child
)

// ifaceChildMode returns the iptables flavour this process runs a library
// scenario for, and whether it is such a child at all.
func ifaceChildMode() (iface.IPTablesMode, bool) {
	m := os.Getenv(ifaceChildEnv)
	return iface.IPTablesMode(m), m != ""
}

// ifaceLibTools are the binaries both flavours' scenarios run.
var ifaceLibTools = []string{"ip", "iptables-nft", "ip6tables-nft", "iptables-legacy", "ip6tables-legacy",
	"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save",
	"iptables-nft-restore", "iptables-legacy-restore"}

// inOwnNetns runs scenario once per iptables flavour (nft, legacy), each in a
// child process (this test binary, -test.run=^name$) inside a network
// namespace of its own; name must be the calling test. In the child it runs
// the scenario itself.
func inOwnNetns(t *testing.T, name string, scenario func(t *testing.T, mode iface.IPTablesMode)) {
	t.Helper()
	inOwnNetnsVia(t, name, nil, scenario)
}

// inOwnNetnsVia is inOwnNetns with the child started through the command
// wrap (for instance setpriv with fewer capabilities) inside the namespace.
func inOwnNetnsVia(t *testing.T, name string, wrap []string, scenario func(t *testing.T, mode iface.IPTablesMode)) {
	t.Helper()
	if mode, child := ifaceChildMode(); child {
		requireOwnNetns(t)
		scenario(t, mode)
		return
	}
	requireSuite(t)
	for _, tool := range ifaceLibTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	for _, mode := range []iface.IPTablesMode{iface.ModeNFT, iface.ModeLegacy} {
		t.Run(string(mode), func(t *testing.T) {
			ns := newNetNS(t, "lib")
			args := append(append([]string{"netns", "exec", ns.Name}, wrap...), os.Args[0],
				"-test.run=^"+name+"$", "-test.v", "-test.count=1")
			cmd := exec.CommandContext(t.Context(), "ip", args...)
			cmd.Env = append(os.Environ(), ifaceChildEnv+"="+string(mode),
				fmt.Sprintf("%s=%d", ifaceParentNSEnv, netnsInode(t, "/proc/self/ns/net")),
				ifaceChildNSEnv+"="+ns.Name)
			out, err := cmd.CombinedOutput()
			t.Logf("child in netns %s:\n%s", ns.Name, out)
			if err != nil {
				t.Fatalf("child: got %v, want success", err)
			}
			if !strings.Contains(string(out), "--- PASS: "+name) {
				t.Fatal("child: got no PASS line, want the scenario to have run")
			}
		})
	}
}

func netnsInode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("netns inode: %v", err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// requireOwnNetns stops a child that is not inside the namespace its parent
// made for it (and so perhaps in the host's): its netns must be the one
// /run/netns/<name> holds, name must be one newNetNS gives, and it must not be
// the parent's.
func requireOwnNetns(t testing.TB) {
	t.Helper()
	self := netnsInode(t, "/proc/self/ns/net")
	name, parent := os.Getenv(ifaceChildNSEnv), os.Getenv(ifaceParentNSEnv)
	if !strings.HasPrefix(name, netnsPrefix) || strings.Contains(name, "/") || parent == "" || parent == fmt.Sprint(self) ||
		netnsInode(t, "/run/netns/"+name) != self {
		t.Fatalf("refusing to run: not inside a namespace of our own (netns inode %d, %s=%q, %s=%q)",
			self, ifaceChildNSEnv, name, ifaceParentNSEnv, parent)
	}
}

// newLibManager is iface.New with a fresh registry and logs into warns.
func newLibManager(t testing.TB, cfg iface.Config, warns *warnLog) *iface.Manager {
	t.Helper()
	m, err := iface.New(cfg, prometheus.NewRegistry(), slog.New(warns))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// warnLog is a slog.Handler that keeps the messages of warnings.
type warnLog struct {
	mu   sync.Mutex // guards following
	msgs []string
}

func (w *warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnLog) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnLog) WithGroup(string) slog.Handler                { return w }
func (w *warnLog) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Level == slog.LevelWarn {
		w.msgs = append(w.msgs, r.Message)
	}
	return nil
}

// count returns the warnings whose message contains substr.
func (w *warnLog) count(substr string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

// xtables names a flavoured iptables command: xtables("ip6tables", ModeNFT,
// "-save") is ip6tables-nft-save.
func xtables(family string, mode iface.IPTablesMode, suffix string) string {
	return family + "-" + string(mode) + suffix
}

// libFamilies are the iptables commands by the family name the rule lines
// of libSaveLines carry.
var libFamilies = []struct{ name, cmd string }{{"ipv4", "iptables"}, {"ipv6", "ip6tables"}}

// runTool runs a command in this process's namespace and returns its
// standard output.
func runTool(t testing.TB, name string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// libSaveLines returns the rule lines of both families' -save output in
// mode, in order, each prefixed with its family and table ("ipv4 raw -A ...").
func libSaveLines(t testing.TB, mode iface.IPTablesMode) []string {
	t.Helper()
	var out []string
	for _, fam := range libFamilies {
		table := ""
		for _, l := range strings.Split(runTool(t, xtables(fam.cmd, mode, "-save")), "\n") {
			if name, ok := strings.CutPrefix(l, "*"); ok {
				table = name
			}
			if strings.HasPrefix(l, "-A ") {
				out = append(out, fam.name+" "+table+" "+l)
			}
		}
	}
	return out
}

// chainRules returns the rules of one chain as `iptables -S` prints them,
// without the leading "-A <chain>", in order.
func chainRules(t testing.TB, ipt, table, chain string) []string {
	t.Helper()
	var rules []string
	for _, l := range strings.Split(runTool(t, ipt, "-w", "5", "-t", table, "-S", chain), "\n") {
		if rest, ok := strings.CutPrefix(l, "-A "+chain+" "); ok {
			rules = append(rules, rest)
		}
	}
	return rules
}

// hostPrefix is the address iface puts on its link for ip: a host prefix.
func hostPrefix(ip netip.Addr) string { return netip.PrefixFrom(ip, ip.BitLen()).String() }
