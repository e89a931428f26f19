package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// runConfig is every setting of `nodecache run`. Flags fill it; a --config
// YAML file fills what the flags left unset (flags win).
type runConfig struct {
	LocalIPs       []netip.Addr
	Port           uint
	Upstream       string
	StubDomains    listFlag
	KubeDNSConfig  string
	SetupInterface bool
	SetupIPTables  bool
	InterfaceName  string
	IPTablesMode   iface.IPTablesMode
	SyncInterval   time.Duration
	SkipTeardown   bool

	ClusterDomain string
	Kubeconfig    string
	Fixture       string
	NodeName      string
	Pods          kubezone.PodsMode
	TTL           time.Duration
	NegativeTTL   time.Duration
	ZoneSnapshot  string
	SnapshotAge   time.Duration
	RelistSpread  time.Duration

	CacheSize      byteSize
	MaxTTL         time.Duration
	MaxNegativeTTL time.Duration
	StaleMaxAge    time.Duration
	Prefetch       bool

	UpstreamPolicy       upstream.Policy
	UpstreamTLSCA        string
	UpstreamTimeout      time.Duration
	UpstreamDeadline     time.Duration
	MaxUpstreamInFlight  int
	MaxTCPConns          int
	MaxTCPConnsPerClient int
	MaxInFlightPerClient int
	TCPIdleTimeout       time.Duration

	StaticRecords   listFlag
	StaticFiles     listFlag
	StaticTTL       time.Duration
	StaticNoReverse bool
	RewriteNames    listFlag

	Autopath       bool
	ClientQPSLimit float64
	ClientBurst    int

	Dnstap   string
	QueryLog queryLogConfig

	MetricsAddr    string
	Pprof          bool
	HealthAddr     string
	AdminSocket    string
	HandoverSocket string
	HandoverWait   time.Duration
	PodStateDir    string
	PodUID         string
	PodName        string
	PodNamespace   string
	LogLevel       string
	LogFormat      logFormat
	ConfigFile     string

	ConfigCheckInterval time.Duration
	args                []string // the command line, parsed again by a reload
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// ipListFlag is a comma-separated list of IP addresses.
type ipListFlag struct{ ips *[]netip.Addr }

func (f ipListFlag) String() string {
	if f.ips == nil {
		return ""
	}
	var s []string
	for _, ip := range *f.ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ",")
}

func (f ipListFlag) Set(v string) error {
	var out []netip.Addr
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip, err := netip.ParseAddr(part)
		if err != nil {
			return fmt.Errorf("%q is not an IP address", part)
		}
		out = append(out, ip.Unmap())
	}
	if len(out) == 0 {
		return errors.New("empty IP list")
	}
	*f.ips = out
	return nil
}

// byteSize is a size with an optional unit: 67108864, 64MiB, 64Mi, 64MB, 1GiB.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a size (examples: 64MiB, 1GiB, 1048576)", v)
	}
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1e3, "KB": 1e3, "Ki": 1 << 10, "KiB": 1 << 10,
		"M": 1e6, "MB": 1e6, "Mi": 1 << 20, "MiB": 1 << 20,
		"G": 1e9, "GB": 1e9, "Gi": 1 << 30, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB, GiB)", v, unit)
	}
	*b = byteSize(f * mult)
	return nil
}

func newRunFlags(c *runConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.LocalIPs = []netip.Addr{netip.MustParseAddr("169.254.20.10")}
	c.CacheSize = 64 << 20
	fs.Var(ipListFlag{&c.LocalIPs}, "local-ip", "comma list of IPs to serve on; add the kube-dns ClusterIP to intercept it")
	fs.UintVar(&c.Port, "port", 53, "DNS port")
	fs.StringVar(&c.Upstream, "upstream", "/etc/resolv.conf", "comma list of upstream IP[:port] and tls://IP[:853][#SERVER-NAME] (DNS over TLS), or a resolv.conf path")
	fs.Var(&c.StubDomains, "stub-domain", "DOMAIN=IP[:port],... [policy=P] [force-tcp] [timeout=D] [max-concurrent=N] [max-ttl=D] [max-negative-ttl=D]: send DOMAIN to its own resolvers, with its own settings (repeatable)")
	fs.StringVar(&c.KubeDNSConfig, "kube-dns-config-dir", "", "directory of a mounted kube-dns ConfigMap (stubDomains, upstreamNameservers)")
	fs.BoolVar(&c.SetupInterface, "setup-interface", true, "create the interface and its addresses")
	fs.BoolVar(&c.SetupIPTables, "setup-iptables", true, "install NOTRACK and ACCEPT rules")
	fs.StringVar(&c.InterfaceName, "interface-name", "nodelocaldns", "name of the link that carries the local IPs")
	fs.TextVar(&c.IPTablesMode, "iptables-mode", iface.ModeAuto, "iptables backend: auto, nft or legacy")
	durationVar(fs, &c.SyncInterval, "sync-interval", 10*time.Second, "how often interface and rules are re-checked")
	fs.BoolVar(&c.SkipTeardown, "skip-teardown", false, "leave interface and rules in place on exit")

	fs.StringVar(&c.ClusterDomain, "cluster-domain", "cluster.local", "the cluster DNS domain")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig for the cluster zone (default: in-cluster config when in a pod)")
	fs.StringVar(&c.Fixture, "fixture", "", "serve the cluster zone from this YAML of Kubernetes objects instead of an API server")
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, for its pods (default $NODE_NAME)")
	fs.StringVar((*string)(&c.Pods), "pods", "insecure", "pod records: insecure, verified or disabled")
	durationVar(fs, &c.TTL, "ttl", 5*time.Second, "TTL of cluster-zone answers")
	durationVar(fs, &c.NegativeTTL, "negative-ttl", 5*time.Second, "SOA minimum (negative TTL) of the cluster zone")
	fs.StringVar(&c.ZoneSnapshot, "zone-snapshot", "", "file to persist the cluster zone to, and serve from when the API server is unreachable")
	durationVar(fs, &c.RelistSpread, "relist-spread", kubezone.DefaultRelistSpread, "after the API server restarts, wait a random delay below this before relisting, so that agents do not all relist at once (0: relist at once)")
	durationVar(fs, &c.SnapshotAge, "zone-snapshot-max-age", time.Hour, "oldest --zone-snapshot the zone answers from; past it cluster names get SERVFAIL until the API server answers")

	fs.Var(&c.CacheSize, "cache-size", "cache budget in bytes (units: KiB, MiB, GiB)")
	durationVar(fs, &c.MaxTTL, "max-ttl", time.Hour, "cap on cached positive TTLs")
	durationVar(fs, &c.MaxNegativeTTL, "max-negative-ttl", time.Hour, "cap on cached negative TTLs")
	fs.BoolVar(&c.Prefetch, "prefetch", true, "refresh names asked often before they expire (CoreDNS's cache prefetch; false: only on a miss)")
	durationVar(fs, &c.StaleMaxAge, "stale-max-age", time.Hour, "serve expired entries up to this long when upstreams fail (0 disables)")

	fs.StringVar(&c.UpstreamTLSCA, "upstream-tls-ca", "", "PEM file of the CAs that verify DNS over TLS upstreams (tls://IP[:853][#NAME] in --upstream and --stub-domain); default the system's")
	fs.StringVar((*string)(&c.UpstreamPolicy), "upstream-policy", "random", "upstream choice: random, sequential or round_robin")
	durationVar(fs, &c.UpstreamTimeout, "upstream-timeout", 2*time.Second, "timeout of one upstream try")
	durationVar(fs, &c.UpstreamDeadline, "upstream-deadline", 5*time.Second, "overall deadline of a forwarded query")
	fs.IntVar(&c.MaxUpstreamInFlight, "max-upstream-inflight", 1000, "cap on queries in flight upstream; beyond it REFUSED")
	fs.IntVar(&c.MaxTCPConns, "max-tcp-conns", 1000, "cap on client TCP connections")
	fs.IntVar(&c.MaxTCPConnsPerClient, "max-tcp-conns-per-client", 100, "cap on one client IP's TCP connections; beyond it new ones are closed")
	fs.IntVar(&c.MaxInFlightPerClient, "max-inflight-per-client", 100, "cap on one client IP's queries waiting for an upstream answer; beyond it REFUSED")
	durationVar(fs, &c.TCPIdleTimeout, "tcp-idle-timeout", 10*time.Second, "close idle client TCP connections after this")

	fs.Var(&c.StaticRecords, "static-record", "\"IP NAME [NAME...]\": answer NAME with IP before the cache, as a hosts file line (repeatable)")
	fs.Var(&c.StaticFiles, "static-file", "hosts file whose lines are static records; re-read when it changes (repeatable)")
	durationVar(fs, &c.StaticTTL, "static-ttl", time.Hour, "TTL of static record answers")
	fs.BoolVar(&c.StaticNoReverse, "static-no-reverse", false, "do not answer PTR queries for the IPs of static records")
	fs.Var(&c.RewriteNames, "rewrite-name", "\"[exact|suffix] FROM TO [answer auto]\": answer FROM with what TO resolves to (repeatable)")
	fs.BoolVar(&c.Autopath, "autopath", false, "answer a pod's first search-path query for its whole search path (ends the ndots:5 storm)")
	fs.Float64Var(&c.ClientQPSLimit, "client-qps-limit", 0, "per-client-IP query rate limit; beyond it REFUSED (0: no limit)")
	fs.IntVar(&c.ClientBurst, "client-burst", 0, "burst of --client-qps-limit (default: the limit, at least 1)")
	fs.StringVar(&c.Dnstap, "dnstap", "", "send dnstap messages (client and upstream queries and replies) to unix:///PATH or tcp://HOST:PORT")
	c.QueryLog.register(fs)
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "Prometheus listener host:port (default <first local IP>:9253)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve net/http/pprof under /debug/pprof/ on the metrics listener (profiling; keep it off in production)")
	fs.StringVar(&c.HealthAddr, "health-addr", "", "health listener host:port for /healthz and /readyz (default <first local IP>:8080)")
	fs.StringVar(&c.AdminSocket, "admin-socket", "/run/nodecache/admin.sock", "root-only unix socket for the CLI")
	fs.StringVar(&c.HandoverSocket, "handover-socket", "/run/nodecache/handover.sock", "unix socket for handing listeners to a successor")
	durationVar(fs, &c.HandoverWait, "handover-timeout", 5*time.Second, "how long to wait for a predecessor's handover")
	fs.StringVar(&c.PodStateDir, "pod-state-dir", "", "pod-scoped directory (an emptyDir) for the probe socket and handover state; set in a pod: after a handover the agent then idles until its pod is deleted instead of exiting")
	fs.StringVar(&c.PodUID, "pod-uid", os.Getenv("POD_UID"), "this pod's UID, so a successor never hands the sockets back to it (default $POD_UID)")
	fs.StringVar(&c.PodName, "pod-name", os.Getenv("POD_NAME"), "this pod's name: on SIGTERM the agent tears down only if its pod is being deleted, not when just its container restarts (default $POD_NAME)")
	fs.StringVar(&c.PodNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "this pod's namespace (default $POD_NAMESPACE)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar((*string)(&c.LogFormat), "log-format", "text", "text or json")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file with the same settings (keys are flag names); flags win")
	durationVar(fs, &c.ConfigCheckInterval, "config-check-interval", 5*time.Second, "how often --config and the kube-dns ConfigMap are checked for changes, applied live (0: only on SIGHUP and nodecache reload)")
	return fs
}

// durationFlag is a time.Duration flag whose error says what a duration is.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration: give a number with a unit, e.g. 10s, 500ms, 1h", v)
	}
	if d < 0 {
		return fmt.Errorf("%q: durations must not be negative", v)
	}
	*f.d = d
	return nil
}

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationFlag{p}, name, usage)
}

// parseRunConfig parses args, then the --config file, then validates.
func parseRunConfig(args []string) (*runConfig, error) {
	c := &runConfig{args: args}
	fs := newRunFlags(c)
	fs.SetOutput(io.Discard) // errors are returned as one line; -h prints below
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Fprintln(os.Stdout, "Usage: nodecache run [flags]")
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.ConfigFile != "" {
		if err := applyConfigFile(fs, c.ConfigFile); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// applyConfigFile sets, from a YAML map of flag names to values, every flag
// not given on the command line.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading --config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("--config %s is not valid YAML: %w", path, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "config" || fs.Lookup(k) == nil {
			return fmt.Errorf("--config %s: unknown setting %q (keys are flag names, e.g. local-ip)", path, k)
		}
		if set[k] {
			continue
		}
		vals := []any{m[k]}
		if list, ok := m[k].([]any); ok {
			if _, repeatable := fs.Lookup(k).Value.(*listFlag); repeatable {
				vals = list
			} else {
				var parts []string
				for _, v := range list {
					parts = append(parts, fmt.Sprint(v))
				}
				vals = []any{strings.Join(parts, ",")}
			}
		}
		for _, v := range vals {
			if err := fs.Set(k, fmt.Sprint(v)); err != nil {
				return fmt.Errorf("--config %s: setting %s: %w", path, k, err)
			}
		}
	}
	return nil
}

func (c *runConfig) validate() error {
	switch {
	case len(c.LocalIPs) == 0:
		return errors.New("--local-ip: at least one IP is required")
	case c.Port == 0 || c.Port > 65535:
		return fmt.Errorf("--port %d: want 1 to 65535", c.Port)
	case c.Kubeconfig != "" && c.Fixture != "":
		return errors.New("--kubeconfig and --fixture are exclusive: the zone comes from one source")
	case c.CacheSize < 1<<20:
		return fmt.Errorf("--cache-size %d bytes is too small: give at least 1MiB", c.CacheSize)
	case c.RelistSpread < 0:
		return errors.New("--relist-spread must not be negative (0 relists at once), e.g. 10s")
	case c.SnapshotAge <= 0:
		return errors.New("--zone-snapshot-max-age must be a positive duration, e.g. 1h")
	case c.TTL <= 0 || c.NegativeTTL <= 0:
		return errors.New("--ttl and --negative-ttl must be positive durations, e.g. 5s")
	case c.SyncInterval < 100*time.Millisecond:
		return fmt.Errorf("--sync-interval %v is too short: give at least 100ms (e.g. 10s)", c.SyncInterval)
	case c.UpstreamTimeout <= 0 || c.UpstreamDeadline < c.UpstreamTimeout:
		return errors.New("--upstream-timeout must be positive and --upstream-deadline at least as long")
	case c.ClientQPSLimit < 0 || c.ClientBurst < 0:
		return errors.New("--client-qps-limit and --client-burst must not be negative")
	case c.MaxTCPConnsPerClient < 1 || c.MaxInFlightPerClient < 1:
		return errors.New("--max-tcp-conns-per-client and --max-inflight-per-client must be at least 1")
	case c.LogFormat.Validate() != nil:
		return c.LogFormat.Validate()
	}
	if c.Dnstap != "" {
		if _, _, err := tap.ParseAddr(c.Dnstap); err != nil {
			return fmt.Errorf("--dnstap: %w", err)
		}
	}
	if err := c.QueryLog.validate(); err != nil {
		return err
	}
	for _, a := range []struct{ name, v string }{{"--metrics-addr", c.MetricsAddr}, {"--health-addr", c.HealthAddr}} {
		if a.v == "" {
			continue
		}
		ap, err := netip.ParseAddrPort(a.v)
		if err != nil {
			return fmt.Errorf("%s %q: want IP:port: %w", a.name, a.v, err)
		}
		if ap.Addr().IsUnspecified() {
			return fmt.Errorf("%s %q: refusing to listen on every address; give a local IP", a.name, a.v)
		}
	}
	return nil
}

// defaultAddr is host:port on the first local IP.
func (c *runConfig) defaultAddr(v string, port uint16) string {
	if v != "" {
		return v
	}
	return netip.AddrPortFrom(c.LocalIPs[0], port).String()
}
