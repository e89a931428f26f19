//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// nsCommand runs argv inside ns and returns its combined output.
func nsCommand(t testing.TB, ns *netNS, argv ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", append([]string{"netns", "exec", ns.Name}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(argv, " "), ns.Name, err, out)
	}
	return string(out)
}

// rawRules is the raw table of ns from both iptables back ends (the agent
// may pick either in auto mode).
func rawRules(t testing.TB, ns *netNS) string {
	t.Helper()
	var b strings.Builder
	for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
		if _, err := exec.LookPath(save); err != nil {
			continue
		}
		b.WriteString(nsCommand(t, ns, save, "-t", "raw"))
	}
	return b.String()
}

// checkNotrackRules wants a nodecache NOTRACK rule for UDP and TCP port 53
// to the link-local IP in rules (iptables-save output).
func checkNotrackRules(rules string) error {
	for _, proto := range []string{"udp", "tcp"} {
		found := false
		for _, line := range strings.Split(rules, "\n") {
			if strings.Contains(line, linkLocalIP) && strings.Contains(line, "-p "+proto) &&
				strings.Contains(line, "--dport 53") && strings.Contains(line, "nodecache") &&
				(strings.Contains(line, "NOTRACK") || strings.Contains(line, "--notrack")) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("raw table of the node: got no nodecache NOTRACK rule for %s dport 53 to %s, want one\n%s", proto, linkLocalIP, rules)
		}
	}
	return nil
}

// eventually polls check until it returns nil and fails t with its last
// error after 15s: for state that converges in the background.
func eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	eventuallyWithin(t, 15*time.Second, what, check)
}

// eventuallyWithin is eventually with a deadline of d.
func eventuallyWithin(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestNodeSetup checks what the agent does to the node's kernel: the link
// carrying the link-local IP, raw-table rules that keep DNS to it out of
// conntrack (with conntrack active in the node netns, as kube-proxy makes
// it, and a tracked flow as the control), and that both go on exit.
func TestNodeSetup(t *testing.T) {
	requireSuite(t)
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Fatalf("conntrack(8) is needed: %v", err)
	}
	r := newAgentRig(t, agentOpts{})
	if out := mustIP(t, "-n", r.node.Name, "addr", "show", "dev", "nodelocaldns"); !strings.Contains(out, linkLocalIP+"/32") {
		t.Errorf("link nodelocaldns in the node: got\n%s\nwant %s/32 on it", out, linkLocalIP)
	}
	// The rules are reconciled in the background, so readiness does not
	// imply them yet.
	eventually(t, "nodecache NOTRACK rules for udp and tcp", func() error {
		return checkNotrackRules(rawRules(t, r.node))
	})
	// A conntrack match makes the kernel track this netns.
	nsCommand(t, r.node, "iptables", "-w", "-A", "INPUT", "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	nsCommand(t, r.node, "conntrack", "-F")
	for _, tcp := range []bool{false, true} {
		if a := r.ask(t, query{Name: "www.example.com.", TCP: tcp}); a.Rcode != "NOERROR" {
			t.Fatalf("www.example.com via the agent (tcp=%v): got %v, want NOERROR", tcp, a)
		}
	}
	// Control: DNS to the node's veth address is tracked (nothing answers;
	// the entry is there all the same).
	_, _ = runQuery(t.Context(), r.pod.NS, query{Server: r.pod.Gateway, Name: "control."})
	tracked := nsCommand(t, r.node, "conntrack", "-L")
	if strings.Contains(tracked, "dst="+linkLocalIP) {
		t.Errorf("conntrack in the node: got entries to %s, want none\n%s", linkLocalIP, tracked)
	}
	if !strings.Contains(tracked, "dst="+r.pod.Gateway) {
		t.Errorf("conntrack in the node: got no entry for the control query to %s, want one (is conntrack active?)\n%s", r.pod.Gateway, tracked)
	}

	r.agent.stop(t)
	if out, err := ipCmd("-n", r.node.Name, "link", "show", "dev", "nodelocaldns"); err == nil {
		t.Errorf("link nodelocaldns after the agent exited: got\n%s\nwant it removed", out)
	}
	if rules := rawRules(t, r.node); strings.Contains(rules, "nodecache") {
		t.Errorf("raw table after the agent exited: got nodecache rules, want none\n%s", rules)
	}
}

var (
	dnsperfCompletedRe = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	dnsperfQPSRe       = regexp.MustCompile(`Queries per second:\s+([\d.]+)`)
	dnsperfLatencyRe   = regexp.MustCompile(`Average Latency \(s\):\s+([\d.]+)`)
	// "  Response codes:       NOERROR 9000 (90.00%), NXDOMAIN 1000 (10.00%)"
	dnsperfRcodesRe = regexp.MustCompile(`Response codes:\s+(.*)`)
	dnsperfRcodeRe  = regexp.MustCompile(`([A-Z]+) \d+ \(`)
)

// TestLoadThroughLinkLocal drives the agent with dnsperf from a pod netns,
// over the veth and the link-local IP, with a mix of cluster and cached
// external names. Throughput and latency are logged, not asserted; the test
// fails on any rcode the names should not get.
func TestLoadThroughLinkLocal(t *testing.T) {
	requireSuite(t)
	if _, err := exec.LookPath("dnsperf"); err != nil {
		t.Fatalf("dnsperf is needed: %v", err)
	}
	r := newAgentRig(t, agentOpts{})
	ns := newNamespace(t, "load")
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, true))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."
	r.await(t, query{Name: fqdn}, time.Now(), hasData(dns.TypeA, svc.Spec.ClusterIPs[0]))
	names := []string{fqdn + " A", fqdn + " AAAA", "www.example.com. A", "www.example.com. AAAA", "nope." + ns + ".svc." + clusterDomain + ". A"}
	data := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(data, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"udp", "tcp"} {
		t.Run(mode, func(t *testing.T) {
			argv := []string{"netns", "exec", r.pod.NS.Name, "dnsperf", "-m", mode, "-s", linkLocalIP,
				"-d", data, "-l", "3", "-c", "4", "-q", "64", "-t", "2"}
			out, err := exec.CommandContext(t.Context(), "ip", argv...).CombinedOutput()
			if err != nil {
				t.Fatalf("dnsperf: %v\n%s", err, out)
			}
			s := string(out)
			completed := firstMatch(dnsperfCompletedRe, s)
			if completed == "" || completed == "0" {
				t.Fatalf("dnsperf over %s: got %q queries completed, want some\n%s", mode, completed, s)
			}
			for _, m := range dnsperfRcodeRe.FindAllStringSubmatch(firstMatch(dnsperfRcodesRe, s), -1) {
				if m[1] != "NOERROR" && m[1] != "NXDOMAIN" {
					t.Errorf("dnsperf over %s: got rcode %s among the answers, want only NOERROR and NXDOMAIN\n%s", mode, m[1], s)
				}
			}
			t.Logf("dnsperf -m %s -c 4 -q 64 -l 3 via %s from a pod netns: %s queries, %s qps, average latency %s s",
				mode, linkLocalIP, completed, firstMatch(dnsperfQPSRe, s), firstMatch(dnsperfLatencyRe, s))
		})
	}
}

func firstMatch(re *regexp.Regexp, s string) string {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}
