package agent

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/tap"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// The config builders: one pure function per component that turns the
// agent's Config into the component's, so that build only wires and each
// mapping (defaults, units, "0 means off") is tested alone.

// upstreamConfig is the forwarder's config: the servers of --upstream (or
// the kube-dns ConfigMap's upstreamNameservers, which replace them unless
// --upstream names a DNS over TLS server: those are kept, and the
// ConfigMap's servers returned in stubConfig.refusedUps), the
// stub domains with their options, the DNS over TLS servers among them,
// queries sent from the listen addresses localAddrs, and tap (nil: none).
// It also returns the stub domains' settings, for the cache's TTL caps.
// Reading --upstream-tls-ca, a resolv.conf and the ConfigMap directory is
// all it does besides mapping.
func upstreamConfig(cfg *Config, localAddrs []netip.AddrPort, tap upstream.Tap) (upstream.Config, stubConfig, error) {
	roots, err := tlsRoots(cfg.UpstreamTLSCA)
	if err != nil {
		return upstream.Config{}, stubConfig{}, err
	}
	ups, err := upstream.ParseServers(cfg.Upstream)
	if err != nil {
		return upstream.Config{}, stubConfig{}, fmt.Errorf("--upstream: %w", err)
	}
	stubs, kubeUps, err := loadStubs(cfg.KubeDNSConfig, cfg.StubDomains)
	if err != nil {
		return upstream.Config{}, stubConfig{}, err
	}
	switch {
	case len(kubeUps) > 0 && len(ups.TLSNames) > 0:
		stubs.refusedUps = kubeUps // plain DNS must not replace DNS over TLS
	case len(kubeUps) > 0:
		ups = upstream.ServerList{Addrs: kubeUps}
	}
	tlsNames := maps.Clone(stubs.tlsNames)
	maps.Copy(tlsNames, ups.TLSNames)
	fcfg := upstream.Config{
		Servers: ups.Addrs, StubDomains: stubs.servers, StubOptions: stubs.opts, Policy: cfg.UpstreamPolicy,
		ForceTCP:   cfg.UpstreamForceTCP,
		TryTimeout: cfg.UpstreamTimeout, Deadline: cfg.UpstreamDeadline,
		MaxInFlight: cfg.MaxUpstreamInFlight, LocalAddrs: localAddrs, Tap: tap,
		TLS: upstream.TLSConfigs(tlsNames, roots),
	}
	if err := fcfg.Validate(); err != nil {
		return upstream.Config{}, stubConfig{}, fmt.Errorf("upstreams: %w", err)
	}
	return fcfg, stubs, nil
}

// tlsRoots reads --upstream-tls-ca: the CAs that verify DNS over TLS
// servers (nil: the system's).
func tlsRoots(caFile string) (*x509.CertPool, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--upstream-tls-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--upstream-tls-ca %s: no PEM certificate in it", caFile)
	}
	return roots, nil
}

// stubConfig is what the stub domains give the forwarder and the cache.
type stubConfig struct {
	servers  map[string][]netip.AddrPort
	opts     map[string]upstream.StubOptions
	limits   map[string]cache.ZoneLimit
	tlsNames map[netip.AddrPort]string // the stub servers reached over DNS over TLS
	// refusedUps are the kube-dns ConfigMap's upstreamNameservers when
	// they were not used: --upstream names DNS over TLS servers, which
	// plain servers must not replace (upstreamConfig).
	refusedUps []netip.AddrPort
}

// errKubeDNSConfig marks an error in the mounted kube-dns ConfigMap, which
// node-cache counts as a configmap setup error.
var errKubeDNSConfig = errors.New("kube-dns ConfigMap")

// loadStubs reads the kube-dns ConfigMap directory (when set) and the
// --stub-domain specs, which win over it. It also returns the
// ConfigMap's upstreamNameservers, which replace --upstream.
func loadStubs(kubeDNSDir string, specs []string) (stubConfig, []netip.AddrPort, error) {
	sc := stubConfig{servers: map[string][]netip.AddrPort{}, opts: map[string]upstream.StubOptions{},
		limits: map[string]cache.ZoneLimit{}, tlsNames: map[netip.AddrPort]string{}}
	var ups []netip.AddrPort
	if kubeDNSDir != "" {
		s, u, err := upstream.LoadKubeDNSConfig(kubeDNSDir)
		if err != nil {
			return sc, nil, fmt.Errorf("--kube-dns-config-dir: %w: %w", errKubeDNSConfig, err)
		}
		sc.servers, ups = s, u
	}
	for _, spec := range specs {
		s, err := upstream.ParseStub(spec)
		if err != nil {
			return sc, nil, fmt.Errorf("--stub-domain %q: %w", spec, err)
		}
		sc.servers[s.Domain] = s.Servers.Addrs
		if s.Options != (upstream.StubOptions{}) {
			sc.opts[s.Domain] = s.Options
		}
		if l := (cache.ZoneLimit{MaxTTL: s.MaxTTL, MaxNegativeTTL: s.MaxNegativeTTL}); l != (cache.ZoneLimit{}) {
			sc.limits[s.Domain] = l
		}
		maps.Copy(sc.tlsNames, s.Servers.TLSNames)
	}
	return sc, ups, nil
}

// zoneLimitsFor is the cache's TTL caps: per stub domain, and for the
// root (the cache-wide --max-ttl and --max-negative-ttl, live this way).
func zoneLimitsFor(cfg *Config, stubs stubConfig) map[string]cache.ZoneLimit {
	out := map[string]cache.ZoneLimit{".": {MaxTTL: cfg.MaxTTL, MaxNegativeTTL: cfg.MaxNegativeTTL}}
	for z, l := range stubs.limits {
		out[z] = l
	}
	return out
}

// staticConfig is the static records' config: --static-record lines,
// --static-file hosts files, their TTL and whether PTR queries are answered.
func staticConfig(cfg *Config) static.Config {
	return static.Config{Entries: cfg.StaticRecords, Files: cfg.StaticFiles, TTL: cfg.StaticTTL, NoReverse: cfg.StaticNoReverse}
}

// cacheConfig is the cache's config from the agent's: 0 (off) becomes
// the cache's "disabled" for serve-stale, and --prefetch=false likewise.
func cacheConfig(cfg *Config, zoneLimits map[string]cache.ZoneLimit) cache.Config {
	c := cache.Config{
		MaxBytes: int64(cfg.CacheSize), MaxTTL: cfg.MaxTTL, MaxNegativeTTL: cfg.MaxNegativeTTL,
		StaleMaxAge: cfg.StaleMaxAge, ZoneLimits: zoneLimits,
	}
	if c.StaleMaxAge == 0 {
		c.StaleMaxAge = -1
	}
	if !cfg.Prefetch {
		c.PrefetchPercent = -1
	}
	return c
}

// zoneSource reports whether cfg gives the cluster zone a source: a
// kubeconfig, a fixture, or the in-cluster config of a pod.
func zoneSource(cfg *Config) bool {
	return cfg.Kubeconfig != "" || cfg.Fixture != "" || InCluster()
}

// zoneConfig is the cluster zone's config.
func zoneConfig(cfg *Config) kubezone.Config {
	pods, node := zonePods(cfg)
	return kubezone.Config{
		Domain: cfg.ClusterDomain, TTL: cfg.TTL, NegativeTTL: cfg.NegativeTTL, Pods: pods,
		NodeName: node, LocalIPs: cfg.LocalIPs, SnapshotPath: cfg.ZoneSnapshot,
		SnapshotMaxAge: cfg.SnapshotAge, RelistSpread: relistSpread(cfg.RelistSpread),
	}
}

// relistSpread maps --relist-spread to kubezone.Config.RelistSpread, where
// zero means the default and a negative value no spread.
func relistSpread(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// serverConfig is the DNS server's config: its listen addresses, the stub
// domains (names it forwards, never autopaths), and its per-client limits.
// The autopath search list is the node's, read from the resolv.conf that
// --upstream names (none when it lists addresses).
func serverConfig(cfg *Config, addrs []netip.AddrPort, stubDomains []string) server.Config {
	return server.Config{
		Addrs: addrs, MaxTCPConns: cfg.MaxTCPConns, TCPIdleTimeout: cfg.TCPIdleTimeout,
		MaxTCPConnsPerClient: cfg.MaxTCPConnsPerClient, MaxInFlightPerClient: cfg.MaxInFlightPerClient,
		Domain: cfg.ClusterDomain, StubDomains: stubDomains, Autopath: autopathOn(cfg), AutopathSearch: hostSearch(cfg),
		ClientQPS: cfg.ClientQPSLimit, ClientBurst: cfg.ClientBurst, LoadBalance: cfg.LoadBalance,
		SuppressAAAA: cfg.SuppressAAAA,
	}
}

// stubDomainNames are the stub domains of stubs, in no particular order.
func stubDomainNames(stubs stubConfig) []string {
	names := make([]string, 0, len(stubs.servers))
	for d := range stubs.servers {
		names = append(names, d)
	}
	return names
}

// IfaceConfig is the interface and rules manager's config. The health and
// metrics ports that listen on a local IP get ACCEPT/NOTRACK rules too.
// `nodecache cleanup` removes what a manager of this config would keep.
func IfaceConfig(cfg *Config) iface.Config {
	return iface.Config{
		InterfaceName: cfg.InterfaceName, LocalIPs: cfg.LocalIPs, Port: uint16(cfg.Port),
		ExtraTCPPorts:  localHTTPPorts(cfg),
		SetupInterface: cfg.SetupInterface, SetupIPTables: cfg.SetupIPTables,
		IPTablesMode: cfg.IPTablesMode, SyncInterval: cfg.SyncInterval,
		AcceptInterfaces: cfg.AcceptInterfaces, AcceptSources: cfg.AcceptSources,
	}
}

// localHTTPPorts are the health and metrics ports that listen on a local IP
// and so need ACCEPT/NOTRACK rules too.
func localHTTPPorts(cfg *Config) []uint16 {
	var ports []uint16
	for _, s := range []string{cfg.healthAddr(), cfg.metricsAddr()} {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			continue
		}
		for _, ip := range cfg.LocalIPs {
			if ap.Addr() == ip {
				ports = append(ports, ap.Port())
				break
			}
		}
	}
	return ports
}

// tapConfig is the dnstap output's config: identity is the node name, else
// hostname.
func tapConfig(cfg *Config, version, hostname string) tap.Config {
	identity := cfg.NodeName
	if identity == "" {
		identity = hostname
	}
	return tap.Config{Addr: cfg.Dnstap, Identity: identity, Version: "nodecache " + version}
}
