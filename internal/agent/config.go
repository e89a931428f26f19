package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// Config is every setting of `nodecache run`. Flags fill it; a --config
// YAML file fills what the flags left unset (flags win).
type Config struct {
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
	// AcceptInterfaces and AcceptSources restrict the ACCEPT rules for the
	// local IPs (iface.Config); empty: anyone who reaches them.
	AcceptInterfaces []string
	AcceptSources    []netip.Prefix

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
	UpstreamForceTCP     bool
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
	WatchPods      bool // see podaccess.go
	LoadBalance    bool
	SuppressAAAA   []string
	ClientQPSLimit float64
	ClientBurst    int

	Dnstap   string
	QueryLog queryLogConfig

	MetricsAddr    string
	Pprof          bool
	PprofAddr      string // where --pprof serves; never the metrics or health listener
	HealthAddr     string
	AdminSocket    string
	HandoverSocket string
	HandoverWait   time.Duration
	PodStateDir    string
	Supervise      bool
	JournalSize    byteSize
	PodUID         string
	PodName        string
	PodNamespace   string
	LogLevel       string
	LogFormat      logFormat
	ConfigFile     string

	ConfigCheckInterval time.Duration
	args                []string        // the command line, parsed again by a reload
	fromFlags           map[string]bool // settings given on the command line, not from --config
}

// ParseConfig parses args, then the --config file, then validates.
func ParseConfig(args []string) (*Config, error) {
	c := &Config{args: args}
	fs := NewFlagSet(c)
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
	c.fromFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.fromFlags[f.Name] = true })
	if c.ConfigFile != "" {
		if err := applyConfigFile(fs, c.ConfigFile); err != nil {
			return nil, c.locate(err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, c.locate(err)
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

func (c *Config) validate() error {
	switch {
	case len(c.LocalIPs) == 0:
		return errors.New("--local-ip: at least one IP is required")
	case c.Port == 0 || c.Port > 65535:
		return fmt.Errorf("--port %d: want 1 to 65535", c.Port)
	case c.Kubeconfig != "" && c.Fixture != "":
		return errors.New("--kubeconfig and --fixture are exclusive: the zone comes from one source")
	case c.CacheSize < 1<<20:
		return fmt.Errorf("--cache-size %d bytes is too small: give at least 1MiB", c.CacheSize)
	case c.JournalSize != 0 && (c.JournalSize < cache.MinJournalBytes || c.JournalSize > 1<<30):
		return fmt.Errorf("--cache-journal-size %d bytes: want 0 (no journal) or 256KiB to 1GiB", c.JournalSize)
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
	if len(c.AcceptInterfaces) > 0 || len(c.AcceptSources) > 0 {
		if !c.SetupIPTables {
			return errors.New("--accept-interfaces and --accept-sources restrict the agent's ACCEPT rules: they need --setup-iptables")
		}
		ic := iface.Config{LocalIPs: c.LocalIPs, AcceptInterfaces: c.AcceptInterfaces, AcceptSources: c.AcceptSources}
		if err := ic.ValidateAccept(); err != nil {
			return fmt.Errorf("--accept-interfaces/--accept-sources: %w", err)
		}
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
	return c.validatePprofAddr()
}

// validatePprofAddr refuses a --pprof-addr that would put the profiles on
// the node's network by default: every address, or the metrics or health
// listener (which the DaemonSet binds to the node's IP). The addresses
// are compared only with --pprof on.
func (c *Config) validatePprofAddr() error {
	ap, err := netip.ParseAddrPort(c.PprofAddr)
	switch {
	case err != nil:
		return fmt.Errorf("--pprof-addr %q: want IP:port, e.g. 127.0.0.1:6053: %w", c.PprofAddr, err)
	case ap.Addr().IsUnspecified():
		return fmt.Errorf("--pprof-addr %q: refusing to serve profiles on every address; give a local IP (loopback: 127.0.0.1:6053)", c.PprofAddr)
	case !c.Pprof:
		return nil
	}
	for _, other := range []struct{ name, addr string }{{"--metrics-addr", c.metricsAddr()}, {"--health-addr", c.healthAddr()}} {
		if o, err := netip.ParseAddrPort(other.addr); err == nil && o == ap {
			return fmt.Errorf("--pprof-addr %q: the same as %s; profiles get a listener of their own (default 127.0.0.1:6053)", c.PprofAddr, other.name)
		}
	}
	return nil
}

// healthAddr is --health-addr, by default port 8080 on the first local IP.
func (c *Config) healthAddr() string { return c.defaultAddr(c.HealthAddr, 8080) }

// metricsAddr is --metrics-addr, by default port 9253 on the first local IP.
func (c *Config) metricsAddr() string { return c.defaultAddr(c.MetricsAddr, 9253) }

// defaultAddr is host:port on the first local IP.
func (c *Config) defaultAddr(v string, port uint16) string {
	if v != "" {
		return v
	}
	return netip.AddrPortFrom(c.LocalIPs[0], port).String()
}
