package agent

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"
)

// fakeCgroupRoot lays out /proc/self/cgroup and cgroupfs files under a
// temporary root, path (relative to root) to content.
func fakeCgroupRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const mib = 1 << 20

// TestCgroupMemory reads the limit where each kind of node puts it.
func TestCgroupMemory(t *testing.T) {
	for _, c := range []struct {
		name         string
		files        map[string]string
		limit, usage int64
		ok           bool
	}{
		{"v2, the process's own cgroup (host view)", map[string]string{
			"proc/self/cgroup": "0::/kubepods/burstable/pod1/abc\n",
			"sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max":     "268435456\n",
			"sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.current": "52428800\n",
		}, 256 * mib, 50 * mib, true},
		{"v2, a container with its own cgroup namespace", map[string]string{
			"proc/self/cgroup":             "0::/\n",
			"sys/fs/cgroup/memory.max":     "134217728\n",
			"sys/fs/cgroup/memory.current": "1048576\n",
		}, 128 * mib, 1 * mib, true},
		{"v2, no limit", map[string]string{
			"proc/self/cgroup":             "0::/\n",
			"sys/fs/cgroup/memory.max":     "max\n",
			"sys/fs/cgroup/memory.current": "1048576\n",
		}, 0, 0, false},
		{"v1 (hybrid): the memory controller's cgroup", map[string]string{
			"proc/self/cgroup": "12:pids:/kubepods/pod1/abc\n11:memory:/kubepods/pod1/abc\n0::/\n",
			"sys/fs/cgroup/memory/kubepods/pod1/abc/memory.limit_in_bytes": "268435456\n",
			"sys/fs/cgroup/memory/kubepods/pod1/abc/memory.usage_in_bytes": "73400320\n",
		}, 256 * mib, 70 * mib, true},
		{"v1, a container's namespace root", map[string]string{
			"proc/self/cgroup":                           "4:cpu,cpuacct:/\n3:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "1048576\n",
		}, 512 * mib, 1 * mib, true},
		{"v1, no limit (the page-rounded MaxInt64)", map[string]string{
			"proc/self/cgroup":                           "3:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "1048576\n",
		}, 0, 0, false},
		{"no cgroup files", map[string]string{"proc/self/cgroup": "0::/\n"}, 0, 0, false},
		{"garbage", map[string]string{
			"proc/self/cgroup":             "0::/\n",
			"sys/fs/cgroup/memory.max":     "lots\n",
			"sys/fs/cgroup/memory.current": "1\n",
		}, 0, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			limit, usage, ok := cgroupMemoryAt(fakeCgroupRoot(t, c.files))
			if ok != c.ok || (ok && (limit != c.limit || usage != c.usage)) {
				t.Errorf("got limit %d, usage %d, ok %v; want %d, %d, %v", limit, usage, ok, c.limit, c.usage, c.ok)
			}
		})
	}
}

func TestGoMemLimit(t *testing.T) {
	for _, c := range []struct{ limit, journal, want int64 }{
		{256 * mib, 0, 256*mib - 256*mib/10},                 // 230.4 MiB, the DaemonSet's 256Mi unsupervised
		{256 * mib, 32 * mib, 256*mib - 256*mib/10 - 32*mib}, // supervised: the journal's eighth
		{64 * mib, 60 * mib, 32 * mib},                       // never below half the limit
	} {
		if got := goMemLimit(c.limit, c.journal); got != c.want {
			t.Errorf("goMemLimit(%d, %d) = %d, want %d", c.limit, c.journal, got, c.want)
		}
	}
	for _, c := range []struct {
		size, limit int64
		bounded     bool
		cache, want int64
	}{
		{4 * mib, 256 * mib, true, 64 * mib, 4 * mib},   // the default size
		{64 * mib, 256 * mib, true, 64 * mib, 32 * mib}, // an eighth of the limit
		{64 * mib, 0, false, 16 * mib, 16 * mib},        // the cache budget
		{4 * mib, 1 * mib, true, 64 * mib, 256 << 10},   // at least the smallest ring
		{0, 256 * mib, true, 64 * mib, 0},               // none
	} {
		if got := journalCap(c.size, c.limit, c.bounded, c.cache); got != c.want {
			t.Errorf("journalCap(%d, %d, %v, %d) = %d, want %d", c.size, c.limit, c.bounded, c.cache, got, c.want)
		}
	}
}

// TestApplyMemoryLimit: the soft limit follows the container's limit, and
// an operator's GOMEMLIMIT stands.
func TestApplyMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	log := slog.New(slog.DiscardHandler)
	limited := fakeCgroupRoot(t, map[string]string{
		"proc/self/cgroup":             "0::/\n",
		"sys/fs/cgroup/memory.max":     strconv.Itoa(256*mib) + "\n",
		"sys/fs/cgroup/memory.current": "0\n",
	})
	unlimited := fakeCgroupRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n", "sys/fs/cgroup/memory.current": "0\n"})

	t.Run("from the cgroup", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		unsetenv(t, "GOMEMLIMIT")
		debug.SetMemoryLimit(math.MaxInt64)
		for _, c := range []struct {
			supervised bool
			want       int64
		}{{false, goMemLimit(256*mib, 0)}, {true, goMemLimit(256*mib, 4*mib)}} {
			got, src := applyMemoryLimit(log, limited, c.supervised, 4*mib, 64*mib)
			if got != c.want || src != "cgroup" || debug.SetMemoryLimit(-1) != c.want {
				t.Errorf("supervised %v: got %d from %q, runtime %d; want %d from the cgroup", c.supervised, got, src, debug.SetMemoryLimit(-1), c.want)
			}
		}
	})
	t.Run("no cgroup limit", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "")
		unsetenv(t, "GOMEMLIMIT")
		debug.SetMemoryLimit(math.MaxInt64)
		if got, src := applyMemoryLimit(log, unlimited, false, 4*mib, 64*mib); got != math.MaxInt64 || src != "" {
			t.Errorf("got %d from %q, want no limit", got, src)
		}
	})
	t.Run("set by the operator", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "100MiB")
		debug.SetMemoryLimit(100 * mib) // what the runtime read from GOMEMLIMIT at start
		if got, src := applyMemoryLimit(log, limited, false, 4*mib, 64*mib); got != 100*mib || src != "GOMEMLIMIT" {
			t.Errorf("got %d from %q, want the operator's 100MiB", got, src)
		}
		if got := debug.SetMemoryLimit(-1); got != 100*mib {
			t.Errorf("runtime limit %d, want the operator's %d untouched", got, 100*mib)
		}
	})
}
