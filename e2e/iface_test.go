//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// localIPv6 is the agent's second local IP in the dual-stack tests.
const localIPv6 = "fd00:ca::10"

// ifaceRulesPerFamily is what the agent keeps per family with one local IP
// and no extra ports: 4 jumps, NOTRACK udp+tcp in raw PREROUTING, both
// directions of raw OUTPUT, ACCEPT udp+tcp in filter INPUT and OUTPUT.
const ifaceRulesPerFamily = 14

// ifaceJumps are the built-in chains the agent jumps from, by table.
var ifaceJumps = map[string][]string{"raw": {"PREROUTING", "OUTPUT"}, "filter": {"INPUT", "OUTPUT"}}

// TestIfaceBackends runs a dual-stack agent with each iptables back end set
// explicitly and checks, in a fresh node netns each: answers over UDP and
// TCP on both local IPs, no conntrack entries for that traffic, the rules in
// that back end only and exactly once, repairs of a rule, a jump and an
// address deleted by hand (times logged), adoption after SIGKILL, and a
// teardown on SIGTERM that leaves nothing behind.
func TestIfaceBackends(t *testing.T) {
	requireSuite(t)
	for _, tool := range []string{"conntrack", "kdig", "iptables-nft", "iptables-legacy", "ip6tables-nft", "ip6tables-legacy",
		"iptables-nft-save", "iptables-legacy-save", "ip6tables-nft-save", "ip6tables-legacy-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed: %v", tool, err)
		}
	}
	for _, c := range []struct{ mode, other string }{{"nft", "legacy"}, {"legacy", "nft"}} {
		t.Run(c.mode, func(t *testing.T) { testIfaceBackend(t, c.mode, c.other) })
	}
}

func testIfaceBackend(t *testing.T, mode, other string) {
	node := newNetNS(t, "node")
	p := addPod(t, node, linkLocalIP)
	gw6 := addPodV6(t, node, p, localIPv6)
	up := startUpstream(t, node, "127.0.0.1")
	r := &agentRig{node: node, pod: p, up: up}
	r.agent = startAgent(t, node, up, agentOpts{ExtraLocalIPs: []string{localIPv6},
		Flags: []string{"--iptables-mode=" + mode, "--sync-interval=1s"}})
	fqdn, ips := webService(t, r, newNamespace(t, "iface"))

	eventually(t, "the nodecache rules in "+mode, func() error { return ifaceRuleProblems(t, node, mode) })
	checkBackendClean(t, node, other, "after setup")
	for _, ip := range []string{linkLocalIP + "/32", localIPv6 + "/128"} {
		if out := mustIP(t, "-n", node.Name, "addr", "show", "dev", "nodelocaldns"); !strings.Contains(out, ip) {
			t.Errorf("link nodelocaldns: got\n%s\nwant %s on it", out, ip)
		}
	}
	// The bridge fallback must not do multicast snooping: the kernel would
	// join a multicast router group and send IGMP reports from our IPs.
	if out := mustIP(t, "-d", "-n", node.Name, "link", "show", "dev", "nodelocaldns"); strings.Contains(out, "bridge ") &&
		!strings.Contains(out, "mcast_snooping 0") {
		t.Errorf("bridge nodelocaldns: got\n%s\nwant mcast_snooping 0", out)
	}
	checkDualStackAnswers(t, r, fqdn, ips)
	checkNoConntrack(t, r, mode, gw6, fqdn)

	checkRuleRepairs(t, r.agent, mode)
	checkAddrRepairs(t, r.agent)
	checkBackendClean(t, node, other, "after the repairs")
	checkDualStackAnswers(t, r, fqdn, ips)

	r.agent.kill(t)
	checkBackendClean(t, node, other, "after SIGKILL")
	next := r.agent.successor(t)
	next.waitHTTP(t, "/readyz")
	awaitReconciles(t, next, 2)
	if err := ifaceRuleProblems(t, node, mode); err != nil {
		t.Errorf("rules after SIGKILL and restart: %v", err)
	}
	checkBackendClean(t, node, other, "after the restart")
	for _, q := range []query{{Server: linkLocalIP, Name: fqdn}, {Server: localIPv6, Name: "www.example.com.", Type: "AAAA", TCP: true}} {
		if a := r.ask(t, q); a.Rcode != "NOERROR" || len(a.Answer) == 0 {
			t.Errorf("%s %s @%s after the restart: got %v, want an answer", q.Name, q.Type, q.Server, a)
		}
	}

	next.stop(t)
	checkTornDown(t, node, mode)
	checkBackendClean(t, node, other, "after SIGTERM")
}

// addPodV6 gives p's veth pair IPv6 addresses, as a dual-stack CNI would,
// and a /128 route to localIP via the node side; it returns that node-side
// address. Addresses skip DAD so they work at once.
func addPodV6(t testing.TB, node *netNS, p *pod, localIP string) string {
	t.Helper()
	var k int
	if _, err := fmt.Sscanf(p.Gateway, "10.200.%d.1", &k); err != nil {
		t.Fatalf("pod gateway %q: %v", p.Gateway, err)
	}
	gw, podIP := fmt.Sprintf("fd00:200:%d::1", k), fmt.Sprintf("fd00:200:%d::2", k)
	mustIP(t, "-n", node.Name, "addr", "add", gw+"/64", "dev", fmt.Sprintf("veth%d", k), "nodad")
	mustIP(t, "-n", p.NS.Name, "addr", "add", podIP+"/64", "dev", "eth0", "nodad")
	mustIP(t, "-n", p.NS.Name, "-6", "route", "add", localIP+"/128", "via", gw, "dev", "eth0")
	return gw
}

// checkDualStackAnswers asks both local IPs from the pod with dig and kdig
// over UDP and TCP for a cluster name and an external name: A over v4, AAAA
// over v6.
func checkDualStackAnswers(t testing.TB, r *agentRig, fqdn string, clusterIPs []string) {
	t.Helper()
	want := map[string]string{"www.example.com.": "2001:db8::10"}
	wantA := map[string]string{"www.example.com.": "192.0.2.10"}
	for _, ip := range clusterIPs {
		if netip.MustParseAddr(ip).Is4() {
			wantA[fqdn] = ip
		} else {
			want[fqdn] = ip
		}
	}
	servers := []struct {
		addr, qtype string
		want        map[string]string
	}{{linkLocalIP, "A", wantA}, {localIPv6, "AAAA", want}}
	for _, s := range servers {
		for _, tool := range []string{"dig", "kdig"} {
			for _, tcp := range []bool{false, true} {
				for _, name := range []string{fqdn, "www.example.com."} {
					q := query{Tool: tool, Server: s.addr, Name: name, Type: s.qtype, TCP: tcp}
					if a := r.ask(t, q); !hasData(dnsType(t, s.qtype), s.want[name])(a) {
						t.Errorf("%s @%s %s %s tcp=%v: got %v, want NOERROR %s", tool, s.addr, name, s.qtype, tcp, a, s.want[name])
					}
				}
			}
		}
	}
}

// checkNoConntrack makes the node netns track connections (a conntrack
// match in the chosen back end, for v4 and v6), sends DNS over UDP and TCP
// to both local IPs and, as the control, to the node side of the veth, and
// wants conntrack entries for the controls only.
func checkNoConntrack(t testing.TB, r *agentRig, mode, gw6, fqdn string) {
	t.Helper()
	for _, fam := range []string{"iptables", "ip6tables"} {
		nsCommand(t, r.node, fam+"-"+mode, "-w", "5", "-A", "INPUT", "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	}
	for _, f := range []string{"ipv4", "ipv6"} {
		nsCommand(t, r.node, "conntrack", "-F", "-f", f)
	}
	for _, server := range []string{linkLocalIP, localIPv6} {
		for _, tcp := range []bool{false, true} {
			for _, name := range []string{fqdn, "www.example.com."} {
				if a := r.ask(t, query{Server: server, Name: name, TCP: tcp}); a.Rcode != "NOERROR" {
					t.Fatalf("%s @%s tcp=%v: got %v, want NOERROR", name, server, tcp, a)
				}
			}
		}
	}
	// Nothing answers on the gateways; the entries are there all the same.
	for _, gw := range []string{r.pod.Gateway, gw6} {
		_, _ = runQuery(t.Context(), r.pod.NS, query{Server: gw, Name: "control."})
	}
	for _, c := range []struct{ family, local, control string }{{"ipv4", linkLocalIP, r.pod.Gateway}, {"ipv6", localIPv6, gw6}} {
		tracked := nsCommand(t, r.node, "conntrack", "-L", "-f", c.family)
		if dnsFlows(tracked, c.local) != 0 {
			t.Errorf("conntrack %s in the node: got DNS entries for %s, want none\n%s", c.family, c.local, tracked)
		}
		if dnsFlows(tracked, c.control) == 0 {
			t.Errorf("conntrack %s in the node: got no entry for the control query to %s, want one (is conntrack active?)\n%s", c.family, c.control, tracked)
		}
		if strings.Contains(tracked, "src="+c.local+" ") {
			// Nothing else leaves the local IPs either: the bridge fallback
			// is created without multicast snooping, so no IGMP reports.
			t.Errorf("conntrack %s in the node: got flows from %s, want none\n%s", c.family, c.local, tracked)
		}
	}
}

// dnsFlows counts the udp and tcp entries of `conntrack -L` output to or
// from ip port 53.
func dnsFlows(conntrackL, ip string) int {
	n := 0
	for _, line := range strings.Split(conntrackL, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "udp" && f[0] != "tcp") {
			continue
		}
		if (strings.Contains(line, "dst="+ip+" ") && strings.Contains(line, "dport=53 ")) ||
			(strings.Contains(line, "src="+ip+" ") && strings.Contains(line, "sport=53 ")) {
			n++
		}
	}
	return n
}

// checkRuleRepairs deletes a rule of a nodecache chain and a jump to one,
// for v4 and v6, and waits for the agent to put each back; it logs how long
// that took and wants the readds metric to count it.
func checkRuleRepairs(t testing.TB, a *runningAgent, mode string) {
	t.Helper()
	cases := []struct{ name, kind, family, chain string }{
		{"v4 rule in raw NODECACHE-PREROUTING", "rule", "iptables", "NODECACHE-PREROUTING"},
		{"v4 jump raw PREROUTING", "jump", "iptables", "PREROUTING"},
		{"v6 rule in raw NODECACHE-PREROUTING", "rule", "ip6tables", "NODECACHE-PREROUTING"},
		{"v6 jump raw PREROUTING", "jump", "ip6tables", "PREROUTING"},
	}
	for _, c := range cases {
		metric := `nodecache_iface_readds_total{kind="` + c.kind + `"}`
		before := metricSum(t, a.metrics(t), metric)
		// The jump is at position 1, so deleting rule 1 of the built-in
		// chain deletes it (ifaceRuleProblems checked the position).
		nsCommand(t, a.Node, c.family+"-"+mode, "-w", "5", "-t", "raw", "-D", c.chain, "1")
		start := time.Now()
		eventually(t, c.name+" put back", func() error { return ifaceRuleProblems(t, a.Node, mode) })
		t.Logf("%s deleted by hand (%s, --sync-interval 1s): back after %v", c.name, mode, time.Since(start).Round(time.Millisecond))
		if after := metricSum(t, a.metrics(t), metric); after <= before {
			t.Errorf("%s: got %v, want more than %v after a %s was put back", metric, after, before, c.kind)
		}
	}
}

// checkAddrRepairs deletes each local IP from the link and waits (polling
// as fast as ip(8) runs, at most 5s) for the agent to put it back; the time
// is logged.
func checkAddrRepairs(t testing.TB, a *runningAgent) {
	t.Helper()
	metric := `nodecache_iface_readds_total{kind="address"}`
	for _, prefix := range []string{linkLocalIP + "/32", localIPv6 + "/128"} {
		before := metricSum(t, a.metrics(t), metric)
		mustIP(t, "-n", a.Node.Name, "addr", "del", prefix, "dev", "nodelocaldns")
		start := time.Now()
		var out string
		for {
			out = mustIP(t, "-n", a.Node.Name, "addr", "show", "dev", "nodelocaldns")
			if strings.Contains(out, prefix) {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("address %s deleted by hand: still missing after 5s\n%s", prefix, out)
			}
		}
		t.Logf("address %s deleted by hand: back after %v (sync interval 1s; netlink event)", prefix, time.Since(start).Round(time.Microsecond))
		eventually(t, metric+" to count the address", func() error {
			if after := metricSum(t, a.metrics(t), metric); after <= before {
				return fmt.Errorf("got %v, want more than %v", after, before)
			}
			return nil
		})
	}
}

// ifaceFamilies are the iptables families and the local IP of each.
var ifaceFamilies = []struct{ cmd, ip string }{{"iptables", linkLocalIP}, {"ip6tables", localIPv6}}

// nodecacheLines returns the lines of one family's table in backend that
// are nodecache's: chain declarations and rules naming NODECACHE- or
// carrying the comment.
func nodecacheLines(t testing.TB, node *netNS, family, backend, table string) (save string, lines []string) {
	t.Helper()
	save = nsCommand(t, node, family+"-"+backend+"-save", "-t", table)
	for _, line := range strings.Split(save, "\n") {
		if strings.Contains(line, "NODECACHE-") || strings.Contains(line, "nodecache") {
			lines = append(lines, line)
		}
	}
	return save, lines
}

// ifaceRuleProblems checks the rules of backend in node: per family, each
// nodecache rule once, 14 in all, each with the comment, every rule of a
// NODECACHE chain naming the family's local IP, and each jump exactly once
// and first in its built-in chain.
func ifaceRuleProblems(t testing.TB, node *netNS, backend string) error {
	t.Helper()
	var errs []error
	for _, fam := range ifaceFamilies {
		var rules []string
		for _, table := range []string{"raw", "filter"} {
			save, lines := nodecacheLines(t, node, fam.cmd, backend, table)
			for _, line := range lines {
				if !strings.HasPrefix(line, "-A ") {
					continue
				}
				rules = append(rules, table+" "+line)
				if !strings.Contains(line, "--comment nodecache") {
					errs = append(errs, fmt.Errorf("%s %s: got %q, want the nodecache comment", fam.cmd, table, line))
				}
				if strings.HasPrefix(line, "-A NODECACHE-") && !strings.Contains(line, fam.ip) {
					errs = append(errs, fmt.Errorf("%s %s: got %q, want it to name %s", fam.cmd, table, line, fam.ip))
				}
			}
			for _, chain := range ifaceJumps[table] {
				if err := jumpFirstOnce(save, chain); err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w", fam.cmd, table, err))
				}
			}
		}
		seen := map[string]int{}
		for _, r := range rules {
			seen[r]++
		}
		for r, n := range seen {
			if n != 1 {
				errs = append(errs, fmt.Errorf("%s rule %q: got %d copies, want 1", fam.cmd, r, n))
			}
		}
		if len(rules) != ifaceRulesPerFamily {
			errs = append(errs, fmt.Errorf("%s-%s: got %d nodecache rules, want %d\n%s", fam.cmd, backend,
				len(rules), ifaceRulesPerFamily, strings.Join(rules, "\n")))
		}
	}
	return errors.Join(errs...)
}

// jumpFirstOnce wants the built-in chain of an iptables-save table to jump
// to NODECACHE-chain exactly once, with its first rule.
func jumpFirstOnce(save, chain string) error {
	var rules []string
	for _, line := range strings.Split(save, "\n") {
		if strings.HasPrefix(line, "-A "+chain+" ") {
			rules = append(rules, line)
		}
	}
	jump := "-j NODECACHE-" + chain
	n := 0
	for _, r := range rules {
		if strings.HasSuffix(r, jump) || strings.Contains(r, jump+" ") {
			n++
		}
	}
	if n != 1 || !strings.Contains(rules[0], jump) { // n == 1: rules is not empty
		return fmt.Errorf("chain %s: got rules %q, want the jump to NODECACHE-%s once and first", chain, rules, chain)
	}
	return nil
}

// checkBackendClean wants no nodecache chain, jump or rule in backend, v4
// or v6: the back end not chosen at any time, the chosen one after exit.
func checkBackendClean(t testing.TB, node *netNS, backend, when string) {
	t.Helper()
	for _, fam := range ifaceFamilies {
		for _, table := range []string{"raw", "filter"} {
			if _, lines := nodecacheLines(t, node, fam.cmd, backend, table); len(lines) > 0 {
				t.Errorf("%s-%s -t %s %s: got\n%s\nwant no nodecache chain, jump or rule",
					fam.cmd, backend, table, when, strings.Join(lines, "\n"))
			}
		}
	}
}

// awaitReconciles waits until the agent has done n successful re-checks of
// link and rules since it started.
func awaitReconciles(t testing.TB, a *runningAgent, n float64) {
	t.Helper()
	metric := `nodecache_iface_reconciles_total{result="ok"}`
	eventually(t, fmt.Sprintf("%v %s", n, metric), func() error {
		if got := metricSum(t, a.metrics(t), metric); got < n {
			return fmt.Errorf("got %v, want at least %v", got, n)
		}
		return nil
	})
}

// checkTornDown wants no nodecache chain, jump or rule in backend (v4 and
// v6), no link nodelocaldns and neither local IP on any link of node.
func checkTornDown(t testing.TB, node *netNS, backend string) {
	t.Helper()
	checkBackendClean(t, node, backend, "after SIGTERM")
	if out, err := ipCmd("-n", node.Name, "link", "show", "dev", "nodelocaldns"); err == nil {
		t.Errorf("link nodelocaldns after SIGTERM: got\n%s\nwant it removed", out)
	}
	addrs := mustIP(t, "-n", node.Name, "addr", "show")
	for _, ip := range []string{linkLocalIP, localIPv6} {
		if strings.Contains(addrs, ip+"/") {
			t.Errorf("addresses after SIGTERM: got %s among\n%s\nwant it gone", ip, addrs)
		}
	}
}
