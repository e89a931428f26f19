//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// realNodeOOMRoom is what the OOM step's memory limit leaves the agent's
// container above what it uses: the 64 MiB cache a unique-name flood
// fills, with the Go runtime's soft limit still set from the manifest's
// 256Mi, does not fit in it.
const realNodeOOMRoom = 40 << 20

// checkServingOOM gets the agent's serving process OOM-killed under the
// client's steady load: the container's memory cgroup is given a limit
// 40 MiB above its usage, in place (what a lower resources.limits.memory gives a container,
// without the rollout that changing the manifest would cost), and a
// dnsperf flood of unique names from the node grows the cache past it.
// The kernel must pick the serving process, whose oom_score_adj the
// supervisor raised, not the supervisor; the supervisor restarts it on the
// kept sockets with the journal, the container is not restarted, and the
// new process, its restore bounded by the memory then free, is not killed
// again. The old limit is put back at the end.
func (n *realNode) checkServingOOM(ctx context.Context, client *corev1.Pod, metricsPort int) {
	t := n.t
	if _, err := exec.LookPath("dnsperf"); err != nil {
		t.Fatalf("the OOM step needs dnsperf: %v", err)
	}
	agent, supervisor, serving := n.servingProcess(ctx)
	before := restartCount(&agent)
	supScore, servScore := procInt(supervisor, "oom_score"), procInt(serving, "oom_score")
	t.Logf("oom: supervisor %d oom_score_adj %d oom_score %d; serving process %d oom_score_adj %d oom_score %d",
		supervisor, procInt(supervisor, "oom_score_adj"), supScore, serving, procInt(serving, "oom_score_adj"), servScore)
	if servScore <= supScore {
		t.Errorf("oom_score: serving process %d, supervisor %d: want the serving process the kernel's pick", servScore, supScore)
	}
	cg := memoryCgroupOf(t, supervisor)
	oldLimit := cgroupInt(t, cg, "memory.limit_in_bytes")
	limit := (cgroupInt(t, cg, "memory.usage_in_bytes") + realNodeOOMRoom) &^ (1<<20 - 1)
	setCgroup(t, cg, "memory.limit_in_bytes", limit)
	defer setCgroup(t, cg, "memory.limit_in_bytes", oldLimit)
	kills0 := oomKills(t, cg)

	// The exit is seen through a pidfd and a probe query goes into the
	// kept sockets at once: the gap is measured from the exit itself.
	watch, err := watchExit(serving, supervisor, probeUDP(n.ns, "web."+clientNS+".svc.cluster.local.", dns.RcodeSuccess))
	if err != nil {
		t.Fatal(err)
	}
	samples := n.sampleCache(ctx, metricsPort)
	time.Sleep(1500 * time.Millisecond) // the second before the flood: the client's load alone
	file := floodNames(t, 400000)
	note := fmt.Sprintf("nodecache-e2e: oom flood %d", time.Now().UnixNano())
	kmsgNote(note)
	floodAt := time.Now()
	flood := exec.Command("ip", "netns", "exec", n.ns.Name, "dnsperf", "-s", linkLocalIP, "-d", file,
		"-l", "120", "-Q", "10000", "-q", "90", "-t", "1")
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	var next, first int // the new serving process: when the kill was seen, and at the end
	eventuallyWithin(t, 120*time.Second, "the serving process OOM-killed", func() error {
		k := children(supervisor)
		if oomKills(t, cg) > kills0 && processGone(serving) {
			if len(k) == 1 && k[0] != serving {
				next = k[0]
			}
			return nil
		}
		return fmt.Errorf("serving process %d, cgroup usage %d MiB of %d", serving,
			cgroupInt(t, cg, "memory.usage_in_bytes")>>20, limit>>20)
	})
	_ = flood.Process.Kill()
	_ = flood.Wait()
	first = next
	watch.wait(15 * time.Second)
	killedAt, firstAnswer := watch.exitAt, watch.firstAnswer()
	if firstAnswer == 0 {
		t.Fatalf("no answer to %d probes in 10 s after the serving process's exit: %v", watch.probes, watch.err)
	}
	time.Sleep(10 * time.Second) // the restore, whatever it costs, and the client's last seconds
	secs := samples.stop()
	after := n.waitAgents(ctx, 1, time.Minute)[0]
	if k := children(supervisor); len(k) == 1 {
		next = k[0]
	}
	w := summarize(n.clientSeconds(client), killedAt.Add(-time.Second), killedAt.Add(firstAnswer+2*time.Second))
	usage, kills := cgroupInt(t, cg, "memory.usage_in_bytes"), oomKills(t, cg)
	t.Logf("oom: flood of unique names for %v until the kernel killed the serving process %d (supervisor %d kept, new serving pid %d); "+
		"first answer %v after its exit (oom: gap: below has the kernel's kill); restartCount %d -> %d; OOM kills in the cgroup %d; usage now %d MiB of %d; client around it %s",
		killedAt.Sub(floodAt).Round(time.Millisecond), serving, supervisor, next, firstAnswer.Round(time.Millisecond),
		before, restartCount(&after), kills-kills0, usage>>20, limit>>20, w)
	pre := secs.ratio(floodAt.Add(-time.Second), floodAt)
	t.Logf("oom: cache hit ratio %s in the second before the flood (the client's load alone)", pre)
	for i := range 3 {
		from := killedAt.Add(firstAnswer + time.Duration(i)*time.Second)
		t.Logf("oom: cache hit ratio %s in second %d after the first answer", secs.ratio(from, from.Add(time.Second)), i+1)
	}
	if logs, err := n.podLogs(ctx, &after); err == nil {
		t.Logf("oom: gap: %s", gapReport(watch, logs))
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "restored the cache from the journal") || strings.Contains(l, "serving process died") ||
				strings.Contains(l, "memory limit from the container's") {
				t.Logf("agent: %s", strings.Join(strings.Fields(l), " "))
			}
		}
	}

	// The kernel must kill the serving process, and neither the supervisor
	// nor the serving process that replaced it. In the same out-of-memory
	// episode, the 1-4 ms before the new process has even started, the
	// kernel has also killed the kubelet's exec probe whose start met the
	// limit (runc's init, or `nodecache probe` before it raises its
	// oom_score_adj; 5 of 27 runs): that is the kubelet's process, one probe
	// failed, not nodecache killed again, and it is logged, not failed.
	if victims, ok := oomVictimsAfter(note, cg); ok {
		t.Logf("oom: the kernel's victims since the flood began: %v (serving %d, supervisor %d, new serving %d then %d)",
			victims, serving, supervisor, first, next)
		if len(victims) == 0 || victims[0].pid != serving {
			t.Errorf("OOM victims %v: want the serving process %d first", victims, serving)
		}
		for _, v := range victims[min(1, len(victims)):] {
			if v.pid == supervisor || v.pid == first || v.pid == next || v.pid == serving {
				t.Errorf("OOM victims %v: pid %d (%s) is nodecache's own (supervisor %d, serving %d, new serving %d then %d): want it killed once, the serving process only",
					victims, v.pid, v.comm, supervisor, serving, first, next)
			}
		}
	} else if kills-kills0 != 1 {
		t.Errorf("OOM kills in the agent's cgroup %d (no kernel log to name the victims): want one kill, of the serving process", kills-kills0)
	}
	if processGone(supervisor) || next == 0 || (first != 0 && first != next) {
		t.Errorf("supervisor %d gone %v, new serving process %d then %d: want the supervisor kept and one new serving process that stays",
			supervisor, processGone(supervisor), first, next)
	}
	if got := restartCount(&after); got != before || after.UID != agent.UID {
		t.Errorf("after the OOM kill: pod %s restartCount %d, want the same pod with %d", after.Name, got, before)
	}
	if w.lost > 0 || w.rcodes["error"] > 0 || w.rcodes["SERVFAIL"] > 0 {
		t.Errorf("client around the OOM kill: %s, want nothing lost, no error, no SERVFAIL", w)
	}
	if usage >= limit {
		t.Errorf("cgroup usage %d MiB at its %d MiB limit after the restart", usage>>20, limit>>20)
	}
	// The backlog of flood queries the kept sockets held goes to the new
	// process as misses in its first second; the client's own load is
	// alone from the second after.
	from := killedAt.Add(firstAnswer + time.Second)
	if post := secs.ratio(from, from.Add(time.Second)); !post.ok() || !pre.ok() || post.value() < pre.value()-0.05 {
		t.Errorf("cache hit ratio: %s in the second after the flood's backlog, %s before the flood: want within 5 points (the journal restores the names in use)", post, pre)
	}
	if err := n.hostStateProblems(); err != nil {
		t.Errorf("after the OOM kill: %v", err)
	}
}

// procInt reads /proc/pid/name as an integer; -1 when it cannot.
func procInt(pid int, name string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}

// memoryCgroupOf is the cgroup v1 memory directory of pid.
func memoryCgroupOf(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ",memory,") {
			dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
			if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err != nil {
				t.Fatalf("memory cgroup of %d: %v", pid, err)
			}
			return dir
		}
	}
	t.Fatalf("no cgroup v1 memory controller for %d in:\n%s", pid, b)
	return ""
}

func setCgroup(t testing.TB, dir, file string, v int64) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(v, 10)), 0o644); err != nil {
		t.Errorf("setting %s of %s to %d: %v", file, dir, v, err)
	}
}

// oomKills is the cgroup's count of processes the OOM killer killed.
func oomKills(t testing.TB, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("no oom_kill count in %s/memory.oom_control:\n%s", dir, b)
	return 0
}

// cacheSample is the agent's cache counters at one moment.
type cacheSample struct {
	at           time.Time
	hits, misses float64
}

type cacheSamples []cacheSample

// hitRatio is a ratio of hits over lookups, with the counts.
type hitRatio struct{ hits, misses float64 }

func (r hitRatio) ok() bool       { return r.hits+r.misses > 0 }
func (r hitRatio) value() float64 { return r.hits / (r.hits + r.misses) }
func (r hitRatio) String() string {
	if !r.ok() {
		return "n/a (no lookups)"
	}
	return fmt.Sprintf("%.3f (%.0f hits, %.0f misses)", r.value(), r.hits, r.misses)
}

// ratio is the hit ratio between the samples nearest from and to. A
// counter that went back (a new serving process starts from its own) is
// read from its new start.
func (s cacheSamples) ratio(from, to time.Time) hitRatio {
	var r hitRatio
	var prev *cacheSample
	for i := range s {
		c := &s[i]
		if c.at.Before(from) {
			prev = c
			continue
		}
		if c.at.After(to) {
			break
		}
		if prev != nil {
			if c.hits >= prev.hits && c.misses >= prev.misses {
				r.hits += c.hits - prev.hits
				r.misses += c.misses - prev.misses
			} else {
				r.hits += c.hits
				r.misses += c.misses
			}
		}
		prev = c
	}
	return r
}

// sampler reads the agent's cache counters every 100 ms from the node's
// network namespace until stop.
type sampler struct {
	mu     sync.Mutex
	s      cacheSamples
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *sampler) stop() cacheSamples {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s
}

func (n *realNode) sampleCache(ctx context.Context, port int) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for ctx.Err() == nil {
			var text string
			err := n.ns.do(func() error {
				var err error
				text, err = httpGetRaw(fmt.Sprintf("127.0.0.1:%d", port), "/metrics")
				return err
			})
			if err == nil {
				c := cacheSample{at: time.Now(), hits: metricSum(n.t, text, "nodecache_cache_hits_total"),
					misses: metricSum(n.t, text, "nodecache_cache_misses_total")}
				s.mu.Lock()
				s.s = append(s.s, c)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return s
}

// httpGetRaw is an HTTP/1.0 GET on a connection dialled by the calling
// goroutine (so in the network namespace its thread is in).
func httpGetRaw(addr, path string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return "", err
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	return string(b), err
}
