package supervise

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// zombieChildren lists the pids of this process's children that have
// exited and not been waited for.
func zombieChildren(t *testing.T) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after it.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] != "Z" || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out = append(out, pid)
	}
	return out
}

// TestReapOrphans: a process orphaned by a child (as pid 1, or a
// subreaper, the supervisor inherits it) is reaped once it exits, and the
// serving process's exit is left for its own Wait.
func TestReapOrphans(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper (stands in for pid 1): %v", err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()
	// The "serving process" starts a subshell that starts a short sleep and
	// exits: the sleep is orphaned to us, and exits while it keeps running.
	serving := exec.Command("sh", "-c", "(sleep 0.05 &) ; exec sleep 0.5")
	if err := serving.Start(); err != nil {
		t.Fatal(err)
	}
	var zombies []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if zombies = zombieChildren(t); len(zombies) > 0 {
			break
		}
	}
	if len(zombies) != 1 || zombies[0] == serving.Process.Pid {
		t.Fatalf("zombie children %v, want the orphaned sleep (the serving process is %d)", zombies, serving.Process.Pid)
	}
	if n := reapOrphans(serving.Process.Pid); n != 1 {
		t.Errorf("reapOrphans reaped %d, want 1", n)
	}
	if z := zombieChildren(t); len(z) != 0 {
		t.Errorf("zombie children after reapOrphans: %v", z)
	}
	// The serving process exits next: left for its Wait, with its status.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(zombieChildren(t)) == 0; time.Sleep(10 * time.Millisecond) {
	}
	if n := reapOrphans(serving.Process.Pid); n != 0 {
		t.Errorf("reapOrphans reaped %d with only the serving process exited, want 0", n)
	}
	if err := serving.Wait(); err != nil || serving.ProcessState.ExitCode() != 0 {
		t.Errorf("the serving process's Wait: %v, exit %d; want its own status, 0", err, serving.ProcessState.ExitCode())
	}
}
