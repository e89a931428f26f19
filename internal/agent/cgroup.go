package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The memory limit of the agent's cgroup and what it uses, cgroup v2 or v1
// (the memory controller of a hybrid hierarchy), for GOMEMLIMIT (memlimit.go),
// the journal's bounds and nodecache_memory_limit_bytes.

// noLimit is where a v1 limit means none (the page-rounded MaxInt64).
const noLimit = 1 << 62

// cgroupMemory returns the memory limit of this process's cgroup and its
// current usage; false when there is no limit or it cannot be read.
func cgroupMemory() (limit, usage int64, ok bool) { return cgroupMemoryAt("/") }

// cgroupMemoryAt is cgroupMemory with /proc and /sys under root.
func cgroupMemoryAt(root string) (limit, usage int64, ok bool) {
	for _, c := range cgroupMemoryFiles(root) {
		l, lok := readCgroupInt(c.limit)
		u, uok := readCgroupInt(c.usage)
		if lok && uok {
			return l, u, l < noLimit
		}
	}
	return 0, 0, false
}

// cgroupMemoryLimit is cgroupMemory's limit alone.
func cgroupMemoryLimit() (int64, bool) {
	l, _, ok := cgroupMemory()
	return l, ok
}

type cgroupFiles struct{ limit, usage string }

// cgroupMemoryFiles lists where this process's limit and usage may be,
// most specific first: its own cgroup's directory (on the host), then the
// mount's root (in a container with its own cgroup namespace).
func cgroupMemoryFiles(root string) []cgroupFiles {
	var v1, v2 string
	if f, err := os.Open(filepath.Join(root, "proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			parts := strings.SplitN(sc.Text(), ":", 3)
			switch {
			case len(parts) != 3:
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case strings.Contains(","+parts[1]+",", ",memory,"):
				v1 = parts[2]
			}
		}
		_ = f.Close()
	}
	fs := filepath.Join(root, "sys/fs/cgroup")
	var out []cgroupFiles
	if v2 != "" {
		d := filepath.Join(fs, v2)
		out = append(out, cgroupFiles{filepath.Join(d, "memory.max"), filepath.Join(d, "memory.current")})
	}
	out = append(out, cgroupFiles{filepath.Join(fs, "memory.max"), filepath.Join(fs, "memory.current")})
	if v1 != "" {
		d := filepath.Join(fs, "memory", v1)
		out = append(out, cgroupFiles{filepath.Join(d, "memory.limit_in_bytes"), filepath.Join(d, "memory.usage_in_bytes")})
	}
	return append(out, cgroupFiles{filepath.Join(fs, "memory/memory.limit_in_bytes"), filepath.Join(fs, "memory/memory.usage_in_bytes")})
}

// readCgroupInt reads a cgroup file holding a number; "max" is no limit.
func readCgroupInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return noLimit, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
