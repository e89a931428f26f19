//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// successor starts a second agent with a's exact command line (same flags,
// sockets and kubeconfig), as a rolling update of the DaemonSet does: it
// takes a's listeners and warm cache over through the handover socket, or
// opens new sockets when a is gone. It does not wait for readiness.
func (a *runningAgent) successor(t testing.TB) *runningAgent {
	t.Helper()
	argv := a.proc.cmd.Args
	logPath := filepath.Join(t.TempDir(), "successor.log")
	p, err := startProc("nodecache", logPath, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(15 * time.Second); err != nil {
			t.Errorf("stopping the successor: got %v, want a clean exit on SIGTERM", err)
		}
		if t.Failed() {
			t.Logf("successor log:\n%s", p.logTail(8000))
		}
	})
	return &runningAgent{Node: a.Node, LocalIP: a.LocalIP, API: a.API, proc: p, http: a.http}
}

// flag returns the value of --name=VALUE on the agent's command line.
func (a *runningAgent) flag(t testing.TB, name string) string {
	t.Helper()
	for _, arg := range slices.Backward(a.proc.cmd.Args) {
		if v, ok := strings.CutPrefix(arg, "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("agent command line has no --%s=: %v", name, a.proc.cmd.Args)
	return ""
}

// waitExit waits up to d for the agent process to end and returns how.
func (a *runningAgent) waitExit(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-a.proc.done:
	case <-time.After(d):
		t.Fatalf("agent still running %v after it should have exited", d)
	}
	_, err := a.proc.exited()
	return err
}

// socketID identifies the unix socket file at path, "" when there is none:
// its inode and change time, since a file created right after another was
// unlinked often gets the same inode number.
func socketID(path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d@%d.%09d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return ""
}

// kill SIGKILLs the agent and waits for it: no teardown runs.
func (a *runningAgent) kill(t testing.TB) {
	t.Helper()
	if err := a.proc.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the agent: %v", err)
	}
	<-a.proc.done
}

// checkNodeState asserts that the link carries the link-local IP and that
// every nodecache rule is in the node's tables exactly once (14: the four
// jumps, NOTRACK for udp and tcp in raw PREROUTING and both directions of
// raw OUTPUT, ACCEPT in filter INPUT and OUTPUT).
func checkNodeState(t testing.TB, node *netNS) {
	t.Helper()
	if out := mustIP(t, "-n", node.Name, "addr", "show", "dev", "nodelocaldns"); !strings.Contains(out, linkLocalIP+"/32") {
		t.Errorf("link nodelocaldns: got\n%s\nwant %s/32 on it", out, linkLocalIP)
	}
	var rules []string
	for _, table := range []string{"raw", "filter"} {
		for _, line := range strings.Split(savedRules(t, node, table), "\n") {
			if strings.HasPrefix(line, "-A ") && strings.Contains(line, "nodecache") {
				rules = append(rules, table+" "+line)
			}
		}
	}
	seen := map[string]int{}
	for _, r := range rules {
		seen[r]++
	}
	for r, n := range seen {
		if n != 1 {
			t.Errorf("rule %q: got %d copies, want 1", r, n)
		}
	}
	if got, want := len(rules), 14; got != want {
		t.Errorf("nodecache rules in the node: got %d, want %d\n%s", got, want, strings.Join(rules, "\n"))
	}
}

// savedRules is one table of ns from both iptables back ends.
func savedRules(t testing.TB, ns *netNS, table string) string {
	t.Helper()
	if table == "raw" {
		return rawRules(t, ns)
	}
	return nsCommand(t, ns, "iptables-nft-save", "-t", table) + nsCommand(t, ns, "iptables-legacy-save", "-t", table)
}

// loadMix is a mix of cluster and external names for fqdn, a dual-stack
// service of ns, each with the rcode it must get.
func loadMix(fqdn, ns string) []loadName {
	return []loadName{
		{fqdn, dns.TypeA, dns.RcodeSuccess},
		{"www.example.com.", dns.TypeA, dns.RcodeSuccess},
		{fqdn, dns.TypeAAAA, dns.RcodeSuccess},
		{"www.example.com.", dns.TypeAAAA, dns.RcodeSuccess},
		{"txt.example.com.", dns.TypeTXT, dns.RcodeSuccess},
		{"nope." + ns + ".svc." + clusterDomain + ".", dns.TypeA, dns.RcodeNameError},
		{"nope.example.com.", dns.TypeA, dns.RcodeNameError},
	}
}

// webService creates a dual-stack Service "web" in ns and waits until the
// agent answers it; it returns the service's FQDN and ClusterIPs.
func webService(t testing.TB, r *agentRig, ns string) (string, []string) {
	t.Helper()
	svc := createService(t, serviceSpec(ns, "web", corev1.ServiceTypeClusterIP, true))
	fqdn := "web." + ns + ".svc." + clusterDomain + "."
	r.await(t, query{Name: fqdn}, time.Now(), hasData(dns.TypeA, svc.Spec.ClusterIPs[0]))
	return fqdn, svc.Spec.ClusterIPs
}

// TestUpgradeUnderLoad upgrades the agent in place three times (a second
// process with the same flags takes the sockets over) under a steady load
// from a pod of cluster and external names, and checks that no query is
// lost or fails, that each predecessor exits 0 without teardown, and that
// the node keeps one copy of the link and rules. Latency during the
// handovers and outside them is logged.
func TestUpgradeUnderLoad(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{})
	ns := newNamespace(t, "upgrade")
	fqdn, _ := webService(t, r, ns)

	const qps, workers = 2000, 16
	load := startLoad(t, r.pod.NS, linkLocalIP+":53", loadMix(fqdn, ns), qps, workers, 2*time.Second)
	// TCP beside it, a connection per query, as a stub resolver retrying
	// a truncated answer does.
	tcpLoad := startLoadNet(t, r.pod.NS, "tcp", linkLocalIP+":53", loadMix(fqdn, ns), 200, 4, 2*time.Second)
	// Steady state first: about two seconds of each load.
	load.waitAnswered(t, time.Time{}, 2*qps)
	tcpLoad.waitAnswered(t, time.Time{}, 400)
	cur := r.agent
	handoverSocket := cur.flag(t, "handover-socket")
	var handovers []window
	for i := 1; i <= 3; i++ {
		w := window{From: time.Now()}
		predecessorSocket := socketID(handoverSocket)
		next := cur.successor(t)
		if err := cur.waitExit(t, 60*time.Second); err != nil {
			t.Fatalf("upgrade %d: predecessor exit: got %v, want status 0", i, err)
		}
		w.To = time.Now()
		handovers = append(handovers, w)
		if log := cur.proc.logTail(1 << 20); !strings.Contains(log, "handed over to a successor") {
			t.Errorf("upgrade %d: predecessor log lacks %q:\n%s", i, "handed over to a successor", cur.proc.logTail(4000))
		}
		ready := next.waitHTTP(t, "/readyz")
		readyAt := time.Now()
		t.Logf("upgrade %d: successor exec → predecessor exit 0: %v; then successor /readyz 200 after %v",
			i, w.To.Sub(w.From).Round(time.Millisecond), ready.Round(time.Millisecond))
		cur = next
		// The next upgrade needs the successor listening on the handover
		// socket, and steady state between handovers: a second of load
		// answered by the new process.
		eventually(t, "the successor to listen on "+handoverSocket, func() error {
			if id := socketID(handoverSocket); id == "" || id == predecessorSocket {
				return fmt.Errorf("%s is not the successor's socket yet", handoverSocket)
			}
			return nil
		})
		load.waitAnswered(t, readyAt, qps)
	}
	results, err := load.stop()
	if err != nil || len(results) == 0 {
		t.Fatalf("load client: %d results, error %v", len(results), err)
	}
	tcpResults, err := tcpLoad.stop()
	if err != nil || len(tcpResults) == 0 {
		t.Fatalf("tcp load client: %d results, error %v", len(tcpResults), err)
	}
	tcpDuring, tcpSteady := summarise(tcpResults, handovers)
	t.Logf("tcp, steady state:     %v", tcpSteady)
	t.Logf("tcp, during handovers: %v", tcpDuring)
	for _, s := range []loadStats{tcpSteady, tcpDuring} {
		if s.Outcomes[loadOK] != s.N {
			t.Errorf("tcp load: got %v, want every query answered with its rcode; first failures %q", s, s.Details)
		}
	}
	during, steady := summarise(results, handovers)
	t.Logf("load %d qps over %d sockets from a pod, %d queries in %v", qps, workers, len(results),
		results[len(results)-1].Sent.Sub(results[0].Sent).Round(time.Millisecond))
	t.Logf("steady state:     %v", steady)
	t.Logf("during handovers: %v", during)
	for _, s := range []loadStats{steady, during} {
		if s.Outcomes[loadOK] != s.N {
			t.Errorf("load: got %v, want every query answered with its rcode; first failures %q", s, s.Details)
		}
	}
	if during.N == 0 {
		t.Errorf("load: got no query sent during a handover, want some")
	}
	checkNodeState(t, r.node)
	if a := r.ask(t, query{Name: fqdn}); a.Rcode != "NOERROR" {
		t.Errorf("%s after the upgrades: got %v, want NOERROR", fqdn, a)
	}
}

// TestCrashRestart SIGKILLs the agent under load and starts a new one with
// the same flags: it adopts the link and rules the dead one left (one copy
// of each) and serves cluster and external names; the time from the kill
// and from the new process's start to the first answer, and the queries lost
// in the gap, are logged. Then, with the API server unreachable, a second
// crash and restart serves the cluster zone from the --zone-snapshot file.
func TestCrashRestart(t *testing.T) {
	requireSuite(t)
	snap := filepath.Join(t.TempDir(), "zone.snapshot")
	r := newAgentRig(t, agentOpts{Flags: []string{"--zone-snapshot=" + snap}})
	ns := newNamespace(t, "crash")
	fqdn, ips := webService(t, r, ns)
	start := time.Now()
	eventually(t, "the zone snapshot to hold namespace "+ns, func() error {
		if !snapshotHas(snap, ns) {
			return fmt.Errorf("%s does not hold %s yet", snap, ns)
		}
		return nil
	})
	t.Logf("service answered → in the zone snapshot: %v (written every 10s)", time.Since(start).Round(time.Millisecond))

	const timeout = time.Second
	load := startLoad(t, r.pod.NS, linkLocalIP+":53", loadMix(fqdn, ns), 1000, 8, timeout)
	load.waitAnswered(t, time.Time{}, 2000) // about two seconds of steady state
	killAt := time.Now()
	r.agent.kill(t)
	next := r.agent.successor(t)
	started := time.Now()
	first := firstAnswer(t, r.pod.NS, linkLocalIP+":53", loadName{fqdn, dns.TypeA, dns.RcodeSuccess}, 5*time.Millisecond, 60*time.Second)
	next.waitHTTP(t, "/readyz")
	ready := time.Now()
	load.waitAnswered(t, ready, 1000) // about a second after the restart
	results, err := load.stop()
	if err != nil {
		t.Fatalf("load client: %v", err)
	}
	gap := window{From: killAt.Add(-timeout), To: ready}
	inGap, outside := summarise(results, []window{gap})
	t.Logf("SIGKILL → first answer (a probe every 5ms) %v; new process exec → first answer %v; → /readyz 200 %v",
		first.Sub(killAt).Round(time.Millisecond), first.Sub(started).Round(time.Millisecond), ready.Sub(started).Round(time.Millisecond))
	t.Logf("load 1000 qps: around the crash %v", inGap)
	t.Logf("load 1000 qps: before and after  %v", outside)
	if outside.Outcomes[loadOK] != outside.N {
		t.Errorf("load outside the crash: got %v, want every query answered; first failures %q", outside, outside.Details)
	}
	t.Logf("queries lost around the crash: %d refused (ICMP port unreachable), %d unanswered within the timeout",
		inGap.Outcomes[loadRefused], inGap.Outcomes[loadLost])
	if n := inGap.Outcomes[loadServFail] + inGap.Outcomes[loadWrong]; n > 0 {
		t.Errorf("load around the crash: got %d wrong answers, want only answers or losses; %q", n, inGap.Details)
	}
	checkNodeState(t, r.node)
	if a := r.ask(t, query{Name: fqdn}); !hasData(dns.TypeA, ips[0])(a) {
		t.Errorf("%s after the restart: got %v, want NOERROR %s", fqdn, a, ips[0])
	}
	if a := r.ask(t, query{Name: "www.example.com."}); !hasData(dns.TypeA, "192.0.2.10")(a) {
		t.Errorf("www.example.com after the restart: got %v, want NOERROR 192.0.2.10", a)
	}

	t.Run("snapshot with the API server unreachable", func(t *testing.T) {
		r.agent.API.Pause()
		defer r.agent.API.Resume()
		next.kill(t)
		third := next.successor(t)
		third.waitHTTP(t, "/healthz")
		code, body := third.get(t, healthAddr, "/readyz")
		t.Logf("/readyz with the zone from the snapshot and no API server: %d %q", code, strings.TrimSpace(body))
		if code != 200 || !strings.Contains(body, "source snapshot") {
			t.Errorf("/readyz: got %d %q, want 200 naming source snapshot (the zone answers)", code, body)
		}
		var st cliStatus
		third.cliJSON(t, &st, "status")
		if st.Zone == nil || st.Zone.Source != "snapshot" || st.Zone.Services == 0 {
			t.Errorf("status zone: got %+v, want source snapshot with services", st.Zone)
		}
		if a := r.ask(t, query{Name: fqdn}); !hasData(dns.TypeA, ips[0])(a) {
			t.Errorf("%s from the snapshot: got %v, want NOERROR %s", fqdn, a, ips[0])
		}
		if a := r.ask(t, query{Name: "nope." + ns + ".svc." + clusterDomain + "."}); a.Rcode != "NXDOMAIN" {
			t.Errorf("unknown service from the snapshot: got %v, want NXDOMAIN", a)
		}
		checkNodeState(t, r.node)
	})
}

// snapshotHas reports whether the zone snapshot at path holds s (its
// payload is gzip-compressed JSON after a fixed header).
func snapshotHas(path, s string) bool {
	raw, err := os.ReadFile(path)
	const header = 8 + 4 + 8 + 32
	if err != nil || len(raw) <= header {
		return false
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw[header:]))
	if err != nil {
		return false
	}
	body, err := io.ReadAll(zr)
	return err == nil && bytes.Contains(body, []byte(s))
}
