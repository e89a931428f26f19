package adminapi

import (
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// The answers of PathCacheStats, PathCacheDump (a list), PathZoneList and
// PathZoneShow (lists) and PathPod are the components' own types:
// cache.Stats, cache.EntryInfo, kubezone.Record and kubezone.PodInfo.

// Status is the answer of PathStatus.
type Status struct {
	Version   string            `json:"version"`
	Uptime    string            `json:"uptime"`
	Listeners []string          `json:"listeners"`
	Serving   bool              `json:"serving"`
	NotReady  []string          `json:"not_ready,omitempty"` // why the agent is not ready; empty when it is
	Interface iface.Status      `json:"interface"`
	Zone      *kubezone.Stats   `json:"zone,omitempty"` // nil when the agent serves no cluster zone
	Cache     cache.Stats       `json:"cache"`
	Upstreams []Upstream        `json:"upstreams"`
	Totals    Totals            `json:"totals"`
	Config    map[string]string `json:"config"` // flag name → value, for the flags an operator asks about
	// ConfigGeneration is 1 at start and grows with each reload applied;
	// ConfigError is why the last reload was refused (empty after one
	// that applied).
	ConfigGeneration uint64 `json:"config_generation"`
	ConfigError      string `json:"config_error,omitempty"`
	// DowngradeRefused lists the kube-dns ConfigMap's upstreamNameservers
	// while they are not used because they would replace DNS over TLS
	// upstreams with plain ones; empty otherwise.
	DowngradeRefused []string `json:"downgrade_refused,omitempty"`
	// Supervisor is nil when no supervisor keeps the agent's sockets
	// (--supervise=false).
	Supervisor *Supervisor `json:"supervisor,omitempty"`
}

// Supervisor is what the serving process knows of its supervisor.
type Supervisor struct {
	Restarts    int       `json:"restarts"`             // serving processes started after one died
	CrashLoop   string    `json:"crash_loop,omitempty"` // why it is one; empty when not
	LastDeath   string    `json:"last_death,omitempty"` // how the last serving process ended
	LastDeathAt time.Time `json:"last_death_at,omitzero"`
	// JournalBytes is the memory the cache journal the supervisor keeps
	// holds (cache.JournalStats.Bytes: its file's allocated blocks, at
	// least its size: the whole ring once allocated at start), not the bytes
	// written.
	JournalBytes int64 `json:"journal_bytes"`
	// InProcess says the supervisor runs in a nodecache process, not as
	// nodecache-supervisor; InProcessReason says why (none beside the
	// nodecache binary, not executable, its exec failed).
	InProcess       bool   `json:"in_process,omitempty"`
	InProcessReason string `json:"in_process_reason,omitempty"`
}

// Reload is the answer of PathReload: the generation serving afterwards,
// and why the reload was refused (empty when it applied).
type Reload struct {
	Generation uint64 `json:"generation"`
	Error      string `json:"error,omitempty"`
}

// Upstream is one upstream server in the answers of PathUpstreams and
// PathStatus.
type Upstream struct {
	Addr             string  `json:"addr"`
	Up               bool    `json:"up"`
	ConsecutiveFails int64   `json:"consecutive_fails"`
	LastRTTMillis    float64 `json:"last_rtt_ms"`
	Requests         uint64  `json:"requests"`
	Errors           uint64  `json:"errors"`
}

// Query is the answer of PathQuery: one query asked through the agent's
// own resolution path, its records in presentation format.
type Query struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Rcode  string   `json:"rcode"`
	Source string   `json:"source"`           // zone, cache, stale, upstream, ...
	Server string   `json:"server,omitempty"` // the upstream that answered, if one did
	Micros int64    `json:"took_us"`
	Answer []string `json:"answer"` // never null
	Ns     []string `json:"authority,omitempty"`
	Extra  []string `json:"additional,omitempty"` // without the OPT record
	Flags  string   `json:"flags"`                // "aa rd ra", space separated
}

// Flush is the answer of PathCacheFlush: Flushed entries for Name (that
// name, every type), at or below Zone, or All of them.
type Flush struct {
	Flushed int    `json:"flushed"`
	Name    string `json:"name,omitempty"`
	Zone    string `json:"zone,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// FlushScope says which entries a flush removes: exactly one of Name,
// Zone and All is set.
type FlushScope struct {
	Name string // that name, every type
	Zone string // that name and every name below it
	All  bool   // every entry
}

// Top is the answer of PathTop: cumulative counters since start.
type Top struct {
	Clients []ClientRow `json:"clients"`
	Totals  Totals      `json:"totals"`
	Time    time.Time   `json:"time"`
}

// ClientRow is one client's cumulative counters.
type ClientRow struct {
	IP        string  `json:"ip"`
	Pod       string  `json:"pod,omitempty"` // namespace/name of the node's pod with that IP
	Queries   uint64  `json:"queries"`
	NXDomain  uint64  `json:"nxdomain"`
	AvgMicros float64 `json:"avg_latency_us"`
}

// Totals is the agent-wide part of Top and Status.
type Totals struct {
	Queries   uint64            `json:"queries"`
	NXDomain  uint64            `json:"nxdomain"`
	AvgMicros float64           `json:"avg_latency_us"`
	Rcodes    map[string]uint64 `json:"rcodes"`
	Sources   map[string]uint64 `json:"sources"`
}

// TailLine is one query as PathTail streams it (one JSON object a line)
// and `tail -o json` prints it.
type TailLine struct {
	Time     time.Time `json:"time"`
	Client   string    `json:"client"`
	Pod      string    `json:"pod,omitempty"` // namespace/name of the node's pod with that IP
	Name     string    `json:"name"`
	Type     string    `json:"type"`
	Rcode    string    `json:"rcode"`
	Source   string    `json:"source"`
	Micros   int64     `json:"took_us"`
	Upstream string    `json:"upstream,omitempty"`
	Dropped  uint64    `json:"dropped"` // lines this reader lost so far
}

// TailFilter selects the lines of PathTail; zero fields match everything.
type TailFilter struct {
	Pod        string        // NAME or NAMESPACE/NAME
	Namespace  string        // pods of this namespace
	Suffix     string        // names at or below this suffix
	Rcode      string        // NOERROR, NXDOMAIN, ...
	MinLatency time.Duration // answers that took at least this long
}
