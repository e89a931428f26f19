package agent

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/nodecache/nodecache/pkg/cache"
)

// The Go runtime's soft memory limit (GOMEMLIMIT), derived at start from
// the container's memory limit, so that the manifests state the limit once
// and the heap stays under it before the OOM killer acts.

// memLimitHeadroom is the share of the cgroup limit left outside the Go
// heap (1/memLimitHeadroom): what the runtime does not count against
// GOMEMLIMIT, and the iptables processes the agent starts, which run in the
// same cgroup. At 256Mi it leaves 25.6 MiB, GOMEMLIMIT 230 MiB.
const memLimitHeadroom = 10

// journalCap is the cache journal's size: --cache-journal-size, no more
// than the cache budget nor, when bounded, an eighth of the cgroup limit,
// and at least the smallest ring; zero when size is (no journal). The
// journal is a memfd, charged to the same cgroup as the heap.
func journalCap(size, limit int64, bounded bool, cacheSize int64) int64 {
	if size <= 0 {
		return 0
	}
	size = min(size, cacheSize)
	if bounded {
		size = min(size, limit/8)
	}
	return max(size, cache.MinJournalBytes)
}

// goMemLimit is the soft limit for a cgroup limit of limit bytes when
// journal bytes of it may go to the cache journal: the limit less the
// headroom and the journal, and never below half the limit.
func goMemLimit(limit, journal int64) int64 {
	return max(limit-limit/memLimitHeadroom-journal, limit/2)
}

// applyMemoryLimit sets the runtime's soft memory limit from the memory
// limit of the cgroup under root ("/" in production), unless the operator
// set GOMEMLIMIT, which then stands. supervised says the cache journal runs
// beside the heap. It returns the limit in effect and where it came from:
// "GOMEMLIMIT", "cgroup", or "" (no limit: none set and none found).
func applyMemoryLimit(log *slog.Logger, root string, supervised bool, journalSize, cacheSize int64) (int64, string) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		n := debug.SetMemoryLimit(-1)
		log.Debug("memory limit from GOMEMLIMIT", "gomemlimit", v, "bytes", n)
		return n, "GOMEMLIMIT"
	}
	limit, _, ok := cgroupMemoryAt(root)
	if !ok {
		return debug.SetMemoryLimit(-1), ""
	}
	var journal int64
	if supervised {
		journal = journalCap(journalSize, limit, true, cacheSize)
	}
	soft := goMemLimit(limit, journal)
	if soft <= 0 || soft == math.MaxInt64 {
		return debug.SetMemoryLimit(-1), ""
	}
	debug.SetMemoryLimit(soft)
	log.Info("memory limit from the container's", "cgroup_limit_bytes", limit, "gomemlimit_bytes", soft, "journal_max_bytes", journal)
	return soft, "cgroup"
}
