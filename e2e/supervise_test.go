//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The supervisor (internal/supervise) under load, as a host process: the
// agent started as startAgent starts it, with no flag about supervision.

// warmMix is loadMix plus n names of the upstream zone that do not exist:
// each is a negative cache entry (60 s, the zone's SOA minimum), asked
// about once a second at 2,000 q/s, so that the hit ratio tells a warm
// cache from a cold one.
func warmMix(fqdn, ns string, n int) []loadName {
	names := loadMix(fqdn, ns)
	for i := range n {
		names = append(names, loadName{fmt.Sprintf("h%d.example.com.", i), dns.TypeA, dns.RcodeNameError})
	}
	return names
}

// cacheCounts is the agent's cache hits and misses so far.
func (a *runningAgent) cacheCounts(t testing.TB) (hits, misses float64) {
	t.Helper()
	text := a.metrics(t)
	return metricSum(t, text, "nodecache_cache_hits_total"), metricSum(t, text, "nodecache_cache_misses_total")
}

func ratio(hits, misses float64) float64 {
	if hits+misses == 0 {
		return 0
	}
	return hits / (hits + misses)
}

// killServing SIGKILLs the agent's serving process and waits until the
// supervisor runs another; it returns the kill time and the new pid.
func (a *runningAgent) killServing(t testing.TB) (time.Time, int) {
	t.Helper()
	old := a.servingPID(t)
	at := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatalf("killing the serving process %d: %v", old, err)
	}
	var next int
	eventually(t, "a new serving process", func() error {
		kids := children(a.proc.cmd.Process.Pid)
		if len(kids) != 1 || kids[0] == old {
			return fmt.Errorf("supervisor's children %v (killed %d)", kids, old)
		}
		next = kids[0]
		return nil
	})
	return at, next
}

// answerGaps returns the longest time without an answer in the window in,
// among the answers of results (by the time each came back), and the first
// answer to a query sent at or after in.From (one sent before it may have
// been answered by the process killed at in.From).
func answerGaps(results []loadResult, in window) (longest time.Duration, first time.Time) {
	var at []time.Time
	for _, r := range results {
		if r.Outcome == loadLost || r.Outcome == loadRefused {
			continue
		}
		done := r.Sent.Add(r.RTT)
		at = append(at, done)
		if !r.Sent.Before(in.From) && (first.IsZero() || done.Before(first)) {
			first = done
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	prev := in.From
	for _, t := range at {
		if t.Before(in.From) {
			continue
		}
		if t.After(in.To) {
			break
		}
		longest = max(longest, t.Sub(prev))
		prev = t
	}
	return longest, first
}

// TestServingProcessKilled SIGKILLs the serving process under 2,000 UDP q/s
// over 16 sockets and 200 TCP q/s: the supervisor starts another at once on
// the same sockets with the cache journal. No query is refused and none
// gets SERVFAIL; UDP queries lost are at most those the killed process had
// read (one per socket at most); the longest gap between answers, the first
// answer after the kill and the hit ratio in the second before and after
// are logged. The supervisor stays, the node keeps one copy of each rule.
//
// The new process answers once its zone has synced from the API server
// (its first list). With --zone-snapshot (the DaemonSet's config) it would
// serve from the snapshot at once, but the snapshot can be older than the
// Service the test just made (written at sync, then every 10 s): it waits
// for the list up to 1 s and only then falls back to the snapshot. Both
// configs are run; the first answer after the kill is logged for each.
func TestServingProcessKilled(t *testing.T) {
	requireSuite(t)
	t.Run("zone from the API server", func(t *testing.T) { servingProcessKilled(t, agentOpts{}) })
	t.Run("zone snapshot", func(t *testing.T) {
		servingProcessKilled(t, agentOpts{Flags: []string{"--zone-snapshot=" + filepath.Join(t.TempDir(), "zone.snap")}})
	})
}

func servingProcessKilled(t *testing.T, opts agentOpts) {
	r := newAgentRig(t, opts)
	ns := newNamespace(t, "killed")
	fqdn, ips := webService(t, r, ns)
	const qps, workers, tcpWorkers = 2000, 16, 4
	mix := warmMix(fqdn, ns, 1000)
	load := startLoad(t, r.pod.NS, linkLocalIP+":53", mix, qps, workers, 2*time.Second)
	tcpLoad := startLoadNet(t, r.pod.NS, "tcp", linkLocalIP+":53", loadMix(fqdn, ns), 200, tcpWorkers, 2*time.Second)
	load.waitAnswered(t, time.Time{}, 3*qps) // every name asked, cached, and asked again
	tcpLoad.waitAnswered(t, time.Time{}, 400)
	supervisor := r.agent.proc.cmd.Process.Pid
	h0, m0 := r.agent.cacheCounts(t)
	time.Sleep(time.Second)
	h1, m1 := r.agent.cacheCounts(t)
	killAt, pid := r.agent.killServing(t)
	time.Sleep(time.Until(killAt.Add(time.Second)))
	h2, m2 := r.agent.cacheCounts(t) // the new process's first second
	load.waitAnswered(t, killAt.Add(time.Second), qps)
	tcpLoad.waitAnswered(t, killAt.Add(time.Second), 200)
	results, err := load.stop()
	if err != nil {
		t.Fatalf("load client: %v", err)
	}
	tcpResults, err := tcpLoad.stop()
	if err != nil {
		t.Fatalf("tcp load client: %v", err)
	}
	kill := window{From: killAt.Add(-2 * time.Second), To: killAt.Add(time.Second)}
	around, outside := summarise(results, []window{kill})
	tcpAround, tcpOutside := summarise(tcpResults, []window{kill})
	longest, _ := answerGaps(results, window{From: killAt.Add(-100 * time.Millisecond), To: killAt.Add(time.Second)})
	_, firstAfter := answerGaps(results, window{From: killAt, To: killAt.Add(time.Second)})
	before, after := ratio(h1-h0, m1-m0), ratio(h2, m2)
	t.Logf("udp %d q/s over %d sockets, %d names; around the kill (-2s..+1s): %v", qps, workers, len(mix), around)
	t.Logf("udp before and after: %v", outside)
	t.Logf("tcp 200 q/s, a connection per query, around the kill: %v; outside: %v", tcpAround, tcpOutside)
	t.Logf("UDP queries lost: %d (held by the killed process); refused: %d; longest gap between answers %v; "+
		"first answer to a query sent after the kill %v after it", around.Outcomes[loadLost], around.Outcomes[loadRefused],
		longest.Round(time.Millisecond), firstAfter.Sub(killAt).Round(time.Millisecond))
	t.Logf("cache hit ratio: %.3f in the second before the kill, %.3f in the new process's first second (%.0f hits, %.0f misses)",
		before, after, h2, m2)
	if log := r.agent.proc.logTail(1 << 20); strings.Contains(log, "restored the cache from the journal") {
		i := strings.LastIndex(log, "restored the cache from the journal")
		t.Logf("agent: %s", strings.SplitN(log[i:], "\n", 2)[0])
	}
	for _, s := range []loadStats{around, outside, tcpAround, tcpOutside} {
		if n := s.Outcomes[loadServFail] + s.Outcomes[loadWrong] + s.Outcomes[loadRefused]; n > 0 {
			t.Errorf("load: got %v, want no SERVFAIL, wrong answer or refusal; first failures %q", s, s.Details)
		}
	}
	if outside.Outcomes[loadOK] != outside.N || tcpOutside.Outcomes[loadOK] != tcpOutside.N {
		t.Errorf("load outside the kill: got udp %v, tcp %v; want every query answered", outside, tcpOutside)
	}
	if n := around.Outcomes[loadLost]; n > workers {
		t.Errorf("udp queries lost: got %d, want at most %d (one in flight per socket, read by the killed process)", n, workers)
	}
	if n := tcpAround.Outcomes[loadLost]; n > tcpWorkers {
		t.Errorf("tcp queries lost: got %d, want at most %d (the connections the killed process held)", n, tcpWorkers)
	}
	if after < before-0.05 {
		t.Errorf("hit ratio after the kill: got %.3f, want within 5 points of %.3f before (the journal restores the cache)", after, before)
	}
	if got := r.agent.proc.cmd.Process.Pid; got != supervisor || r.agent.servingPID(t) != pid {
		t.Errorf("processes after the kill: supervisor %d, serving %d; want supervisor %d kept, serving %d", got,
			r.agent.servingPID(t), supervisor, pid)
	}
	checkBinaries(t, supervisor, pid)
	if v := metricSum(t, r.agent.metrics(t), "nodecache_supervisor_restarts_total"); v != 1 {
		t.Errorf("nodecache_supervisor_restarts_total: got %v, want 1", v)
	}
	checkNodeState(t, r.node)
	if a := r.ask(t, query{Name: fqdn}); !hasData(dns.TypeA, ips[0])(a) {
		t.Errorf("%s after the kill: got %v, want NOERROR %s", fqdn, a, ips[0])
	}
}

// TestServingProcessCrashLoop kills each new serving process as soon as it
// appears, three times, under 200 UDP q/s: the restarts back off, queries
// wait in the kept sockets (none refused), and readiness, status, doctor
// and the metric name the crash loop; the agent then serves again and stops
// cleanly on SIGTERM (startAgent's cleanup).
func TestServingProcessCrashLoop(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{})
	ns := newNamespace(t, "crashloop")
	fqdn, _ := webService(t, r, ns)
	load := startLoad(t, r.pod.NS, linkLocalIP+":53", loadMix(fqdn, ns), 200, 4, 5*time.Second)
	load.waitAnswered(t, time.Time{}, 400)
	start := time.Now()
	for range 3 {
		r.agent.killServing(t)
	}
	killed := time.Now()
	r.agent.waitHTTP(t, "/healthz")
	code, body := r.agent.get(t, healthAddr, "/readyz")
	t.Logf("three kills in %v; /readyz %d %q", killed.Sub(start).Round(time.Millisecond), code, strings.TrimSpace(body))
	if code != 503 || !strings.Contains(body, "crash loop") {
		t.Errorf("/readyz in a crash loop: got %d %q, want 503 naming the crash loop", code, body)
	}
	if v := metricSum(t, r.agent.metrics(t), "nodecache_supervisor_crash_loop"); v != 1 {
		t.Errorf("nodecache_supervisor_crash_loop: got %v, want 1", v)
	}
	findings, _ := r.agent.doctor(t, "/nonexistent/resolv.conf")
	i := slices.IndexFunc(findings, func(f cliFinding) bool { return f.Check == "supervisor" })
	if i < 0 || findings[i].Severity != "FAIL" || !strings.Contains(findings[i].Detail, "crash loop") {
		t.Errorf("doctor: got %+v, want a supervisor FAIL naming the crash loop", findings)
	}
	load.waitAnswered(t, time.Now(), 200)
	results, err := load.stop()
	if err != nil {
		t.Fatalf("load client: %v", err)
	}
	loop, _ := summarise(results, []window{{From: start, To: killed}})
	t.Logf("load 200 q/s during the crash loop: %v", loop)
	if n := loop.Outcomes[loadRefused] + loop.Outcomes[loadServFail] + loop.Outcomes[loadWrong]; n > 0 {
		t.Errorf("load during the crash loop: got %v, want no refusal and no wrong answer; %q", loop, loop.Details)
	}
	all := stats(results)
	if all.Outcomes[loadLost] > 3*4 {
		t.Errorf("load: got %v, want at most 12 lost (4 sockets, 3 kills)", all)
	}

	// A pod deleted while its serving process is down (here in the 1 s
	// back-off after a fourth death): the SIGTERM reaches the supervisor,
	// which runs one more process only to stop: the link and rules go.
	sup := r.agent.proc.cmd.Process.Pid
	inBackoff := false
	for range 6 { // each death within the window backs off longer
		kids := children(sup)
		if len(kids) == 1 {
			_ = syscall.Kill(kids[0], syscall.SIGKILL)
			for !processGone(kids[0]) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		time.Sleep(100 * time.Millisecond)
		if len(children(sup)) == 0 {
			inBackoff = true
			break
		}
	}
	if !inBackoff {
		t.Fatalf("no back-off seen after six more kills: the supervisor %d always had a serving process", sup)
	}
	r.agent.stop(t)
	if out, err := ipCmd("-n", r.node.Name, "link", "show", "dev", "nodelocaldns"); err == nil {
		t.Errorf("link nodelocaldns after SIGTERM in the back-off: got\n%s\nwant it removed", out)
	}
	if rules := rawRules(t, r.node); strings.Contains(rules, "nodecache") {
		t.Errorf("raw table after SIGTERM in the back-off: got nodecache rules, want none\n%s", rules)
	}
	if log := r.agent.proc.logTail(1 << 20); !strings.Contains(log, "stopping while no serving process runs") {
		t.Errorf("agent log: want the supervisor's stop while no serving process runs")
	}
}
