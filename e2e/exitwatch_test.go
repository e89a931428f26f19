//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// exitWatch follows the end of one process through a pidfd: the moment
// its exit is seen, the DNS sockets' receive queues then, and the first
// answer to probe queries sent from then on, so that the gap to the first
// answer is measured from the exit itself, not from a poll that saw it
// later.
type exitWatch struct {
	pid  int
	done chan struct{}
	stop chan struct{}

	// Set before done is closed.
	exitAt   time.Time
	queues   udpQueues // the port-53 sockets' queues when the exit was seen
	answerAt time.Time // zero when no probe was answered
	probes   int
	err      error
}

// udpQueues sums the receive queues of the UDP sockets on port 53 in a
// network namespace: rx is the bytes queued (each datagram counts its
// buffer's truesize, not its length), drops what each socket dropped since
// it was made.
type udpQueues struct {
	sockets   int
	rx, drops int64
}

func (q udpQueues) String() string {
	return fmt.Sprintf("%d KiB queued over %d sockets (%d dropped since they were made)", q.rx>>10, q.sockets, q.drops)
}

// readUDPQueues reads /proc/PID/net/udp: the namespace of pid.
func readUDPQueues(pid int) (udpQueues, error) {
	var q udpQueues
	f, err := os.Open(fmt.Sprintf("/proc/%d/net/udp", pid))
	if err != nil {
		return q, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local rem st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
		fl := strings.Fields(sc.Text())
		if len(fl) < 13 || !strings.HasSuffix(fl[1], ":0035") {
			continue
		}
		_, rx, _ := strings.Cut(fl[4], ":")
		n, err := strconv.ParseInt(rx, 16, 64)
		if err != nil {
			return q, fmt.Errorf("rx_queue %q: %w", fl[4], err)
		}
		d, _ := strconv.ParseInt(fl[12], 10, 64)
		q.sockets++
		q.rx += n
		q.drops += d
	}
	return q, sc.Err()
}

// watchExit watches pid until it exits or stop is called. At the exit it
// marks the kernel log (kmsgMark), reads the UDP queues of netPID's network
// namespace and then calls probe, which sends one query and says whether
// it was answered, until it is, for up to 10 s.
func watchExit(pid, netPID int, probe func() error) (*exitWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	w := &exitWatch{pid: pid, done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer unix.Close(fd)
		for {
			select {
			case <-w.stop:
				w.err = fmt.Errorf("process %d did not exit", pid)
				return
			default:
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 100)
			if err == unix.EINTR || err == nil && n == 0 {
				continue
			}
			if err != nil {
				w.err = fmt.Errorf("polling the pidfd of %d: %w", pid, err)
				return
			}
			break
		}
		w.exitAt = time.Now()
		kmsgMark(pid)
		w.queues, w.err = readUDPQueues(netPID)
		deadline := w.exitAt.Add(10 * time.Second)
		for time.Now().Before(deadline) {
			w.probes++
			if w.err = probe(); w.err == nil {
				w.answerAt = time.Now()
				return
			}
		}
	}()
	return w, nil
}

// wait waits for the watch's end, at most d; it stops the watch if pid has
// not exited by then.
func (w *exitWatch) wait(d time.Duration) {
	select {
	case <-w.done:
	case <-time.After(d):
		close(w.stop)
		<-w.done
	}
}

// firstAnswer is the time from the exit to the first answer, 0 without one.
func (w *exitWatch) firstAnswer() time.Duration {
	if w.answerAt.IsZero() {
		return 0
	}
	return w.answerAt.Sub(w.exitAt)
}

// probeUDP is one query for name to the link-local IP from ns, with a
// 300 ms timeout, answered with rcode.
func probeUDP(ns *netNS, name string, rcode int) func() error {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	return func() error {
		return ns.do(func() error {
			r, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(q, linkLocalIP+":53")
			if err != nil {
				return err
			}
			if r.Rcode != rcode {
				return fmt.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
			}
			return nil
		})
	}
}

const kmsgPrefix = "nodecache-e2e: exit seen of pid "

// kmsgMark writes a line to the kernel log at the moment the test saw pid
// exit, so that the kernel's own lines on it (the OOM kill, the reaper)
// are timed against it on the kernel's clock.
func kmsgMark(pid int) {
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		_, _ = fmt.Fprintf(f, "%s%d\n", kmsgPrefix, pid)
		_ = f.Close()
	}
}

// kernelLog is the kernel's log (dmesg), a line each.
func kernelLog() ([]string, error) {
	out, err := exec.Command("dmesg").Output()
	if err != nil {
		return nil, err
	}
	return strings.Split(string(out), "\n"), nil
}

var dmesgLine = regexp.MustCompile(`^\[\s*(\d+\.\d+)\]\s*(.*)$`)

// kernelOOMTimes reads the kernel log for pid's OOM kill: the time from
// the kill to the exit the test saw (kmsgMark), and from the kill to the
// OOM reaper's line; ok is false when the kill's or the mark's line is
// missing.
func kernelOOMTimes(pid int) (killToSeen, killToReaped time.Duration, ok bool) {
	lines, err := kernelLog()
	if err != nil {
		return 0, 0, false
	}
	var kill, reaped, mark float64
	p := strconv.Itoa(pid)
	for _, l := range lines {
		m := dmesgLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[1], 64)
		msg := m[2]
		switch {
		case strings.Contains(msg, "Killed process "+p+" "):
			kill = at
		case strings.Contains(msg, "reaped process "+p+" "):
			reaped = at
		case strings.HasSuffix(msg, kmsgPrefix+p):
			mark = at
		}
	}
	if kill == 0 || mark == 0 {
		return 0, 0, false
	}
	sec := func(s float64) time.Duration {
		return time.Duration(s * float64(time.Second)).Round(100 * time.Microsecond)
	}
	if reaped > 0 {
		killToReaped = sec(reaped - kill)
	}
	return sec(mark - kill), killToReaped, true
}

// logLine is one line of an agent's log: its time and attributes.
type logLine struct {
	at    time.Time
	attrs map[string]string
}

var logAttr = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// lastLogLine finds the last line of an agent's log (text or JSON) that
// holds msg.
func lastLogLine(log, msg string) (logLine, bool) {
	var r logLine
	found := false
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, msg) {
			continue
		}
		r = logLine{attrs: map[string]string{}}
		var js map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &js) == nil {
			for k, v := range js {
				r.attrs[k] = fmt.Sprint(v)
				if f, ok := v.(float64); ok && (k == "took" || k == "waited") {
					r.attrs[k] = time.Duration(f).String() // slog's JSON writes durations in ns
				}
			}
		} else {
			for _, m := range logAttr.FindAllStringSubmatch(l, -1) {
				r.attrs[m[1]] = strings.Trim(m[2], `"`)
			}
		}
		r.at, _ = time.Parse(time.RFC3339Nano, r.attrs["time"])
		found = true
	}
	return r, found
}

// gapReport says where the time from the exit to the first answer went:
// the kernel's side, the supervisor's and the new process's start from
// its log, and the rest, after it read the sockets.
func gapReport(w *exitWatch, log string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit seen (pidfd) -> first answer %v (%d probes); sockets at the exit: %s",
		w.firstAnswer().Round(100*time.Microsecond), w.probes, w.queues)
	if toSeen, toReaped, ok := kernelOOMTimes(w.pid); ok {
		fmt.Fprintf(&b, "; kernel log: OOM kill -> exit seen %v", toSeen)
		if toReaped > 0 {
			fmt.Fprintf(&b, ", -> reaped by the OOM reaper %v", toReaped)
		}
	}
	r, ok := lastLogLine(log, "reading the kept sockets")
	if !ok {
		b.WriteString("; no \"reading the kept sockets\" line in the agent's log")
		return b.String()
	}
	fmt.Fprintf(&b, "; new process (its log): since the death %s, since its exec %s = exec and init %s + build %s + listeners %s (zone start %s) + zone wait %s (restore done then: %s)",
		r.attrs["since_death"], r.attrs["since_start"], r.attrs["exec_init"], r.attrs["build"], r.attrs["listeners"],
		r.attrs["zone_start"], r.attrs["zone_wait"], r.attrs["restore_done"])
	fmt.Fprintf(&b, "; its major faults %s, CPU time %s", r.attrs["major_faults"], r.attrs["cpu_time"])
	death, err1 := time.ParseDuration(r.attrs["since_death"])
	started, err2 := time.ParseDuration(r.attrs["since_start"])
	if err1 == nil && err2 == nil {
		fmt.Fprintf(&b, "; supervisor: death noted -> exec %v", (death - started).Round(100*time.Microsecond))
		if !r.at.IsZero() {
			fmt.Fprintf(&b, ", exit seen -> death noted %v", r.at.Add(-death).Sub(w.exitAt).Round(100*time.Microsecond))
		}
	}
	if !r.at.IsZero() && !w.answerAt.IsZero() {
		fmt.Fprintf(&b, "; exit seen -> reading the sockets %v, reading -> first answer %v",
			r.at.Sub(w.exitAt).Round(100*time.Microsecond), w.answerAt.Sub(r.at).Round(100*time.Microsecond))
	}
	if z, ok := lastLogLine(log, "the cluster zone answers: its queries that waited go on"); ok && z.at.After(r.at) {
		fmt.Fprintf(&b, "; the zone answered %s after reading (synced %s)", z.attrs["after_reading"], z.attrs["synced"])
		if h, ok := lastLogLine(log, "answering the cluster zone's queries that waited for its first list"); ok && h.at.After(r.at) {
			fmt.Fprintf(&b, ", %s of its queries held", h.attrs["held"])
		}
	}
	if h, ok := lastLogLine(log, "answering the queries that waited for the cache's restore"); ok && h.at.After(r.at) {
		fmt.Fprintf(&b, "; %s misses held for the restore, %s", h.attrs["held"], h.attrs["waited"])
	}
	if rs, ok := lastLogLine(log, "restored the cache from the journal"); ok {
		fmt.Fprintf(&b, "; restore: %s entries, took %s", rs.attrs["entries"], rs.attrs["took"])
	}
	return b.String()
}

// oomVictim is a process the kernel's OOM killer killed.
type oomVictim struct {
	pid  int
	comm string
}

var (
	killedProcess = regexp.MustCompile(`Killed process (\d+) \(([^)]*)\)`)
	oomMemcg      = regexp.MustCompile(`oom-kill:.*\boom_memcg=([^,\s]+)`)
)

// kmsgNote writes line to the kernel log; oomVictimsAfter reads from it on.
func kmsgNote(line string) {
	if f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0); err == nil {
		_, _ = fmt.Fprintln(f, line)
		_ = f.Close()
	}
}

// oomVictimsAfter lists, in order, the OOM killer's victims in the kernel
// log after the line note (kmsgNote) whose out-of-memory cgroup is the one
// at cgroupDir (its path ends with the kernel's oom_memcg): other tests'
// kills on the machine are not counted. ok is false when the log cannot be
// read or has no note line.
func oomVictimsAfter(note, cgroupDir string) (victims []oomVictim, ok bool) {
	lines, err := kernelLog()
	if err != nil {
		return nil, false
	}
	memcg := ""
	for _, l := range lines {
		if strings.HasSuffix(l, note) {
			victims, ok = nil, true
			continue
		}
		if m := oomMemcg.FindStringSubmatch(l); m != nil {
			memcg = m[1]
			continue
		}
		if m := killedProcess.FindStringSubmatch(l); ok && m != nil {
			if memcg != "" && strings.HasSuffix(cgroupDir, memcg) {
				pid, _ := strconv.Atoi(m[1])
				victims = append(victims, oomVictim{pid: pid, comm: m[2]})
			}
			memcg = ""
		}
	}
	return victims, ok
}
