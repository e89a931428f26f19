//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// memoryCgroup makes a cgroup v1 memory directory limited to limit bytes,
// without swap, and removes it when the test ends (after the agent, which
// was started later, has stopped).
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	root := "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.limit_in_bytes")); err != nil {
		mustHave(t, "a cgroup v1 memory hierarchy at "+root+" (this kernel's cgroups are v1 here): "+err.Error())
	}
	dir := filepath.Join(root, fmt.Sprintf("nodecache-e2e-oom-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		t.Fatalf("creating the memory cgroup: %v", err)
	}
	for file, v := range map[string]string{"memory.limit_in_bytes": strconv.FormatInt(limit, 10), "memory.swappiness": "0"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			t.Fatalf("setting %s of %s: %v", file, dir, err)
		}
	}
	t.Cleanup(func() {
		for range 50 {
			if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("removing the memory cgroup %s: still busy", dir)
	})
	return dir
}

func cgroupInt(t testing.TB, dir, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// floodNames writes n unique names under the upstream's zone, each long
// (a cached NXDOMAIN of ~400 bytes), to a dnsperf query file.
func floodNames(t testing.TB, n int) string {
	t.Helper()
	var b strings.Builder
	pad := strings.Repeat("x", 50)
	for i := range n {
		fmt.Fprintf(&b, "%s%d.%s.%s.%s A\n", pad, i, pad, pad, strings.TrimSuffix(upstreamZone, "."))
	}
	path := filepath.Join(t.TempDir(), "flood.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServingProcessOOMKilled runs the agent in a 96 MiB memory cgroup
// with a cache budget of 1 GiB, so that a unique-name flood (dnsperf)
// grows its cache until the kernel OOM-kills a process of the cgroup: the
// serving process, whose oom_score_adj is 500 above the supervisor's. The
// supervisor restarts it on the kept sockets; its journal restore is bounded
// by half the memory then free in the cgroup, so the restore does not get
// it killed again: with the flood over, it answers, from the cache it
// restored, and is not killed again; the cgroup stays under its limit.
func TestServingProcessOOMKilled(t *testing.T) {
	requireSuite(t)
	if _, err := exec.LookPath("dnsperf"); err != nil {
		mustHave(t, "dnsperf for the unique-name flood: "+err.Error())
	}
	const limit = 96 << 20
	cg := memoryCgroup(t, limit)
	r := newAgentRig(t, agentOpts{MemoryCgroup: cg, Flags: []string{"--cache-size=1GiB", "--log-level=info"}})
	supervisor := r.agent.proc.cmd.Process.Pid
	before := r.agent.servingPID(t)
	warm := "www.example.com."
	if a := r.ask(t, query{Name: warm}); !hasData(dns.TypeA, "192.0.2.10")(a) {
		t.Fatalf("%s before the flood: got %v", warm, a)
	}
	// The probe asks the zone (its NXDOMAIN needs no cache, nor the
	// upstream): how soon the new process answers at all. Names of the
	// cache not restored yet wait for the restore (HoldMisses).
	watch, err := watchExit(before, supervisor, probeUDP(r.pod.NS, "nothing.default.svc."+clusterDomain+".", dns.RcodeNameError))
	if err != nil {
		t.Fatal(err)
	}
	file := floodNames(t, 400000)
	start := time.Now()
	cmd := exec.Command("ip", "netns", "exec", r.pod.NS.Name, "dnsperf", "-s", linkLocalIP, "-d", file,
		"-l", "120", "-Q", "20000", "-q", "90", "-t", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var killedAt time.Time
	eventuallyWithin(t, 150*time.Second, "the serving process OOM-killed", func() error {
		if cgroupInt(t, cg, "memory.failcnt") > 0 && servingOrZero(r.agent) != before {
			killedAt = time.Now()
			return nil
		}
		return fmt.Errorf("serving process %d, cgroup usage %d MiB of %d", servingOrZero(r.agent),
			cgroupInt(t, cg, "memory.usage_in_bytes")>>20, limit>>20)
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	watch.wait(15 * time.Second)
	t.Logf("OOM kill after %v of flood (seen by the poll %v after the exit)", watch.exitAt.Sub(start).Round(time.Millisecond),
		killedAt.Sub(watch.exitAt).Round(time.Millisecond))
	log := r.agent.proc.logTail(1 << 20)
	t.Logf("gap: %s", gapReport(watch, log))
	if watch.firstAnswer() == 0 {
		t.Errorf("no answer to %d probes in 10 s after the serving process's exit: %v", watch.probes, watch.err)
	}
	if !strings.Contains(log, "serving process died") || !strings.Contains(log, "signal: killed") {
		t.Errorf("agent log: want the supervisor's line on the serving process killed; tail:\n%s", log[max(0, len(log)-4000):])
	}
	r.agent.waitHTTP(t, "/readyz")
	time.Sleep(10 * time.Second) // the restore and whatever it costs
	after := r.agent.servingPID(t)
	if got := r.agent.proc.cmd.Process.Pid; got != supervisor {
		t.Errorf("supervisor: got pid %d, want %d kept", got, supervisor)
	}
	restarts := metricSum(t, r.agent.metrics(t), "nodecache_supervisor_restarts_total")
	usage, peak := cgroupInt(t, cg, "memory.usage_in_bytes"), cgroupInt(t, cg, "memory.max_usage_in_bytes")
	t.Logf("after the kill: serving pid %d (was %d), restarts %v, cgroup usage %d MiB (peak %d) of %d MiB",
		after, before, restarts, usage>>20, peak>>20, limit>>20)
	log = r.agent.proc.logTail(1 << 20)
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "journal") || strings.Contains(l, "serving process") || strings.Contains(l, "memory") {
			t.Logf("agent: %s", l)
		}
	}
	if restored := lineWith(log, "restored the cache from the journal"); restored == "" || strings.Contains(restored, "entries=0 ") {
		t.Errorf("agent log: got %q, want the journal restored into the new serving process", restored)
	}
	if !strings.Contains(log, "memory limit from the container's") {
		t.Errorf("agent log: want the cgroup's memory limit found (the journal and the restore are bounded by it)")
	}
	if restarts != 1 {
		t.Errorf("nodecache_supervisor_restarts_total: got %v, want 1 (killed once, not again by its own restore)", restarts)
	}
	if usage >= limit {
		t.Errorf("cgroup usage %d at its limit %d after the restart", usage, limit)
	}
	if a := r.ask(t, query{Name: warm}); !hasData(dns.TypeA, "192.0.2.10")(a) {
		t.Errorf("%s after the OOM kill: got %v, want NOERROR 192.0.2.10", warm, a)
	}
}

// mustHave fails t (under CI=true) or skips it, saying what is missing.
func mustHave(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("needs %s, and CI=true forbids skipping", what)
	}
	t.Skipf("SKIPPING: needs %s", what)
}

// servingOrZero is the agent's serving pid, 0 while there is none.
func servingOrZero(a *runningAgent) int {
	if kids := children(a.proc.cmd.Process.Pid); len(kids) == 1 {
		return kids[0]
	}
	return 0
}

// lineWith is the first line of s containing sub, its spaces squeezed.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}
