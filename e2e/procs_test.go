//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The agent's processes: `nodecache run` is a supervisor (the process the
// test started) and its serving process, a child of it.

// pids returns the agent's supervisor and then its serving process(es).
func (a *runningAgent) pids(t testing.TB) []int {
	t.Helper()
	pid := a.proc.cmd.Process.Pid
	return append([]int{pid}, children(pid)...)
}

// servingPID returns the pid of the agent's serving process; it fails t
// unless there is exactly one.
func (a *runningAgent) servingPID(t testing.TB) int {
	t.Helper()
	kids := children(a.proc.cmd.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("the agent's supervisor has children %v, want one serving process", kids)
	}
	return kids[0]
}

// children lists pid's child processes (from every thread's children file).
func children(pid int) []int {
	var out []int
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// procState is the one-letter state of pid ("R", "S", "T", ...), empty
// when it cannot be read.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
	_, rest, _ := strings.Cut(string(b[strings.LastIndexByte(string(b), ')'):]), " ")
	if rest == "" {
		return ""
	}
	return rest[:1]
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// checkBinaries checks that the supervisor runs its own binary
// (nodecache-supervisor, which `nodecache run` execs) and the serving
// process nodecache, and logs what each keeps resident.
func checkBinaries(t testing.TB, supervisor, serving int) {
	t.Helper()
	for _, p := range []struct {
		pid  int
		want string
	}{{supervisor, "nodecache-supervisor"}, {serving, "nodecache"}} {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
		if err != nil || filepath.Base(exe) != p.want {
			t.Errorf("process %d runs %q (%v), want %s", p.pid, exe, err, p.want)
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
		var mem []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "RssAnon:") || strings.HasPrefix(l, "RssFile:") {
				mem = append(mem, strings.Join(strings.Fields(l), " "))
			}
		}
		t.Logf("process %d runs %s: %s", p.pid, exe, strings.Join(mem, ", "))
	}
}
