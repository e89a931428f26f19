//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanupForce: `nodecache cleanup` leaves everything in place while
// an agent's admin socket accepts connections, here an agent stopped with
// SIGSTOP as a hung one would be, and says so (exit 0); `cleanup --force`
// removes the link and every rule in raw and filter, IPv4 and IPv6, in
// both flavours, and warns that the agent puts them back while it runs,
// which it does once it resumes. --force does not make cleanup delete a
// link that is not nodecache's.
func TestCleanupForce(t *testing.T) {
	requireSuite(t)
	requireCleanupTools(t)
	for _, mode := range []string{"nft", "legacy"} {
		t.Run("agent in "+mode, func(t *testing.T) { testCleanupForce(t, mode) })
	}
	t.Run("foreign link", testCleanupForceForeignLink)
}

func testCleanupForce(t *testing.T, mode string) {
	n := newCleanupNode(t)
	n.mode = mode
	other := map[string]string{"nft": "legacy", "legacy": "nft"}[mode]
	agent := n.start(t, "--sync-interval=2s")
	// A predecessor that ran with the other flavour left its chains there.
	addLeftoverChains(t, n.node, other)
	before := n.state(t)
	checkCleanupState(t, "agent running", before, mode, other)

	suspend(t, agent)
	refused := "an agent answers on " + n.adminSocket() + ": leaving its interface and rules (stop it first, or give --force)\n"
	for _, flags := range [][]string{nil, {"--force=false"}} {
		out, logs, err := n.cleanup(t, flags...)
		if code := exitStatus(err); code != 0 || out != refused {
			t.Errorf("cleanup %v next to a stopped agent: got exit %d (%v)\n%s%s\nwant exit 0 and\n%s", flags, code, err, out, logs, refused)
		}
		if got := n.state(t); !sameHostState(got, before) {
			t.Fatalf("after cleanup %v next to a stopped agent: got %+v, want it untouched: %+v", flags, got, before)
		}
	}

	out, logs, err := n.cleanup(t, "--force")
	want := []string{
		"an agent answers on " + n.adminSocket() + ": removing its interface and rules anyway (--force); it puts them back while it runs",
		"removed nodecache's rules and link nodelocaldns (or found none)",
	}
	if code := exitStatus(err); code != 0 || out != strings.Join(want, "\n")+"\n" {
		t.Errorf("cleanup --force: got exit %d (%v)\n%s%s\nwant exit 0 and\n%s", code, err, out, logs, strings.Join(want, "\n"))
	}
	if st := n.state(t); !st.empty() || len(st.appends) > 0 {
		t.Fatalf("after cleanup --force: got %+v, want no rule in either flavour or family and no link", st)
	}

	resume(t, agent)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = poll(ctx, 200*time.Millisecond, agent.proc, func(context.Context) error {
		st := n.state(t)
		if !st.link || st.alias != "nodecache" || !slices.Contains(st.addrs, linkLocalIP+"/32") || !slices.Contains(st.addrs, localIPv6+"/128") {
			return fmt.Errorf("link: got present=%v alias %q addresses %v", st.link, st.alias, st.addrs)
		}
		for _, fam := range []string{"iptables-", "ip6tables-"} {
			for _, table := range []string{"raw", "filter"} {
				k := fam + mode + "-save " + table
				if !slices.Equal(st.appends[k], before.appends[k]) {
					return fmt.Errorf("%s: got\n%s\nwant\n%s", k, strings.Join(st.appends[k], "\n"), strings.Join(before.appends[k], "\n"))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("agent resumed after cleanup --force: %v; want its link and rules back as before", err)
	}
	for _, ip := range []string{linkLocalIP, localIPv6} {
		if a := mustQuery(t, n.node, query{Server: ip, Name: "www.example.com"}); a.Rcode != "NOERROR" || len(a.Answer) == 0 {
			t.Errorf("query to %s after the agent put its state back: got\n%s\nwant NOERROR with an answer", ip, a.Raw)
		}
	}
	agent.stop(t)
	if st := n.state(t); !st.empty() {
		t.Errorf("after SIGTERM: got %+v, want the agent's own teardown to leave nothing", st)
	}
}

// testCleanupForceForeignLink: with --force, cleanup still removes
// nodecache's rules but not a link of that name it did not create.
func testCleanupForceForeignLink(t *testing.T) {
	n := newCleanupNode(t)
	mustIP(t, "-n", n.node.Name, "link", "add", "nodelocaldns", "type", "bridge")
	mustIP(t, "-n", n.node.Name, "addr", "add", "10.244.0.1/24", "dev", "nodelocaldns")
	addLeftoverChains(t, n.node, "nft")
	if st := n.state(t); !st.link || len(st.appends) != 4 {
		t.Fatalf("before cleanup: got %+v, want the foreign link and nodecache's nft chains in raw and filter, both families", st)
	}
	_, out, err := n.cleanup(t, "--force")
	if code := exitStatus(err); code != 1 || !strings.Contains(out, "link nodelocaldns (kind bridge, alias \"\") was not created by nodecache") {
		t.Errorf("cleanup --force with a foreign link of that name: got exit %d (%v)\n%s\nwant exit 1, saying the link is not nodecache's", code, err, out)
	}
	st := n.state(t)
	if !st.link || !slices.Contains(st.addrs, "10.244.0.1/24") {
		t.Errorf("foreign link after cleanup --force: got present=%v addresses %v, want it left as it was", st.link, st.addrs)
	}
	if st.rules["nft"] != 0 || st.rules["legacy"] != 0 {
		t.Errorf("rules after cleanup --force with a foreign link: got %v, want nodecache's removed all the same", st.appends)
	}
}

// agentChains are nodecache's chains by table, each with the built-in chain
// that jumps to it, and the target of the rules in that table.
var agentChains = []struct{ table, parent, chain, target string }{
	{"raw", "PREROUTING", "NODECACHE-PREROUTING", "NOTRACK"},
	{"raw", "OUTPUT", "NODECACHE-OUTPUT", "NOTRACK"},
	{"filter", "INPUT", "NODECACHE-INPUT", "ACCEPT"},
	{"filter", "OUTPUT", "NODECACHE-OUTPUT", "ACCEPT"},
}

// jumpLine is the -A line of the jump into chain, as iptables-save prints it.
func jumpLine(parent, chain string) string {
	return "-A " + parent + " -m comment --comment nodecache -j " + chain
}

// addLeftoverChains makes every chain of agentChains in one flavour, both
// families, with its jump and one rule for the local IP, as a predecessor
// of that flavour leaves them.
func addLeftoverChains(t testing.TB, node *netNS, flavour string) {
	t.Helper()
	for bin, ip := range map[string]string{"iptables-": linkLocalIP, "ip6tables-": localIPv6} {
		bin += flavour
		for _, c := range agentChains {
			nsCommand(t, node, bin, "-w", "-t", c.table, "-N", c.chain)
			nsCommand(t, node, bin, "-w", "-t", c.table, "-A", c.chain, "-d", ip, "-p", "udp", "-m", "udp", "--dport", "53",
				"-m", "comment", "--comment", "nodecache", "-j", c.target)
			nsCommand(t, node, bin, "-w", "-t", c.table, "-A", c.parent, "-m", "comment", "--comment", "nodecache", "-j", c.chain)
		}
	}
}

// checkCleanupState fails t unless st has the agent's link with both local
// IPs, and in each flavour, family and table every jump of agentChains and
// a rule of its target for that family's local IP in each chain.
func checkCleanupState(t testing.TB, when string, st hostState, flavours ...string) {
	t.Helper()
	if !st.link || st.alias != "nodecache" || !slices.Contains(st.addrs, linkLocalIP+"/32") || !slices.Contains(st.addrs, localIPv6+"/128") {
		t.Fatalf("%s: got link present=%v alias %q addresses %v, want alias nodecache with %s and %s", when, st.link, st.alias, st.addrs, linkLocalIP, localIPv6)
	}
	if len(st.dups) > 0 {
		t.Fatalf("%s: got duplicate rules %v, want none", when, st.dups)
	}
	for _, fl := range flavours {
		for fam, ip := range map[string]string{"iptables-": linkLocalIP, "ip6tables-": localIPv6} {
			for _, c := range agentChains {
				k := fam + fl + "-save " + c.table
				lines := st.appends[k]
				ok := slices.ContainsFunc(lines, func(l string) bool {
					return strings.HasPrefix(l, "-A "+c.chain+" ") && strings.Contains(l, ip) && strings.HasSuffix(l, "-j "+c.target)
				})
				if !slices.Contains(lines, jumpLine(c.parent, c.chain)) || !ok {
					t.Fatalf("%s: %s has\n%s\nwant %q and a %s rule for %s in %s", when, k, strings.Join(lines, "\n"), jumpLine(c.parent, c.chain), c.target, ip, c.chain)
				}
			}
		}
	}
}

// sameHostState reports whether a and b hold the same link, addresses and
// rule lines.
func sameHostState(a, b hostState) bool {
	return a.link == b.link && a.alias == b.alias && slices.Equal(a.addrs, b.addrs) && slices.Equal(a.dups, b.dups) &&
		maps.EqualFunc(a.appends, b.appends, slices.Equal)
}

// suspend stops the agent with SIGSTOP, its supervisor and its serving
// process both, and waits until the kernel reports them stopped: their
// sockets still accept connections, as a hung agent's do. resume (or the
// test's end) continues them.
func suspend(t testing.TB, a *runningAgent) {
	t.Helper()
	pids := a.pids(t)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stopping the agent's process %d: %v", pid, err)
		}
	}
	t.Cleanup(func() { signalAll(pids, syscall.SIGCONT) }) // before startAgent's SIGTERM
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := poll(ctx, 10*time.Millisecond, a.proc, func(context.Context) error {
		for _, pid := range pids {
			if st := procState(pid); st != "T" {
				return fmt.Errorf("agent process %d state %q, want T", pid, st)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for the agent to stop: %v", err)
	}
}

// resume continues an agent stopped by suspend.
func resume(t testing.TB, a *runningAgent) {
	t.Helper()
	signalAll(a.pids(t), syscall.SIGCONT)
}
