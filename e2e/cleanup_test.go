//go:build e2e

package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cleanupTools are the binaries the cleanup tests run in the node.
var cleanupTools = []string{"ip", "iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save",
	"iptables-legacy", "ip6tables-legacy", "iptables-nft", "ip6tables-nft"}

// requireCleanupTools fails t unless every one of cleanupTools is on PATH.
func requireCleanupTools(t testing.TB) {
	t.Helper()
	for _, tool := range cleanupTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
}

// TestCleanupAfterSIGKILL: an agent killed with SIGKILL leaves its link and
// rules; `nodecache cleanup` removes them, in both flavours and families,
// and is idempotent; an agent restarted after a SIGKILL without cleanup
// adopts the state without duplicating a rule; cleanup leaves a live agent
// and a link that is not nodecache's alone.
func TestCleanupAfterSIGKILL(t *testing.T) {
	requireSuite(t)
	requireCleanupTools(t)
	n := newCleanupNode(t)
	agent := n.start(t)
	agent.kill(t)
	crashed := n.state(t)
	if !crashed.link || crashed.rules["nft"] == 0 || crashed.alias != "nodecache" {
		t.Fatalf("after SIGKILL: got %+v, want the link (alias nodecache) and the rules left behind", crashed)
	}
	// A predecessor that ran with the other flavour left its chains there too.
	for _, bin := range []string{"iptables-legacy", "ip6tables-legacy"} {
		nsCommand(t, n.node, bin, "-w", "-t", "raw", "-N", "NODECACHE-OUTPUT")
		nsCommand(t, n.node, bin, "-w", "-t", "raw", "-A", "OUTPUT", "-m", "comment", "--comment", "nodecache", "-j", "NODECACHE-OUTPUT")
	}
	for i := range 2 {
		out, logs, err := n.cleanup(t)
		out += logs
		if err != nil {
			t.Fatalf("cleanup #%d: got %v, want success\n%s", i+1, err, out)
		}
		if st := n.state(t); !st.empty() {
			t.Fatalf("after cleanup #%d: got %+v, want no rules in either flavour and no link\n%s", i+1, st, out)
		}
	}

	first := n.start(t)
	want := n.state(t)
	first.kill(t)
	second := n.start(t)
	if got := n.state(t); got.rules["nft"] != want.rules["nft"] || len(got.dups) > 0 || got.rules["legacy"] != 0 {
		t.Errorf("restart after SIGKILL: got %d nft lines, duplicates %v, %d legacy lines; want %d, none, 0",
			got.rules["nft"], got.dups, got.rules["legacy"], want.rules["nft"])
	}

	out, _, err := n.cleanup(t)
	if err != nil || !strings.Contains(out, "an agent answers") {
		t.Errorf("cleanup next to a live agent: got %v\n%s\nwant success, saying it left the agent alone", err, out)
	}
	if got := n.state(t); got.rules["nft"] != want.rules["nft"] || !got.link {
		t.Errorf("after cleanup next to a live agent: got %+v, want its state untouched", got)
	}
	second.stop(t)
	if st := n.state(t); !st.empty() {
		t.Errorf("after SIGTERM: got %+v, want the agent's own teardown to leave nothing", st)
	}

	mustIP(t, "-n", n.node.Name, "link", "add", "nodelocaldns", "type", "bridge")
	mustIP(t, "-n", n.node.Name, "addr", "add", "10.244.0.1/24", "dev", "nodelocaldns")
	_, out, err = n.cleanup(t)
	if err == nil || !strings.Contains(out, "not created by nodecache") {
		t.Errorf("cleanup with a foreign link of that name: got %v\n%s\nwant a failure saying the link is not nodecache's", err, out)
	}
	if st := n.state(t); !st.link {
		t.Error("foreign link after cleanup: got deleted, want left alone")
	}
}

// cleanupNode is a node netns whose agents (one at a time) and `nodecache
// cleanup` runs share the local IPs, the iptables flavour and the admin and
// handover sockets.
type cleanupNode struct {
	node    *netNS
	up      *dnsUpstream
	sockDir string
	mode    string // --iptables-mode of the agents: nft or legacy
}

func newCleanupNode(t testing.TB) *cleanupNode {
	t.Helper()
	node := newNetNS(t, "clean")
	// Unix socket paths are short: not t.TempDir().
	dir, err := os.MkdirTemp("", "nc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return &cleanupNode{node: node, up: startUpstream(t, node, "127.0.0.1"), sockDir: dir, mode: "nft"}
}

func (n *cleanupNode) adminSocket() string { return filepath.Join(n.sockDir, "admin.sock") }

// flags are the flags the agents and cleanup share; the agents get them
// after startAgent's own, so these win.
func (n *cleanupNode) flags() []string {
	return []string{"--local-ip=" + linkLocalIP + "," + localIPv6, "--iptables-mode=" + n.mode, "--interface-name=nodelocaldns",
		"--admin-socket=" + n.adminSocket(), "--handover-socket=" + filepath.Join(n.sockDir, "handover.sock")}
}

// start starts an agent with extra flags and waits until it serves its
// admin socket, which it opens after its link and rules are set up
// (readiness alone does not imply the rules).
func (n *cleanupNode) start(t testing.TB, extra ...string) *runningAgent {
	t.Helper()
	a := startAgent(t, n.node, n.up, agentOpts{Flags: append(n.flags(), extra...)})
	err := poll(t.Context(), 50*time.Millisecond, a.proc, func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", n.adminSocket())
		if err != nil {
			return err
		}
		return c.Close()
	})
	if err != nil {
		t.Fatalf("waiting for the agent's admin socket: %v\nstate: %+v", err, n.state(t))
	}
	return a
}

// cleanup runs `nodecache cleanup` with extra flags in the node and returns
// its standard output (its report), its standard error (its log and the
// error it exits with) and its exit error.
func (n *cleanupNode) cleanup(t testing.TB, extra ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := agentBuild()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"netns", "exec", n.node.Name, bin, "cleanup"}, n.flags()...), extra...)
	var o, e strings.Builder
	cmd := exec.CommandContext(t.Context(), "ip", args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// hostState is what nodecache has on the node: rule lines by flavour (both
// families), each line once or counted in dups, and the link.
type hostState struct {
	rules map[string]int
	dups  []string
	link  bool
	alias string
	// appends are the -A lines by "<save binary> <table>", e.g.
	// "ip6tables-nft-save raw".
	appends map[string][]string
	addrs   []string // the link's addresses (CIDRs), as ip(8) lists them
}

func (n *cleanupNode) state(t testing.TB) hostState {
	t.Helper()
	st := hostState{rules: map[string]int{}, appends: map[string][]string{}}
	for _, mode := range []string{"nft", "legacy"} {
		seen := map[string]bool{}
		for _, bin := range []string{"iptables-" + mode + "-save", "ip6tables-" + mode + "-save"} {
			table := ""
			for _, l := range strings.Split(nsCommand(t, n.node, bin), "\n") {
				if name, ok := strings.CutPrefix(l, "*"); ok {
					table = name
				}
				if !strings.Contains(l, "nodecache") && !strings.Contains(l, "NODECACHE") {
					continue
				}
				key := bin + " " + table + " " + l
				if strings.HasPrefix(l, "-A ") {
					st.appends[bin+" "+table] = append(st.appends[bin+" "+table], l)
					if seen[key] {
						st.dups = append(st.dups, key)
					}
				}
				seen[key] = true
				st.rules[mode]++
			}
		}
	}
	out, err := ipCmd("-n", n.node.Name, "-d", "link", "show", "nodelocaldns")
	st.link = err == nil
	if _, rest, ok := strings.Cut(out, "alias "); ok {
		st.alias = strings.Fields(rest)[0]
	}
	if st.link {
		for _, l := range strings.Split(mustIP(t, "-n", n.node.Name, "-o", "addr", "show", "dev", "nodelocaldns"), "\n") {
			if f := strings.Fields(l); len(f) > 3 {
				st.addrs = append(st.addrs, f[3]) // "2: nodelocaldns inet 169.254.20.10/32 ..."
			}
		}
	}
	return st
}

func (st hostState) empty() bool { return st.rules["nft"] == 0 && st.rules["legacy"] == 0 && !st.link }
