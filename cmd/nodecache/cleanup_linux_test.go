//go:build linux

package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeNS is a network namespace standing in for a node.
type nodeNS struct {
	name string
	dir  string // sockets
}

func newNodeNS(t *testing.T) *nodeNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: a network namespace, a link and iptables rules need root")
	}
	for _, tool := range []string{"ip", "iptables-nft-save", "ip6tables-nft-save", "iptables-legacy", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not installed", tool)
		}
	}
	n := &nodeNS{name: fmt.Sprintf("ncclean-%d", os.Getpid()), dir: t.TempDir()}
	n.ip(t, "netns", "add", n.name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", n.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", n.name, err, out)
		}
	})
	n.ip(t, "-n", n.name, "link", "set", "lo", "up")
	return n
}

func (n *nodeNS) ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// exec runs name with args inside the namespace.
func (n *nodeNS) exec(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name, name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v: %s", name, args, n.name, err, out)
	}
	return string(out)
}

// flags are the interface and socket flags the agents and cleanup share.
func (n *nodeNS) flags() []string {
	return []string{"--local-ip", "169.254.20.10,fd00:20::10", "--iptables-mode", "nft",
		"--admin-socket", filepath.Join(n.dir, "admin.sock"), "--handover-socket", filepath.Join(n.dir, "handover.sock")}
}

// nodecache starts `nodecache args...` in the namespace as a process of its own.
func (n *nodeNS) nodecache(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", n.name, os.Args[0])
	cmd.Env = append(os.Environ(), dispatchEnv+"="+strings.Join(args, "\x1f"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &out
}

// startAgent starts an agent and waits until it serves its admin socket,
// which it opens after its interface and rules are set up.
func (n *nodeNS) startAgent(t *testing.T) *exec.Cmd {
	t.Helper()
	args := append([]string{"run", "--upstream", "127.0.0.1:5353", "--log-level", "warn",
		"--health-addr", "127.0.0.1:18080", "--metrics-addr", "127.0.0.1:19253"}, n.flags()...)
	cmd, out := n.nodecache(t, args...)
	deadline := time.Now().Add(15 * time.Second)
	for !dials(filepath.Join(n.dir, "admin.sock")) {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("agent did not set up within 15s: %+v\n%s", n.state(t), out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cmd
}

// dials reports whether something accepts connections on the unix socket
// path.
func dials(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// cleanup runs `nodecache cleanup` and returns its output and error.
func (n *nodeNS) cleanup(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	cmd, out := n.nodecache(t, append(append([]string{"cleanup"}, n.flags()...), extra...)...)
	err := cmd.Wait()
	return out.String(), err
}

// hostState is what nodecache has on the node: rule lines by flavour (both
// families), each line once or counted in dups, and the link.
type hostState struct {
	rules map[string]int
	dups  []string
	link  bool
	alias string
}

func (n *nodeNS) state(t *testing.T) hostState {
	t.Helper()
	st := hostState{rules: map[string]int{}}
	for _, mode := range []string{"nft", "legacy"} {
		seen := map[string]bool{}
		for _, bin := range []string{"iptables-" + mode + "-save", "ip6tables-" + mode + "-save"} {
			table := ""
			for _, l := range strings.Split(n.exec(t, bin), "\n") {
				if name, ok := strings.CutPrefix(l, "*"); ok {
					table = name
				}
				if !strings.Contains(l, "nodecache") && !strings.Contains(l, "NODECACHE") {
					continue
				}
				key := bin + " " + table + " " + l
				if seen[key] && strings.HasPrefix(l, "-A ") {
					st.dups = append(st.dups, key)
				}
				seen[key] = true
				st.rules[mode]++
			}
		}
	}
	out, err := exec.Command("ip", "-n", n.name, "-d", "link", "show", "nodelocaldns").CombinedOutput()
	st.link = err == nil
	if _, rest, ok := strings.Cut(string(out), "alias "); ok {
		st.alias = strings.Fields(rest)[0]
	}
	return st
}

func (st hostState) empty() bool { return st.rules["nft"] == 0 && st.rules["legacy"] == 0 && !st.link }

// TestCleanupAfterSIGKILL: an agent killed with SIGKILL leaves its link and
// rules; `nodecache cleanup` removes them, in both flavours and families,
// and is idempotent; an agent restarted after a SIGKILL without cleanup
// adopts the state without duplicating a rule; cleanup leaves a live agent
// and a link that is not nodecache's alone.
func TestCleanupAfterSIGKILL(t *testing.T) {
	n := newNodeNS(t)
	agent := n.startAgent(t)
	if err := agent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = agent.Wait()
	crashed := n.state(t)
	if !crashed.link || crashed.rules["nft"] == 0 || crashed.alias != "nodecache" {
		t.Fatalf("after SIGKILL: got %+v, want the link (alias nodecache) and the rules left behind", crashed)
	}
	// A predecessor that ran with the other flavour left its chains there too.
	for _, bin := range []string{"iptables-legacy", "ip6tables-legacy"} {
		n.exec(t, bin, "-t", "raw", "-N", "NODECACHE-OUTPUT")
		n.exec(t, bin, "-t", "raw", "-A", "OUTPUT", "-m", "comment", "--comment", "nodecache", "-j", "NODECACHE-OUTPUT")
	}
	for i := range 2 {
		out, err := n.cleanup(t)
		if err != nil {
			t.Fatalf("cleanup #%d: got %v, want success\n%s", i+1, err, out)
		}
		if st := n.state(t); !st.empty() {
			t.Fatalf("after cleanup #%d: got %+v, want no rules in either flavour and no link\n%s", i+1, st, out)
		}
	}

	first := n.startAgent(t)
	want := n.state(t)
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()
	second := n.startAgent(t)
	if got := n.state(t); got.rules["nft"] != want.rules["nft"] || len(got.dups) > 0 || got.rules["legacy"] != 0 {
		t.Errorf("restart after SIGKILL: got %d nft lines, duplicates %v, %d legacy lines; want %d, none, 0",
			got.rules["nft"], got.dups, got.rules["legacy"], want.rules["nft"])
	}

	out, err := n.cleanup(t)
	if err != nil || !strings.Contains(out, "an agent answers") {
		t.Errorf("cleanup next to a live agent: got %v\n%s\nwant success, saying it left the agent alone", err, out)
	}
	if got := n.state(t); got.rules["nft"] != want.rules["nft"] || !got.link {
		t.Errorf("after cleanup next to a live agent: got %+v, want its state untouched", got)
	}
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	if st := n.state(t); !st.empty() {
		t.Errorf("after SIGTERM: got %+v, want the agent's own teardown to leave nothing", st)
	}

	n.ip(t, "-n", n.name, "link", "add", "nodelocaldns", "type", "bridge")
	n.ip(t, "-n", n.name, "addr", "add", "10.244.0.1/24", "dev", "nodelocaldns")
	out, err = n.cleanup(t)
	if err == nil || !strings.Contains(out, "not created by nodecache") {
		t.Errorf("cleanup with a foreign link of that name: got %v\n%s\nwant a failure saying the link is not nodecache's", err, out)
	}
	if st := n.state(t); !st.link {
		t.Error("foreign link after cleanup: got deleted, want left alone")
	}
}
